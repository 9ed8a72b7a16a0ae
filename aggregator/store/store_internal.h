// Shared by the store's translation units (the parts of store.h); not part of its interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/db.h"
#include "aggregator/store/symptom_dictionary.h"
#include "aggregator/store/store_rows.h"
#include "aggregator/store/symptom_codec.h"

namespace faultline::aggregator {

// The checks of a batch that need no store: "" when it may be stored, else the reason.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
IngestResult rejectedResult(std::string reason);

// A source's status row counts for the verdicts' coverage (live_unrecognized.h, coveredByKind)
// once it read records and is ok or partial: source_status.counted_ns holds when it began to
// (migration 11; 0 while it does not). The value a write binds for it, and the upsert's term that
// keeps the first time while the row goes on counting.
inline int64_t countedAt(uint64_t records, std::string_view status, int64_t now_ns) {
  return records > 0 && (status == "ok" || status == "partial") ? now_ns : 0;
}
inline constexpr std::string_view kCountedOnConflict =
    "counted_ns=CASE WHEN excluded.counted_ns = 0 THEN 0 WHEN source_status.counted_ns > 0 THEN "
    "source_status.counted_ns ELSE excluded.counted_ns END";

// A list of strings as a JSON array (bound as one parameter: Db::jsonList), and back (anything
// but an array of strings: the strings in it, or none).
std::string joinJsonArray(const std::vector<std::string>& v);
std::vector<std::string> parseJsonArray(const std::string& s);

// A symptom row's columns that decodeSymptomRow (symptom_codec.h) takes, as a select list; and
// the symptom of the row a statement selected them for, from column `first_col` on.
// A packed payload whose dictionary `dicts` lacks (stored by another replica) has it loaded from
// `db` first.
extern const std::string_view kSymptomRowColumns;
SymptomColumns symptomColumnsAt(const sql::Stmt& s, int first_col);  // all but the payload
common::Symptom symptomRowAt(const sql::Stmt& s, int first_col, sql::Db& db, PayloadDictionaries& dicts,
                             size_t max_evidence = SIZE_MAX);

// Store migration 9's rewrite: every symptom row's JSON payload replaced by the compact form
// (symptom_codec.h) where that reads back as the same symptom. In the migration's transaction.
bool compactSymptomPayloads(sql::Db& db, std::string* error);

// ---- packed payloads (symptom_pack.cpp) ----
// Store migration 10's rewrite: on PostgreSQL the payload column becomes BYTEA; a dictionary is
// trained from the stored compact payloads (when there are enough) and every one of them packed
// with it. In the migration's transaction.
bool packSymptomPayloads(sql::Db& db, std::string* error);
// Every stored dictionary into `dicts`; the newest becomes the current one when `make_current`.
bool loadDictionaries(sql::Db& db, PayloadDictionaries& dicts, bool make_current);
// A payload bound as the engine's column wants it: PostgreSQL's is BYTEA (migration 10); SQLite
// keeps text as text and a packed payload as a blob. Not copied (hot loops).
void bindPayloadRef(sql::Stmt& s, int i, std::string_view payload, bool postgres);
// A stored dictionary's id (written in the caller's transaction); 0 on failure.
int64_t insertDictionary(sql::Db& db, std::string_view bytes);

// The verdict's window read (SymptomStore::symptomsForWindow) of `columns`: the symptoms of the
// nodes in `node_set` (a Db's jsonList(1)) timed inside [?2, ?3], or untimed and received inside
// [?2, ?4], in node order. Migration 6's index answers it without the table for id and node.
std::string windowQuery(std::string_view columns, std::string_view node_set);

}  // namespace faultline::aggregator

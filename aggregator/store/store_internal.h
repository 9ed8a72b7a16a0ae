// Shared by the store's translation units (the parts of store.h); not part of its interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/db.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

// The checks of a batch that need no store: "" when it may be stored, else the reason.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
IngestResult rejectedResult(std::string reason);

// A list of strings as a JSON array (bound as one parameter: Db::jsonList), and back (anything
// but an array of strings: the strings in it, or none).
std::string joinJsonArray(const std::vector<std::string>& v);
std::vector<std::string> parseJsonArray(const std::string& s);

// A symptom row's columns that decodeSymptomRow (symptom_codec.h) takes, as a select list; and
// the symptom of the row a statement selected them for, from column `first_col` on.
extern const std::string_view kSymptomRowColumns;
common::Symptom symptomRowAt(const sql::Stmt& s, int first_col, size_t max_evidence = SIZE_MAX);

// Store migration 9's rewrite: every symptom row's JSON payload replaced by the compact form
// (symptom_codec.h) where that reads back as the same symptom. In the migration's transaction.
bool compactSymptomPayloads(sql::Db& db, std::string* error);

// The verdict's window read (SymptomStore::symptomsForWindow) of `columns`: the symptoms of the
// nodes in `node_set` (a Db's jsonList(1)) timed inside [?2, ?3], or untimed and received inside
// [?2, ?4], in node order. Migration 6's index answers it without the table for id and node.
std::string windowQuery(std::string_view columns, std::string_view node_set);

}  // namespace faultline::aggregator

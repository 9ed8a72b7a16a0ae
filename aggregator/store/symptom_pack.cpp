// Symptom payloads as stored: the rewrites of migrations 9 (compact) and 10 (packed), the
// dictionaries' table, and the writer's first dictionary (store_internal.h, symptom_store.h).
#include <fmt/format.h>

#include <optional>

#include "aggregator/store/db.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/symptom_dictionary.h"
#include "aggregator/store/symptom_store.h"

namespace faultline::aggregator {

using sql::Stmt;

namespace {

// A dictionary's size at most: zstd's default; larger ones gained nothing on the samples' rows.
constexpr size_t kDictionaryBytes = 32 << 10;
// Migration 10 trains from the first rows of a store, when it has at least the fewer of these.
constexpr int64_t kMigrationSamples = 8192;
constexpr size_t kMigrationMinSamples = 256;

// Every symptom row's payload through `rewrite` (columns, payload) -> the new payload, or nullopt
// to keep it; a chunk of rows read, then rewritten (SQLite cannot update a table under an open
// read of it). `what` names the rewrite in errors. `packed_column`: the column is migration 10's
// (BYTEA on PostgreSQL), else still TEXT.
template <class Rewrite>
bool rewritePayloads(sql::Db& db, std::string_view what, bool packed_column, Rewrite rewrite, std::string* error) {
  constexpr int64_t kChunk = 4096;
  std::vector<std::pair<int64_t, std::string>> rewrites;
  for (int64_t after = 0;;) {
    rewrites.clear();
    Stmt read(db.get(), fmt::format("SELECT id, {} FROM symptoms WHERE id > ? ORDER BY id LIMIT ?", kSymptomRowColumns));
    read.bind(1, after).bind(2, kChunk);
    int64_t rows = 0;
    int rc;
    while ((rc = read.step()) == sql::kRow) {
      ++rows;
      after = read.i64(0);
      if (auto p = rewrite(symptomColumnsAt(read, 1), read.view(12))) rewrites.emplace_back(after, std::move(*p));
    }
    if (rc != sql::kDone) {
      *error = fmt::format("{}: {}", what, db.errmsg());
      return false;
    }
    Stmt update(db, "UPDATE symptoms SET payload = ? WHERE id = ?");
    for (const auto& [id, payload] : rewrites) {
      update.reset();
      if (packed_column) bindPayloadRef(update, 1, payload, db.postgres());
      else update.bindRef(1, payload);
      update.bind(2, id);
      if (update.step() != sql::kDone) {
        *error = fmt::format("{}: {}", what, db.errmsg());
        return false;
      }
    }
    if (rows < kChunk) return true;
  }
}

}  // namespace

bool compactSymptomPayloads(sql::Db& db, std::string* error) {
  return rewritePayloads(
      db, "compacting symptom payloads", false,
      [](const SymptomColumns& columns, std::string_view payload) -> std::optional<std::string> {
        if (payload.empty() || payload[0] != '{') return std::nullopt;
        // Kept as it is unless the compact row reads back as the same symptom (a row whose columns
        // disagree with its payload, or text the compact form cannot carry, stays JSON).
        const common::Symptom legacy = symptomFromPayload(payload);
        std::string compact = encodeSymptomPayload(legacy, columns.boot_id);
        if (compact.empty() || compact[0] != kCompactPayloadTag ||
            symptomJsonText(decodeSymptomRow(columns, compact)) != symptomJsonText(legacy))
          return std::nullopt;
        return compact;
      },
      error);
}

bool packSymptomPayloads(sql::Db& db, std::string* error) {
  if (db.postgres() &&
      !db.exec("ALTER TABLE symptoms ALTER COLUMN payload TYPE BYTEA USING convert_to(payload, 'UTF8')", error))
    return false;
  std::vector<std::string> samples;
  {
    Stmt s(db.get(), "SELECT payload FROM symptoms ORDER BY id LIMIT ?");
    s.bind(1, kMigrationSamples);
    while (s.step() == sql::kRow)
      if (auto p = s.view(0); !p.empty() && p[0] == kCompactPayloadTag) samples.emplace_back(p);
  }
  // Too few rows to learn from: they stay compact, and the writer trains a dictionary later.
  if (samples.size() < kMigrationMinSamples) return true;
  auto bytes = trainPayloadDictionary(samples, kDictionaryBytes);
  if (!bytes) return true;
  const int64_t id = insertDictionary(db, *bytes);
  if (!id) {
    *error = "storing a symptom dictionary: " + db.errmsg();
    return false;
  }
  const PayloadDictionary dict(id, std::move(*bytes));
  std::string check;
  return rewritePayloads(
      db, "packing symptom payloads", true,
      [&](const SymptomColumns&, std::string_view payload) -> std::optional<std::string> {
        if (payload.empty() || payload[0] != kCompactPayloadTag) return std::nullopt;
        std::string packed = dict.pack(std::string(payload));
        // Kept compact unless it unpacks to the same bytes.
        if (packed[0] != kPackedPayloadTag || !dict.unpack(packed, &check) || check != payload.substr(1))
          return std::nullopt;
        return packed;
      },
      error);
}

bool loadDictionaries(sql::Db& db, PayloadDictionaries& dicts, bool make_current) {
  Stmt s(db.get(), "SELECT id, dictionary FROM symptom_dictionaries ORDER BY id");
  int rc;
  while ((rc = s.step()) == sql::kRow) dicts.add(s.i64(0), std::string(s.view(1)), make_current);
  return rc == sql::kDone;
}

void bindPayloadRef(Stmt& s, int i, std::string_view payload, bool postgres) {
  if (postgres || (!payload.empty() && payload[0] == kPackedPayloadTag)) s.bindBlobRef(i, payload);
  else s.bindRef(i, payload);
}

int64_t insertDictionary(sql::Db& db, std::string_view bytes) {
  Stmt s(db.get(), "INSERT INTO symptom_dictionaries(dictionary) VALUES(?) RETURNING id");
  s.bindBlob(1, bytes);
  const int64_t id = s.step() == sql::kRow ? s.i64(0) : 0;
  s.reset();  // RETURNING: the statement is done (SQLite cannot commit under an open one)
  return id;
}

SymptomColumns symptomColumnsAt(const Stmt& s, int c) {
  SymptomColumns r;
  r.node = s.view(c);
  r.rule_id = s.view(c + 1);
  r.sub_domain = s.view(c + 2);
  r.role = s.view(c + 3);
  r.severity = s.view(c + 4);
  r.device = s.view(c + 5);
  r.boot_id = s.view(c + 6);
  r.first_ns = s.i64(c + 7);
  r.last_ns = s.i64(c + 8);
  r.time_known = s.i64(c + 9) == 1;
  r.count = s.i64(c + 10);
  return r;
}

common::Symptom symptomRowAt(const Stmt& s, int first_col, sql::Db& db, PayloadDictionaries& dicts,
                             size_t max_evidence) {
  const std::string_view payload = s.view(first_col + 11);
  if (auto id = packedDictionaryId(payload); id && !dicts.find(*id)) loadDictionaries(db, dicts, false);
  return decodeSymptomRow(symptomColumnsAt(s, first_col), payload, max_evidence, &dicts);
}

// ---- the writer's first dictionary ----

std::string SymptomStore::packedPayload(const common::Symptom& s, std::string_view row_boot_id) const {
  std::string compact = encodeSymptomPayload(s, row_boot_id);
  const auto dict = core_.dictionaries.current();
  return dict ? dict->pack(std::move(compact)) : compact;
}

void SymptomStore::learnDictionary(const std::vector<const std::string*>& payloads) {
  if (core_.dictionary_train_rows == 0 || core_.pending_dictionary || core_.dictionaries.current()) return;
  for (const std::string* p : payloads)
    if (!p->empty() && (*p)[0] == kCompactPayloadTag && core_.dictionary_samples.size() < core_.dictionary_train_rows)
      core_.dictionary_samples.push_back(*p);
  if (core_.dictionary_samples.size() < core_.dictionary_train_rows) return;
  auto bytes = trainPayloadDictionary(core_.dictionary_samples, kDictionaryBytes);
  if (!bytes) {
    // Too little to learn from: twice the samples next time.
    core_.dictionary_train_rows *= 2;
    return;
  }
  const int64_t id = insertDictionary(*db_, *bytes);
  if (!id) return;  // the transaction's other writes decide; the next run tries again
  core_.pending_dictionary = std::make_shared<const PayloadDictionary>(id, std::move(*bytes));
}

void SymptomStore::settleDictionary(bool committed) {
  if (!core_.pending_dictionary) return;
  if (committed) {
    core_.dictionaries.add(core_.pending_dictionary->id(), core_.pending_dictionary->bytes(), true);
    core_.dictionary_samples = {};
  }
  core_.pending_dictionary.reset();
}

std::shared_ptr<const PayloadDictionary> SymptomStore::packingDictionary() const {
  return core_.pending_dictionary ? core_.pending_dictionary : core_.dictionaries.current();
}

}  // namespace faultline::aggregator

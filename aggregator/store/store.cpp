// The Store facade (store.h): opens the connections and builds the parts; the helpers the parts
// share (store_internal.h).
#include "aggregator/store/store.h"

#include <fmt/format.h>

#include <cctype>

#include "aggregator/store/db.h"
#include "aggregator/store/store_internal.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

std::string_view ingestStatusName(IngestResult::Status s) {
  switch (s) {
    case IngestResult::Status::kStored: return "stored";
    case IngestResult::Status::kDuplicate: return "duplicate";
    case IngestResult::Status::kRejected: return "rejected";
  }
  return "?";
}

bool isActiveJobState(std::string_view s) {
  for (std::string_view a : {"RUNNING", "PENDING", "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED",
                             "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED"})
    if (s.substr(0, a.size()) == a) return true;
  return false;
}

bool validJobId(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  for (char c : id)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '+')) return false;
  return true;
}


std::string joinJsonArray(const std::vector<std::string>& v) { return json(v).dump(); }

std::vector<std::string> parseJsonArray(const std::string& s) {
  std::vector<std::string> out;
  json j = json::parse(s, nullptr, false);
  if (j.is_array())
    for (const auto& e : j)
      if (e.is_string()) out.push_back(e.get<std::string>());
  return out;
}

// The checks of a batch that need no store: "" when it may be stored.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  const auto& h = batch.header;
  if (h.agent_id.empty() || h.hostname.empty()) return "missing agent id or hostname";
  if (h.agent_id != authenticated_agent) return "agent id mismatch";
  for (const auto& s : batch.symptoms)
    if (s.node != h.hostname) return "symptom for another node";
  return "";
}

IngestResult rejectedResult(std::string reason) {
  IngestResult r;
  r.status = IngestResult::Status::kRejected;
  r.reason = std::move(reason);
  return r;
}


Store::Store(std::unique_ptr<StoreCore> core)
    : StoreCoreOwner{std::move(core)},
      JobStore(*owned_core),
      SymptomStore(*owned_core),
      VerdictStore(*owned_core),
      NodeStore(*owned_core),
      RelayStore(*owned_core),
      MaintenanceStore(*owned_core) {}

Store::~Store() = default;

namespace {

// The write connection's settings (SQLite; PostgreSQL's commits are durable by the server's
// synchronous_commit).
bool configureSqlite(sql::Db& db, const StoreOptions& options, std::string* why) {
  return db.exec("PRAGMA journal_mode=WAL", why) &&
         db.exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", why) &&
         db.exec("PRAGMA foreign_keys=ON", why) &&
         // A fleet-wide cascade writes into every index at once and a 10,000-node verdict
         // reads ~200k payloads: 64 MiB of page cache (default 2 MiB). No mmap: a read
         // error there is a SIGBUS, not an error code.
         db.exec("PRAGMA cache_size=-65536", why);
}

// The verdict reader's connection (store_core.h), once the schema is current: SQLite in WAL mode
// reads beside the writer; PostgreSQL's is read-only. null when it cannot be opened: verdict
// reads then share the write connection, as before the split.
std::unique_ptr<sql::Db> openReader(const std::string& path, const StoreOptions& options) {
  std::string ignored;
  const bool pg = sql::isPostgresUrl(path);
  auto reader = sql::Db::open(path, pg, &ignored);
  if (reader) reader->setBusyTimeout(options.busy_timeout_ms);
  return reader;
}

}  // namespace

std::unique_ptr<Store> Store::open(const std::string& path, const Clock& clock, StoreOptions options,
                                   std::string* error) {
  auto db = sql::Db::open(path, options.read_only, error);
  if (!db) return nullptr;
  db->setBusyTimeout(options.busy_timeout_ms);
  auto core = std::make_unique<StoreCore>(std::move(db), clock);
  core->cache = SymptomCache(options.read_only ? 0 : options.symptom_cache_bytes);
  core->dictionary_train_rows = options.dictionary_train_rows;
  sql::Db& conn = *core->db;
  std::unique_ptr<Store> store(new Store(std::move(core)));
  if (options.read_only) {
    const int version = store->schemaVersion();
    if (version != latestSchemaVersion()) {
      *error = fmt::format("{}: schema version {} (this faultline reads {})", path, version, latestSchemaVersion());
      return nullptr;
    }
    loadDictionaries(conn, store->owned_core->dictionaries, false);  // else each on first use
    return store;
  }
  std::string why;
  if ((!conn.postgres() && !configureSqlite(conn, options, &why)) || !store->migrate(&why)) {
    *error = sql::redactUrl(path) + ": " + why;
    return nullptr;
  }
  // The dictionaries stored so far (by migration 10, an earlier run or another replica); the
  // newest packs what this process writes.
  if (!loadDictionaries(conn, store->owned_core->dictionaries, true)) {
    *error = sql::redactUrl(path) + ": symptom dictionaries: " + conn.errmsg();
    return nullptr;
  }
  store->owned_core->reader = openReader(path, options);
  return store;
}

}  // namespace faultline::aggregator

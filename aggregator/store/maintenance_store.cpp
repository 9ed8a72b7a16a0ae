// Migrations, retention, meta and counts (maintenance_store.h).
#include "aggregator/store/maintenance_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "aggregator/store/db.h"
#include "aggregator/store/migrations.h"
#include "aggregator/store/store_internal.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

int MaintenanceStore::latestSchemaVersion() { return static_cast<int>(kStoreMigrationCount); }

int MaintenanceStore::schemaVersion() {
  Lock lock(*this);  // also from the API's /healthz: never on a connection another thread is using
  if (db_->postgres()) {
    // A table the first migration creates; none yet = version 0.
    Stmt t(db_->get(), "SELECT to_regclass('faultline_schema') IS NOT NULL");
    if (t.step() != sql::kRow) return -1;
    if (t.i64(0) == 0) return 0;
    Stmt v(db_->get(), "SELECT COALESCE(MAX(version), 0) FROM faultline_schema");
    return v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : -1;
  }
  Stmt v(db_->get(), "PRAGMA user_version");
  return v.ok() && v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : -1;
}

// The stored schema version, or -1 + *error when it cannot be read or is newer than this build.
int MaintenanceStore::migrateFrom(std::string* error) {
  int version = schemaVersion();
  if (version < 0) *error = db_->errmsg();
  if (version > latestSchemaVersion()) {
    *error = fmt::format("schema version {} is newer than this aggregator ({})", version, latestSchemaVersion());
    return -1;
  }
  return version;
}

namespace {

// Rows a migration rewrites after its SQL, in its transaction: its number and the rewrite.
struct RowRewrite {
  int version;
  bool (*run)(sql::Db& db, std::string* error);
};
constexpr RowRewrite kRowRewrites[] = {{9, compactSymptomPayloads}, {10, packSymptomPayloads}};

// Migration i + 1: its SQL in this engine's types (none: rows only) and the rows it rewrites.
bool applyMigration(sql::Db& db, int i, std::string* error) {
  const std::string_view text = kStoreMigrations[i];
  if (!text.empty() && !db.exec(db.postgres() ? db.ddl(text) : std::string(text), error)) return false;
  for (const auto& r : kRowRewrites)
    if (r.version == i + 1 && !r.run(db, error)) return false;
  return true;
}

}  // namespace

bool MaintenanceStore::migrate(std::string* error) {
  if (db_->postgres()) return migratePostgres(error);
  int version = migrateFrom(error);
  if (version < 0) return false;
  for (int i = version; i < latestSchemaVersion(); ++i) {
    sql::Transaction tx(*db_);
    if (!tx.began() || !applyMigration(*db_, i, error) ||
        !db_->exec(fmt::format("PRAGMA user_version={}", i + 1), error) || !tx.commit(error)) {
      *error = fmt::format("migration {}: {}", i + 1, *error);
      return false;
    }
  }
  return true;
}

// The same migrations, in PostgreSQL's types (Db::ddl), each in a transaction under an advisory
// lock: replicas started together migrate once, the others wait and find it done.
bool MaintenanceStore::migratePostgres(std::string* error) {
  sql::Transaction tx(*db_);
  if (!tx.began() || !db_->exec("SELECT pg_advisory_xact_lock(7146601)", error) ||
      !db_->exec("CREATE TABLE IF NOT EXISTS faultline_schema(version INTEGER NOT NULL, applied_ns BIGINT NOT NULL)",
                 error))
    return false;
  int version = migrateFrom(error);
  if (version < 0) return false;
  for (int i = version; i < latestSchemaVersion(); ++i) {
    Stmt mark(db_->get(), "INSERT INTO faultline_schema(version, applied_ns) VALUES(?, ?)");
    mark.bind(1, int64_t(i + 1)).bind(2, clock_.nowNs());
    if (!applyMigration(*db_, i, error) || mark.step() != sql::kDone) {
      if (error->empty()) *error = db_->errmsg();
      *error = fmt::format("migration {}: {}", i + 1, *error);
      return false;
    }
  }
  return tx.commit(error);
}

int64_t MaintenanceStore::metaInt(const std::string& key, int64_t fallback) {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT value FROM meta WHERE key = ?");
  s.bind(1, key);
  return s.step() == sql::kRow ? s.i64(0) : fallback;
}

bool MaintenanceStore::setMetaInt(const std::string& key, int64_t value) {
  Lock lock(*this);
  Stmt s(db_->get(), "INSERT INTO meta(key, value) VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2");
  s.bind(1, key).bind(2, value);
  return s.step() == sql::kDone;
}

size_t MaintenanceStore::pruneStep(int64_t cutoff_ns, int64_t job_cutoff_ns, size_t max_rows) {
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) return 0;
  size_t deleted = 0;
  // One table's step: its oldest eligible rows from the cursor on, in time order, and the cursor
  // moves to the newest time stamp deleted (rows sharing it may be left for the next step).
  // A symptom's id is also dropped from the cache: SQLite may give it to a new row.
  auto walk = [&](const char* q, int64_t cutoff, int64_t* from, bool symptoms = false) {
    if (deleted >= max_rows) return;
    Stmt s(db_->get(), q);
    s.bind(1, cutoff).bind(2, int64_t(max_rows - deleted)).bind(3, *from);
    int64_t newest = *from;
    int rc;
    while ((rc = s.step()) == sql::kRow) {
      ++deleted;
      newest = std::max(newest, s.i64(0));
      if (symptoms) core_.cache.erase(s.i64(1));
    }
    if (rc == sql::kDone) *from = newest;
  };
  walk("DELETE FROM symptoms WHERE id IN (SELECT id FROM symptoms WHERE received_ns >= ?3 AND received_ns < ?1 AND "
       "(time_known = 0 OR last_ns < ?1) ORDER BY received_ns LIMIT ?2) RETURNING received_ns, id",
       cutoff_ns, &core_.prune_cursor.symptoms, true);
  walk("DELETE FROM batches WHERE (agent_id, boot_id, sequence) IN (SELECT agent_id, boot_id, sequence FROM batches "
       "WHERE received_ns >= ?3 AND received_ns < ?1 ORDER BY received_ns LIMIT ?2) RETURNING received_ns",
       cutoff_ns, &core_.prune_cursor.batches);
  walk("DELETE FROM node_events WHERE id IN (SELECT id FROM node_events WHERE time_ns >= ?3 AND time_ns < ?1 "
       "ORDER BY time_ns LIMIT ?2) RETURNING time_ns",
       cutoff_ns, &core_.prune_cursor.node_events);
  walk("DELETE FROM unmatched_templates WHERE id IN (SELECT id FROM unmatched_templates WHERE received_ns >= ?3 AND "
       "received_ns < ?1 ORDER BY received_ns LIMIT ?2) RETURNING received_ns",
       cutoff_ns, &core_.prune_cursor.unmatched);
  auto run = [&](const char* q, int64_t cutoff) {
    if (deleted >= max_rows) return;
    Stmt s(db_->get(), q);
    s.bind(1, cutoff).bind(2, int64_t(max_rows - deleted));
    if (s.step() == sql::kDone) deleted += static_cast<size_t>(db_->changes());
  };
  if (deleted < max_rows) {
    // A job goes once it both ended and was last recorded (updated_ns: the aggregator's clock
    // at the last job event, sacct merge or relayed copy) before the cutoff, as a symptom goes
    // once received and stamped before it. By its end alone, a job event stamped further back
    // than the retention (a backfill, a relay catching up, a replayed sample) was acknowledged and
    // then deleted by the next prune pass, within a minute.
    Stmt old(db_->get(), "SELECT job_id FROM jobs WHERE end_ns > 0 AND end_ns < ?1 AND updated_ns < ?1 LIMIT ?2");
    old.bind(1, job_cutoff_ns).bind(2, int64_t(std::max<size_t>(1, (max_rows - deleted) / 8)));
    std::vector<std::string> ids;
    while (old.step() == sql::kRow) ids.push_back(old.text(0));
    for (const auto& id : ids)
      for (const char* q : {"DELETE FROM verdicts WHERE job_id = ?", "DELETE FROM job_nodes WHERE job_id = ?",
                            "DELETE FROM job_outputs WHERE job_id = ?", "DELETE FROM jobs WHERE job_id = ?"}) {
        Stmt d(db_->get(), q);
        d.bind(1, id).step();
        deleted += static_cast<size_t>(db_->changes());
      }
  }
  // Outputs uploaded for a job the aggregator never learnt of.
  run("DELETE FROM job_outputs WHERE id IN (SELECT id FROM job_outputs WHERE received_ns < ?1 AND "
      "job_id NOT IN (SELECT job_id FROM jobs) LIMIT ?2)",
      job_cutoff_ns);
  if (!tx.commit()) {
    core_.prune_cursor = {};  // rolled back: the next step looks again from the start
    return 0;
  }
  if (deleted < max_rows) core_.prune_cursor = {};  // the pass is over
  return deleted;
}

StoreCounts MaintenanceStore::counts() {
  Lock lock(*this);
  StoreCounts c;
  auto one = [&](const char* q) {
    Stmt s(db_->get(), q);
    return s.step() == sql::kRow ? static_cast<uint64_t>(s.i64(0)) : 0;
  };
  c.agents = one("SELECT COUNT(*) FROM agents");
  c.nodes = one("SELECT COUNT(*) FROM nodes");
  c.symptoms = one("SELECT COUNT(*) FROM symptoms");
  c.batches = one("SELECT COUNT(*) FROM batches");
  c.jobs = one("SELECT COUNT(*) FROM jobs");
  c.verdicts = one("SELECT COUNT(*) FROM verdicts");
  return c;
}

}  // namespace faultline::aggregator

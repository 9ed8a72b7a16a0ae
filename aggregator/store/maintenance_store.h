// The store's upkeep: schema migrations, retention, small key/value state and counts. Owns the
// table meta and the schema bookkeeping (PRAGMA user_version on SQLite, faultline_schema on
// PostgreSQL); pruning deletes from every table by its age (maintenance_store.cpp). Part of the
// Store facade (store.h): every method takes the write connection's lock (store_core.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class MaintenanceStore : protected StorePart {
 public:
  // Small key/value state (engine watermarks).
  int64_t metaInt(const std::string& key, int64_t fallback);
  bool setMetaInt(const std::string& key, int64_t value);

  // Deletes at most `max_rows` symptoms/batches/events older than `cutoff_ns` and jobs (with
  // their verdicts) that ended and were last recorded before `job_cutoff_ns` (a job event is kept
  // that long after it was acknowledged, however long ago the job ended), in one short transaction. Returns the rows
  // deleted; call again while it returns max_rows so ingest can interleave. Each table is walked
  // by a cursor on its time index that the steps of one pass share (a pass ends with a step that
  // deleted fewer than max_rows): a step starts where the last one stopped instead of walking
  // again over the index entries its predecessors deleted, which PostgreSQL keeps until vacuum.
  size_t pruneStep(int64_t cutoff_ns, int64_t job_cutoff_ns, size_t max_rows);

  StoreCounts counts();
  int schemaVersion();
  static int latestSchemaVersion();

 protected:
  explicit MaintenanceStore(StoreCore& core) : StorePart(core) {}
  // Brings the schema to latestSchemaVersion(): the numbered migrations (migrations.h) and the
  // rewrites of rows some of them need (symptom payloads, migration 9). false + *error.
  bool migrate(std::string* error);

 private:
  bool migratePostgres(std::string* error);
  int migrateFrom(std::string* error);
};

}  // namespace faultline::aggregator

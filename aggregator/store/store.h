// The aggregator's durable store: one SQLite file in WAL mode or a PostgreSQL database
// (docs/aggregator.md lists the tables). Schema by numbered migrations; bound parameters only.
//
// Store is a facade over the parts that keep one kind of thing each, every part in its own file
// pair with the statements of the tables it owns:
//
//   part              header               tables
//   JobStore          job_store.h          jobs, job_nodes, job_outputs
//   SymptomStore      symptom_store.h      symptoms, batches, unmatched_templates (+ the cache)
//   VerdictStore      verdict_store.h      verdicts
//   NodeStore         node_store.h         agents, nodes, source_status, node_events, node_inventory
//   RelayStore        relay_store.h        relay_pending, relay_outbox
//   MaintenanceStore  maintenance_store.h  meta, schema version; pruning of every table
//
// Their public methods are Store's. They share the connection layer (db.h: sqlite.cpp,
// postgres.cpp) through StoreCore (store_core.h), which says what each lock guards: one for the
// write connection (writes, group commits, most reads) and one for the verdict reader, so reads
// of verdicts never wait for a symptom group commit.
//
// Threading: a Store may be shared by the ingest loop, the HTTP server and the sacct poller; each
// call blocks for one short transaction. Failures of the environment (disk full, SQLITE_BUSY past
// the busy timeout) come back as a rejected IngestResult or a false/empty result with *error;
// nothing throws.
//
// Durability: each write is one transaction; WAL with synchronous=NORMAL (FULL optional) means
// a kill -9 at any moment leaves either the whole batch or none of it.
#pragma once

#include <memory>
#include <string>

#include "aggregator/clock.h"
#include "aggregator/store/job_store.h"
#include "aggregator/store/maintenance_store.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/relay_store.h"
#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"
#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/symptom_store.h"
#include "aggregator/store/verdict_store.h"

namespace faultline::aggregator {

namespace detail {
// Store's first base, so the core is built before the parts that refer to it and destroyed after.
struct StoreCoreOwner {
  std::unique_ptr<StoreCore> owned_core;
};
}  // namespace detail

class Store final : private detail::StoreCoreOwner,
                    public JobStore,
                    public SymptomStore,
                    public VerdictStore,
                    public NodeStore,
                    public RelayStore,
                    public MaintenanceStore {
 public:
  // Opens or creates the database, runs pending migrations and opens the verdict reader's
  // connection. `clock` must outlive the Store.
  static std::unique_ptr<Store> open(const std::string& path, const Clock& clock, StoreOptions options,
                                     std::string* error);
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

 private:
  explicit Store(std::unique_ptr<StoreCore> core);
};

}  // namespace faultline::aggregator

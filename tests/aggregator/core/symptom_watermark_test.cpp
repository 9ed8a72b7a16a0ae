// Replicas on one PostgreSQL take symptom ids in one order and commit in another: the verdict
// engine's watermark must not pass an id whose row is still being written (Store::settledSymptomId).
#include <atomic>
#include <cstdlib>
#include <thread>

#include <catch2/catch.hpp>

#include "aggregator/store/db.h"
#include "aggregator/store/store.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

TEST_CASE("store: the settled symptom id waits for another replica's symptom writes in flight", "[store][pg]") {
  if (!std::getenv("FAULTLINE_TEST_PG")) {
    SUCCEED("FAULTLINE_TEST_PG is unset: two replicas need PostgreSQL; runs in the [pg] pass");
    return;
  }
  TempDir dir;
  ManualClock clock(kT0);
  auto replica_a = openStore(dir.file("w.db"), clock);
  auto replica_b = openStore(dir.file("w.db"), clock);  // the same database, a second connection

  // A's group takes the first ids and stays open; B stores later ids and commits first.
  REQUIRE(replica_a->beginGroup(nullptr));
  auto early = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid79", kT0), makeSymptom("gpu-01", "gpu.xid48", kT0)});
  REQUIRE(replica_a->ingestBatchGrouped(early, "agent-gpu-01").status == IngestResult::Status::kStored);
  auto late = makeBatch("gpu-02", 1, {makeSymptom("gpu-02", "nccl.timeout", kT0)});
  auto stored = replica_b->ingestBatch(late, "agent-gpu-02");
  REQUIRE(stored.status == IngestResult::Status::kStored);
  // What a watermark at MAX(id) would have seen: B's row only, its id above A's uncommitted ones.
  auto visible = replica_b->symptomsSince(0);
  REQUIRE(visible.size() == 1);
  CHECK(visible[0].node == "gpu-02");
  CHECK(replica_b->maxSymptomId() == stored.last_symptom_id);

  std::atomic<int64_t> settled{-2};
  std::thread waiter([&] { settled = replica_b->settledSymptomId(); });
  // A third connection sees the waiter queued on the advisory lock A's group holds shared.
  std::string error;
  auto admin = sql::Db::open(storeTarget(dir.file("w.db")), false, &error);
  INFO(error);
  REQUIRE(admin);
  bool queued = waitFor([&] {
    sql::Stmt q(admin->get(), "SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted");
    return q.step() == sql::kRow && q.i64(0) > 0;
  });
  CHECK(queued);
  CHECK(settled.load() == -2);  // still waiting for A
  REQUIRE(replica_a->endGroup(nullptr));
  waiter.join();
  CHECK(settled.load() == stored.last_symptom_id);
  auto spans = replica_b->symptomsSince(0, settled.load());
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].node == "gpu-01");
  CHECK(spans[1].node == "gpu-02");
  // Nothing is written meanwhile: settled at once, the same id.
  CHECK(replica_a->settledSymptomId() == settled.load());
}

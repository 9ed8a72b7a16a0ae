#include "aggregator/ingest/ingestor.h"

#include <catch2/catch.hpp>

#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

TEST_CASE("ingest: wire bytes are validated, stored once, and every outcome is counted", "[ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  std::string error;
  auto store = Store::open(testing::storeTarget(dir.file("i.db")), clock, {}, &error);
  REQUIRE(store);
  Metrics metrics;
  Ingestor ingest(*store, metrics, clock);
  auto batch = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid.79", kT0), makeSymptom("gpu-01", "b", kT0)});
  std::string bytes = common::encodeBatch(batch);

  CHECK(ingest.ingestBytes(bytes, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(ingest.ingestBytes(bytes, "agent-gpu-01").status == IngestResult::Status::kDuplicate);  // replay
  CHECK(ingest.ingestBytes("garbage bytes, not capnp", "agent-gpu-01").status == IngestResult::Status::kRejected);
  auto truncated = ingest.ingestBytes(std::string_view(bytes).substr(0, bytes.size() / 2), "agent-gpu-01");
  CHECK(truncated.status == IngestResult::Status::kRejected);
  CHECK(truncated.reason.rfind("decode: ", 0) == 0);
  Ingestor small(*store, metrics, clock, common::DecodeLimits{.max_bytes = 16});
  CHECK(small.ingestBytes(bytes, "agent-gpu-01").reason.rfind("decode: ", 0) == 0);
  CHECK(ingest.ingestBytes(bytes, "agent-gpu-02").reason == "agent id mismatch");

  CHECK(store->counts().symptoms == 2);
  CHECK(metrics.counter("faultline_batches_total", "stored") == 1);
  CHECK(metrics.counter("faultline_batches_total", "duplicate") == 1);
  CHECK(metrics.counter("faultline_batches_total", "rejected") == 4);
  CHECK(metrics.counter("faultline_symptoms_total") == 2);
  CHECK(metrics.counter("faultline_rejects_total", "agent id mismatch") == 1);
  CHECK(metrics.observations("faultline_ingest_seconds") == 2);
  auto text = metrics.render();
  CHECK_THAT(text, Catch::Contains("faultline_rejects_total{reason=\"agent id mismatch\"} 1"));

  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-01";
  hb.hostname = "gpu-01";
  std::string reason;
  CHECK(ingest.heartbeat(hb, "agent-gpu-01", &reason));
  CHECK_FALSE(ingest.heartbeat(hb, "someone", &reason));
  CHECK(metrics.counter("faultline_rejects_total", "heartbeat: agent id mismatch") == 1);
}

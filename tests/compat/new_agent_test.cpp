// A current agent talks to an aggregator of wire version 1: what common::encodeBatch /
// encodeHeartbeat write with every current field set (the Heartbeat's appended inventory too)
// reads through the frozen v1 readers, under the aggregator's traversal and nesting limits, with
// every v1 field equal and nothing misread.
#include <catch2/catch.hpp>

#include "tests/compat/compat_util.h"

using namespace faultline;
using namespace faultline::compat::testing;

TEST_CASE("compat: v1 readers read a current batch and heartbeat within the aggregator's limits",
          "[compat]") {
  const auto batch = currentBatch();  // with the unmatched templates a v1 aggregator never heard of
  const std::string batch_bytes = common::encodeBatch(batch);
  const auto hb = sampleHeartbeat(true);
  const std::string hb_bytes = common::encodeHeartbeat(hb);

  SECTION("the current encoders write every field of the current schema") {
    PackedReader b(batch_bytes), h(hb_bytes);
    // SymptomBatch.sources carries lost/lagNs for heartbeats' sake; a batch's coverage
    // (common::CoverageEntry) has neither, so encodeBatch leaves them unset.
    CHECK(unsetFields(capnp::toDynamic(b.root<now::SymptomBatch>())) ==
          std::set<std::string>{"sources[].lagNs", "sources[].lost"});
    CHECK(unsetFields(capnp::toDynamic(h.root<now::Heartbeat>())).empty());
  }
  SECTION("every v1 field reads the same through the v1 schema") {
    std::vector<std::string> diffs;
    PackedReader old_b(batch_bytes, batchLimits()), new_b(batch_bytes);
    diffStructs(capnp::toDynamic(old_b.root<v1::SymptomBatch>()),
                capnp::toDynamic(new_b.root<now::SymptomBatch>()), "", false, &diffs);
    PackedReader old_h(hb_bytes, heartbeatLimits()), new_h(hb_bytes);
    diffStructs(capnp::toDynamic(old_h.root<v1::Heartbeat>()),
                capnp::toDynamic(new_h.root<now::Heartbeat>()), "", false, &diffs);
    INFO(Catch::Detail::stringify(diffs));
    CHECK(diffs.empty());
    // And those are the values the new agent meant (the round trip of the current codec).
    std::string reason;
    auto got = common::decodeBatch(batch_bytes.data(), batch_bytes.size(), &reason);
    REQUIRE(got);
    checkSame(*got, batch);
    auto got_hb = common::decodeHeartbeat(hb_bytes, &reason);
    REQUIRE(got_hb);
    checkSame(*got_hb, hb);
  }
  SECTION("a v1 reader with the aggregator's limits walks a large current batch") {
    common::SymptomBatchData big = batch;
    big.symptoms.clear();
    for (int i = 0; i < 5000; ++i) {
      auto s = batch.symptoms[i % batch.symptoms.size()];
      s.rule_id += "." + std::to_string(i);
      big.symptoms.push_back(std::move(s));
    }
    const std::string bytes = common::encodeBatch(big);
    std::string reason;
    REQUIRE(common::decodeBatch(bytes.data(), bytes.size(),
                                &reason));  // the current aggregator takes it
    PackedReader old_b(bytes, batchLimits()), new_b(bytes);
    std::vector<std::string> diffs;
    diffStructs(capnp::toDynamic(old_b.root<v1::SymptomBatch>()),
                capnp::toDynamic(new_b.root<now::SymptomBatch>()), "", false, &diffs);
    CHECK(diffs.empty());
  }
}

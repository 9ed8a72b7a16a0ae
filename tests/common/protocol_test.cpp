#include "common/protocol.h"

#include <catch2/catch.hpp>

using namespace faultline::common;

TEST_CASE("protocol: ack is agent id + little-endian u64", "[protocol]") {
  auto bytes = encodeAck({"gpu-node-7", 0x0102030405060708ull});
  CHECK(bytes.size() == 10 + 8);
  CHECK(static_cast<uint8_t>(bytes[10]) == 0x08);
  auto ack = decodeAck(bytes);
  REQUIRE(ack);
  CHECK(ack->agent_id == "gpu-node-7");
  CHECK(ack->sequence == 0x0102030405060708ull);
  CHECK_FALSE(decodeAck("short"));
}

TEST_CASE("protocol: heartbeat round trip; garbage refused", "[protocol]") {
  HeartbeatData hb;
  hb.agent_id = "a";
  hb.hostname = "n";
  hb.node = "n";
  hb.boot_id = "b";
  hb.ruleset_version = "0.1.0+x";
  hb.spool_batches = 3;
  hb.dropped_symptoms = 2;
  SourceHealth s;
  s.name = "kmsg";
  s.status = "partial";
  s.reason = "overrun";
  s.lost = 5;
  s.records = 10;
  hb.sources = {s};
  std::string reason;
  auto back = decodeHeartbeat(encodeHeartbeat(hb), &reason);
  REQUIRE(back);
  CHECK(back->agent_id == "a");
  CHECK(back->spool_batches == 3);
  REQUIRE(back->sources.size() == 1);
  CHECK(back->sources[0].lost == 5);
  CHECK(back->sources[0].status == "partial");
  CHECK_FALSE(decodeHeartbeat(std::string(100, '\xff'), &reason));
}

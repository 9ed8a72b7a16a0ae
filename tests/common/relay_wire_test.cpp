// The site relay's message (common/relay_wire.h): every field round-trips; hostile bytes, bad
// field values and NUL bytes are refused with a reason and never crash.
#include <catch2/catch.hpp>

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include <fstream>
#include <functional>
#include <random>

#include "common/relay_wire.h"
#include "common/schema/faultline.capnp.h"

using namespace faultline::common;
namespace schema = faultline::schema;

namespace {

RelayBatchData full() {
  RelayBatchData b;
  b.site_id = "edge1";
  b.sequence = 42;
  b.created_ns = 1'717'236'000'000'000'000;
  b.aggregator_version = "0.4.0";
  b.ruleset_version = "rules-abc";
  RelayVerdictData v;
  v.job_id = "4242_7";
  v.state = "NODE_FAIL";
  v.exit_code = "0:9";
  v.start_ns = b.created_ns - 3'600'000'000'000;
  v.end_ns = b.created_ns - 60'000'000'000;
  v.nodelist = "gpu-a[01-16]";
  v.time_limit_sec = 86400;
  v.revision = 3;
  v.created_ns = b.created_ns;
  v.status = "final";
  v.reason = "late_symptoms";
  v.missing_nodes = {"gpu-a07", "gpu-a09"};
  v.diagnosis_json = R"({"job_id":"4242_7","sub_domain":"hardware"})";
  v.symptoms = 17;
  b.verdicts = {v};
  b.node_events = {{"gpu-a03", b.created_ns - 5, "blamed", "xid.79 0000:3b:00.0", "4242_7"},
                   {"gpu-a04", b.created_ns - 4, "boot", "boot a -> b", ""}};
  Symptom s;
  s.rule_id = "xid.79";
  s.symptom = "gpu_fallen_off_bus";
  s.sub_domain = SubDomain::kHardware;
  s.category = "gpu";
  s.role = Role::kRoot;
  s.severity = Severity::kCritical;
  s.node = "gpu-a03";
  s.device = "0000:3b:00.0";
  s.source = "kmsg";
  s.source_kind = SourceKind::kKernel;
  s.first_ns = 1000;
  s.last_ns = 2000;
  s.time_known = true;
  s.count = 12;
  s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."};
  s.summary = "GPU lost";
  b.symptoms = {s};
  return b;
}

std::optional<RelayBatchData> roundTrip(const RelayBatchData& b, std::string* reason, const DecodeLimits& l = {}) {
  std::string bytes = encodeRelayBatch(b);
  return decodeRelayBatch(bytes.data(), bytes.size(), reason, l);
}

}  // namespace

TEST_CASE("relay batches round-trip with every field", "[wire][relay]") {
  auto b = full();
  std::string reason;
  auto d = roundTrip(b, &reason);
  INFO(reason);
  REQUIRE(d);
  CHECK(d->site_id == b.site_id);
  CHECK(d->sequence == 42);
  CHECK(d->created_ns == b.created_ns);
  CHECK(d->aggregator_version == "0.4.0");
  CHECK(d->ruleset_version == "rules-abc");
  CHECK(d->verdicts == b.verdicts);
  CHECK(d->node_events == b.node_events);
  REQUIRE(d->symptoms.size() == 1);
  CHECK(d->symptoms[0].count == 12);
  CHECK(d->symptoms[0].device == "0000:3b:00.0");
  CHECK(d->symptoms[0].evidence == b.symptoms[0].evidence);
  CHECK(d->items() == 4);
}

TEST_CASE("relay batches: hostile bytes and bad fields are refused with a reason", "[wire][relay]") {
  std::string reason;
  auto expectRefused = [&](RelayBatchData b, const std::string& why) {
    INFO(why);
    CHECK_FALSE(roundTrip(b, &reason));
    CHECK(reason == why);
  };
  auto b = full();
  b.site_id = "";
  expectRefused(b, "missing site id");
  b = full();
  b.verdicts[0].job_id = "";
  expectRefused(b, "verdict without job id");
  b = full();
  b.verdicts[0].revision = 0;
  expectRefused(b, "bad revision");
  b = full();
  b.verdicts[0].status = "maybe";
  expectRefused(b, "bad verdict status");
  b = full();
  b.verdicts[0].end_ns = -1;
  expectRefused(b, "bad timestamp");
  b = full();
  b.node_events[0].node = "";
  expectRefused(b, "node event without node");
  b = full();
  b.symptoms[0].count = 0;
  CHECK_FALSE(roundTrip(b, &reason));
  CHECK_FALSE(reason.empty());
  {
    // encodeRelayBatch cannot write a NUL (it passes C strings): plant it with the builders.
    const capnp::Text::Reader nul("ed\0ge", 5);
    using Edit = std::function<void(schema::RelayBatch::Builder)>;
    const std::vector<std::pair<const char*, Edit>> edits = {
        {"siteId", [&](auto r) { r.setSiteId(nul); }},
        {"jobId", [&](auto r) { r.getVerdicts()[0].setJobId(nul); }},
        {"diagnosisJson", [&](auto r) { r.getVerdicts()[0].setDiagnosisJson(nul); }},
        {"missingNodes", [&](auto r) { r.getVerdicts()[0].getMissingNodes().set(0, nul); }},
        {"event detail", [&](auto r) { r.getNodeEvents()[0].setDetail(nul); }},
        {"summary evidence", [&](auto r) { r.getSymptoms()[0].getEvidence().set(0, nul); }},
    };
    const std::string good_bytes = encodeRelayBatch(full());
    for (const auto& [what, edit] : edits) {
      INFO(what);
      kj::ArrayInputStream in(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(good_bytes.data()),
                                                           good_bytes.size()));
      capnp::PackedMessageReader reader(in);
      capnp::MallocMessageBuilder message;
      message.setRoot(reader.getRoot<schema::RelayBatch>());
      edit(message.getRoot<schema::RelayBatch>());
      kj::VectorOutputStream out;
      capnp::writePackedMessage(out, message);
      CHECK_FALSE(decodeRelayBatch(out.getArray().begin(), out.getArray().size(), &reason));
      CHECK(reason == "NUL in text");
    }
  }

  DecodeLimits few;
  few.max_symptoms = 3;  // 1 verdict + 2 events + 1 summary = 4 items
  CHECK_FALSE(roundTrip(full(), &reason, few));
  CHECK(reason == "too many items");
  DecodeLimits small;
  small.max_text = 8;  // the diagnosis is bounded by the message size, other text by max_text
  CHECK_FALSE(roundTrip(full(), &reason, small));
  DecodeLimits tiny;
  tiny.max_bytes = 16;
  CHECK_FALSE(roundTrip(full(), &reason, tiny));
  CHECK(reason == "too large");

  std::string good = encodeRelayBatch(full());
  CHECK_FALSE(decodeRelayBatch("", 0, &reason));
  CHECK_FALSE(reason.empty());
  CHECK_FALSE(decodeRelayBatch(good.data(), good.size() / 2, &reason));
  CHECK_FALSE(reason.empty());
  std::mt19937 rng(11);
  size_t refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string junk = good;
    for (int k = 0; k < 4; ++k) junk[rng() % junk.size()] = static_cast<char>(rng());
    if (!decodeRelayBatch(junk.data(), junk.size(), &reason)) {
      CHECK_FALSE(reason.empty());
      ++refused;
    }
    std::string noise(rng() % 300, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    if (!decodeRelayBatch(noise.data(), noise.size(), &reason)) ++refused;
  }
  CHECK(refused > 0);
}

// Writes the fuzz seed tests/fuzz/seeds/decode/relay-batch (run by hand: common_test "[.regenerate]").
TEST_CASE("relay batch fuzz seed", "[.regenerate]") {
  std::string bytes = encodeRelayBatch(full());
  std::ofstream(FAULTLINE_SOURCE_DIR "/tests/fuzz/seeds/decode/relay-batch", std::ios::binary) << bytes;
  SUCCEED();
}

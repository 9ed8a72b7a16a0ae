#include <catch2/catch.hpp>

#include <map>

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include <fstream>
#include <functional>
#include <random>

#include "common/schema/faultline.capnp.h"
#include "common/protocol.h"
#include "common/relay_wire.h"
#include "common/symptom_aggregator.h"
#include "common/wire.h"
#include "common/wire_detail.h"

using namespace faultline::common;
namespace schema = faultline::schema;

namespace {
Symptom sample(int i) {
  Symptom s;
  s.rule_id = "xid.79";
  s.symptom = "gpu_fallen_off_bus";
  s.sub_domain = SubDomain::kHardware;
  s.category = "gpu";
  s.role = Role::kRoot;
  s.severity = Severity::kCritical;
  s.node = "gpu-a01";
  s.device = "0000:3b:00.0";
  s.source = "kmsg";
  s.source_kind = SourceKind::kKernel;
  s.first_ns = 1000 + i;
  s.last_ns = 2000 + i;
  s.time_known = true;
  s.count = 3;
  s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."};
  s.fields = {{"xid", "79"}, {"pci", "0000:3b:00"}};
  s.summary = "GPU lost";
  s.boot_id = "b1";
  return s;
}
}  // namespace

TEST_CASE("symptom batches round-trip through packed Cap'n Proto", "[wire]") {
  SymptomBatchData b;
  b.header = {"agent-1", "gpu-a01", "b1", 42, "0.1.0", "0.1.0+abc", 7};
  b.symptoms = {sample(0), sample(1)};
  b.sources.push_back({"gpu-a01", "kmsg", "kmsg", 10, 1, "ok", ""});
  std::string bytes = encodeBatch(b);
  std::string reason;
  auto d = decodeBatch(bytes.data(), bytes.size(), &reason);
  REQUIRE(d);
  CHECK(d->header.sequence == 42);
  CHECK(d->header.hostname == "gpu-a01");
  REQUIRE(d->symptoms.size() == 2);
  const Symptom& s = d->symptoms[1];
  CHECK(s.rule_id == "xid.79");
  CHECK(s.sub_domain == SubDomain::kHardware);
  CHECK(s.source_kind == SourceKind::kKernel);
  CHECK(s.first_ns == 1001);
  CHECK(s.count == 3);
  CHECK(s.fields.at("xid") == "79");
  CHECK(d->sources.at(0).records == 10);
}

TEST_CASE("hostile bytes are refused with a reason, never a crash", "[wire]") {
  SymptomBatchData b;
  b.symptoms = {sample(0)};
  std::string good = encodeBatch(b);
  std::string reason;
  CHECK(!decodeBatch("", 0, &reason));
  CHECK(!decodeBatch(good.data(), good.size() / 2, &reason));
  CHECK(!reason.empty());
  DecodeLimits small;
  small.max_bytes = 8;
  CHECK(!decodeBatch(good.data(), good.size(), &reason, small));
  CHECK(reason == "too large");
  // Invalid field values.
  Symptom bad = sample(0);
  bad.count = 0;
  b.symptoms = {bad};
  std::string zero = encodeBatch(b);
  CHECK(!decodeBatch(zero.data(), zero.size(), &reason));
  bad = sample(0);
  bad.last_ns = bad.first_ns - 1;
  b.symptoms = {bad};
  std::string backwards = encodeBatch(b);
  CHECK(!decodeBatch(backwards.data(), backwards.size(), &reason));
  CHECK(reason == "bad timestamp");
  // Random garbage and random corruption of a good message.
  std::mt19937 rng(7);
  for (int i = 0; i < 2000; ++i) {
    std::string junk = good;
    for (int k = 0; k < 4; ++k) junk[rng() % junk.size()] = static_cast<char>(rng());
    (void)decodeBatch(junk.data(), junk.size(), &reason);
    std::string noise(rng() % 300, '\0');
    for (auto& c : noise) c = static_cast<char>(rng());
    (void)decodeBatch(noise.data(), noise.size(), &reason);
  }
  SUCCEED("2000 corrupted and 2000 random messages decoded or refused without crashing");
}

TEST_CASE("a NUL byte inside any text field is refused as NUL in text", "[wire]") {
  // encodeBatch cannot write one (it passes C strings), so the message is built with the
  // generated builders, where a Text may hold a NUL before its terminator.
  const capnp::Text::Reader nul("gpu.\0xid", 8);
  using Edit = std::function<void(schema::SymptomBatch::Builder)>;
  const std::vector<std::pair<const char*, Edit>> edits = {
      {"agentId", [&](auto b) { b.setAgentId(nul); }},
      {"hostname", [&](auto b) { b.setHostname(nul); }},
      {"ruleId", [&](auto b) { b.getSymptoms()[0].setRuleId(nul); }},
      {"device", [&](auto b) { b.getSymptoms()[0].setDevice(nul); }},
      {"evidence", [&](auto b) { b.getSymptoms()[0].getEvidence().set(0, nul); }},
      {"field key", [&](auto b) { b.getSymptoms()[0].getFields()[0].setKey(nul); }},
      {"field value", [&](auto b) { b.getSymptoms()[0].getFields()[0].setValue(nul); }},
      {"sourceKind", [&](auto b) { b.getSymptoms()[0].setSourceKind(nul); }},
      {"source status reason", [&](auto b) { b.getSources()[0].setReason(nul); }},
  };
  SymptomBatchData good;
  good.header = {"agent-1", "gpu-a01", "b1", 1, "0.1.0", "0.1.0+abc", 7};
  good.symptoms = {sample(0)};
  good.sources.push_back({"gpu-a01", "kmsg", "kmsg", 10, 1, "ok", ""});
  const std::string good_bytes = encodeBatch(good);
  for (const auto& [what, edit] : edits) {
    INFO(what);
    // Decode the good batch into a builder, plant the NUL, pack it again.
    kj::ArrayInputStream in(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(good_bytes.data()),
                                                         good_bytes.size()));
    capnp::PackedMessageReader reader(in);
    capnp::MallocMessageBuilder message;
    message.setRoot(reader.getRoot<schema::SymptomBatch>());
    edit(message.getRoot<schema::SymptomBatch>());
    kj::VectorOutputStream out;
    capnp::writePackedMessage(out, message);
    std::string reason;
    CHECK_FALSE(decodeBatch(out.getArray().begin(), out.getArray().size(), &reason));
    CHECK(reason == "NUL in text");
  }
  // Text that merely ends where its terminator is stays fine.
  std::string reason;
  CHECK(decodeBatch(good_bytes.data(), good_bytes.size(), &reason));
}

TEST_CASE("bytes that are not UTF-8 arrive as U+FFFD: nothing crashes on them, nothing else is lost", "[wire]") {
  using wire_detail::repairUtf8;
  using wire_detail::validUtf8;
  CHECK(validUtf8("plain ascii"));
  CHECK(validUtf8("Xid 79 \xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5"));  // é, €, an emoji
  for (const char* bad : {"\xFF", "py\xFF\xFEthon", "\xC3", "\xE2\x82", "\xC0\xAF" /* overlong */,
                          "\xED\xA0\x80" /* surrogate */, "\xF4\x90\x80\x80" /* > U+10FFFF */, "\x80"}) {
    INFO(bad);
    CHECK_FALSE(validUtf8(bad));
    CHECK(validUtf8(repairUtf8(bad)));
  }
  CHECK(repairUtf8("py\xFF\xFEthon \xC3\xA9") == "py\xEF\xBF\xBD\xEF\xBF\xBDthon \xC3\xA9");
  // An agent's batch (the encoder writes whatever bytes it is given) and a heartbeat.
  SymptomBatchData b;
  b.header = {"agent-1", "gpu-a01", "b1", 1, "0.1.0", "0.1.0+abc", 7};
  b.symptoms = {sample(0)};
  b.symptoms[0].evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, name=py\xFFthon"};
  const std::string bytes = encodeBatch(b);
  std::string reason;
  auto decoded = decodeBatch(bytes.data(), bytes.size(), &reason);
  REQUIRE(decoded);
  CHECK(decoded->symptoms[0].evidence[0] == "NVRM: Xid (PCI:0000:3b:00): 79, name=py\xEF\xBF\xBDthon");
  CHECK(decoded->symptoms[0].rule_id == b.symptoms[0].rule_id);
  HeartbeatData hb;
  hb.agent_id = "agent-1";
  hb.hostname = "gpu-\xC3";
  auto beat = decodeHeartbeat(encodeHeartbeat(hb), &reason);
  REQUIRE(beat);
  CHECK(beat->hostname == "gpu-\xEF\xBF\xBD");
}

TEST_CASE("identical symptoms collapse within the window", "[aggregator]") {
  SymptomAggregator agg(60LL * 1000000000);
  for (int i = 0; i < 100000; ++i) {
    Symptom s = sample(0);
    s.count = 1;
    s.first_ns = s.last_ns = static_cast<int64_t>(i) * 1000000;  // 100 s of 1 kHz
    s.evidence = {"line " + std::to_string(i)};
    agg.add(std::move(s));
  }
  auto out = agg.drainAll();
  REQUIRE(out.size() == 1);
  CHECK(out[0].count == 100000);
  CHECK(out[0].first_ns == 0);
  CHECK(out[0].last_ns == 99999LL * 1000000);
  CHECK(out[0].evidence.size() == Symptom::kMaxEvidence);
  // A gap longer than the window starts a new group; a different device is another group.
  Symptom late = sample(0);
  late.first_ns = late.last_ns = 1000LL * 1000000000;
  Symptom other = sample(0);
  other.device = "0000:5d:00.0";
  agg.add(sample(0));
  agg.add(late);
  agg.add(other);
  CHECK(agg.drainAll().size() == 3);
}

TEST_CASE("a job-wide log's ranks stay apart until they are placed on nodes", "[aggregator]") {
  SymptomAggregator agg;
  auto rank = [](const std::string& node, const std::string& r) {
    Symptom s = sample(0);
    s.node = node;
    s.device.clear();
    s.count = 1;
    s.fields["rank"] = r;
    return s;
  };
  // Unplaced (no layout where the file was read): one group per rank, repeats still merge.
  agg.add(rank("", "5"));
  agg.add(rank("", "5"));
  agg.add(rank("", "6"));
  // Placed: ranks on one node are one group, as before.
  agg.add(rank("gpu-01", "0"));
  agg.add(rank("gpu-01", "1"));
  auto out = agg.drainAll();
  REQUIRE(out.size() == 3);
  std::map<std::string, uint32_t> counts;
  for (const auto& s : out) counts[s.node + "/" + (s.node.empty() ? s.field("rank") : "")] = s.count;
  CHECK(counts == std::map<std::string, uint32_t>{{"/5", 2}, {"/6", 1}, {"gpu-01/", 2}});
}

TEST_CASE("PCI ids normalise across driver spellings", "[symptom]") {
  CHECK(normalizePciId("PCI:0000:3b:00") == "0000:3b:00.0");
  CHECK(normalizePciId("00000000:3B:00.0") == "0000:3b:00.0");
  CHECK(normalizePciId("3b:00.1") == "0000:3b:00.1");
  CHECK(normalizePciId("mlx5_0") == "mlx5_0");
  CHECK(normalizePciId("CPU_SrcID#1_MC#0") == "CPU_SrcID#1_MC#0");
}

TEST_CASE("a list of millions of zero-sized entries is refused before it is decoded", "[wire]") {
  // Found by fuzz_decode (tests/fuzz/seeds/decode/oom-empty-sources): a small batch whose `sources` list
  // claims millions of zero-sized structs, each of which decoded to seven strings (1+ GiB).
  std::ifstream in(FAULTLINE_SOURCE_DIR "/tests/fuzz/seeds/decode/oom-empty-sources", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(bytes.size() > 0);
  REQUIRE(bytes.size() < 4096);
  std::string reason;
  CHECK_FALSE(decodeBatch(bytes.data(), bytes.size(), &reason));
  CHECK(reason == "too many sources");
}

TEST_CASE("a symptom with more fields than the bound is refused, the bound itself passes", "[wire][fuzz]") {
  // Found by fuzz_relay (tests/fuzz/seeds/relay/slow-empty-fields): 589 bytes whose symptom claims
  // millions of empty fields, each decoded into the map (0.2 s of the ingest thread at -O2).
  SymptomBatchData b;
  b.symptoms = {sample(0)};
  b.symptoms[0].fields.clear();
  for (size_t i = 0; i < DecodeLimits{}.max_fields; ++i) b.symptoms[0].fields["f" + std::to_string(i)] = "v";
  std::string bytes = encodeBatch(b);
  std::string reason;
  auto d = decodeBatch(bytes.data(), bytes.size(), &reason);
  REQUIRE(d);
  CHECK(d->symptoms.at(0).fields.size() == DecodeLimits{}.max_fields);
  b.symptoms[0].fields["one-more"] = "v";
  bytes = encodeBatch(b);
  CHECK_FALSE(decodeBatch(bytes.data(), bytes.size(), &reason));
  CHECK(reason == "too many fields");

  std::ifstream in(FAULTLINE_SOURCE_DIR "/tests/fuzz/seeds/relay/slow-empty-fields", std::ios::binary);
  std::string relay((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(relay.size() == 589);
  CHECK_FALSE(decodeRelayBatch(relay.data(), relay.size(), &reason));
  CHECK(reason == "too many fields");
}

// The compact symptom payload (store migration 9, aggregator/store/symptom_codec.h): what a row's
// columns and its payload read back as, for odd symptoms and for damaged payloads.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/symptom_dictionary.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

// The columns the store writes for `s` in a row of a batch from boot `row_boot`.
struct Row {
  std::string sub_domain, role, severity;
  SymptomColumns c;
  Row(const common::Symptom& s, const std::string& row_boot)
      : sub_domain(common::subDomainName(s.sub_domain)), role(common::roleName(s.role)),
        severity(common::severityName(s.severity)) {
    c.node = s.node;
    c.rule_id = s.rule_id;
    c.sub_domain = sub_domain;
    c.role = role;
    c.severity = severity;
    c.device = s.device;
    c.boot_id = row_boot;
    c.first_ns = s.first_ns;
    c.last_ns = s.last_ns;
    c.time_known = s.time_known;
    c.count = s.count;
  }
};

// What the store gives back for `s` written in a row of boot `row_boot`, as the API's JSON text.
std::string roundTrip(const common::Symptom& s, const std::string& row_boot, std::string* payload = nullptr) {
  Row row(s, row_boot);
  std::string p = encodeSymptomPayload(s, row_boot);
  if (payload) *payload = p;
  return symptomJsonText(decodeSymptomRow(row.c, p));
}

common::Symptom fullSymptom() {
  auto s = makeSymptom("gpu-07", "gpu.xid.79", kT0, common::SubDomain::kHardware, common::Role::kRoot, "0000:3b:00.0");
  s.symptom = "gpu_fell_off_bus";
  s.category = "gpu";
  s.source = "/var/log/kern.log";
  s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "12:34 looks:like:a:length",
                ""};
  s.fields = {{"xid", "79"}, {"3:", "4:x"}, {"", "empty key"}};
  s.summary = "GPU 0000:3b:00.0 fell off the bus";
  s.boot_id = "boot-a";
  s.count = 12;
  return s;
}

}  // namespace

TEST_CASE("symptom payload: the compact form reads back as the symptom, with the row's columns", "[store][codec]") {
  auto s = fullSymptom();
  std::string payload;
  CHECK(roundTrip(s, "boot-a", &payload) == symptomJsonText(s));
  REQUIRE(!payload.empty());
  CHECK(payload[0] == kCompactPayloadTag);
  CHECK(payload.find("gpu.xid.79") == std::string::npos);  // the rule is the row's column
  CHECK(payload.find("boot-a") == std::string::npos);      // so is the boot id, when the same
  CHECK(payload.size() * 2 < symptomJsonText(s).size());

  SECTION("a boot id of its own (relayed rows: the row's is empty)") {
    CHECK(roundTrip(s, "", &payload) == symptomJsonText(s));
    CHECK(payload.find("boot-a") != std::string::npos);
  }
  SECTION("every flag and kind, empty texts, no evidence or fields") {
    for (auto kind : {common::SourceKind::kKernel, common::SourceKind::kJournal, common::SourceKind::kFabricManager,
                      common::SourceKind::kApplication}) {
      common::Symptom e;
      e.source_kind = kind;
      e.fallback_root = kind == common::SourceKind::kJournal;
      e.time_known = kind == common::SourceKind::kKernel;
      e.first_ns = -5;
      CHECK(roundTrip(e, "") == symptomJsonText(e));
    }
  }
  SECTION("a metric symptom reads back as the JSON form always stored it (kind application)") {
    s.source_kind = common::SourceKind::kMetric;
    CHECK(roundTrip(s, "boot-a") == symptomJsonText(symptomFromPayload(symptomJsonText(s))));
  }
  SECTION("a NUL in a text: the JSON form, which escapes it") {
    s.evidence[1] = std::string("before\0after", 12);
    CHECK(roundTrip(s, "boot-a", &payload) == symptomJsonText(s));
    CHECK(payload[0] == '{');
  }
  SECTION("text that is not UTF-8 is refused as the JSON writer refused it") {
    s.summary = "bad \xff byte";
    CHECK_THROWS(encodeSymptomPayload(s, "boot-a"));
  }
  SECTION("the verdict's read keeps the first evidence line only") {
    Row row(s, "boot-a");
    auto one = decodeSymptomRow(row.c, encodeSymptomPayload(s, "boot-a"), 1);
    REQUIRE(one.evidence.size() == 1);
    CHECK(one.evidence[0] == s.evidence[0]);
    CHECK(one.fields == s.fields);
  }
}

TEST_CASE("symptom payload: a damaged compact payload never throws, and the row's columns are kept", "[store][codec]") {
  auto s = fullSymptom();
  Row row(s, "boot-a");
  const std::string good = encodeSymptomPayload(s, "boot-a");
  // Every truncation, and every byte of it replaced by a few values.
  for (size_t n = 1; n < good.size(); ++n) {
    auto d = decodeSymptomRow(row.c, good.substr(0, n));
    CHECK(d.rule_id == s.rule_id);
    CHECK(d.node == s.node);
  }
  for (size_t i = 1; i < good.size(); ++i)
    for (char c : {'\0', ':', '9', 'x', '\x01'}) {
      std::string bad = good;
      bad[i] = c;
      auto d = decodeSymptomRow(row.c, bad);
      CHECK(d.rule_id == s.rule_id);
    }
  // Lengths that point past the end, or overflow.
  for (std::string bad : {std::string("\x01") + "00999999999999:", std::string("\x01") + "0099999999999999999999999:x",
                          std::string("\x01") + "05", std::string("\x01")}) {
    auto d = decodeSymptomRow(row.c, bad);
    CHECK(d.rule_id == s.rule_id);
    CHECK(d.summary.empty());
  }
  // Neither form (nor a JSON object): the row's columns.
  for (std::string bad : {"garbage", "", "[1,2]", "{\"rule_id\":", "{}x"}) {
    INFO(bad);
    CHECK(decodeSymptomRow(row.c, bad).rule_id == s.rule_id);
  }
}

// ---- packed payloads (store migration 10, aggregator/store/symptom_dictionary.h) ----

namespace {

// Compact payloads of `n` symptoms like a cascade's: the same lines on many hosts.
std::vector<std::string> cascadePayloads(size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    auto s = fullSymptom();
    const std::string host = "gpu-n" + std::to_string(1000 + i);
    s.node = host;
    s.source = "/var/log/nodes/" + host + "/kern.log";
    s.evidence = {"2024-03-02T14:21:" + std::to_string(10 + i % 50) + " " + host +
                      " kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=" + std::to_string(4000 + i) +
                      ", name=python, GPU has fallen off the bus.",
                  host + " NCCL WARN NET/IB : Got completion from peer with error 12, opcode 0, len 0"};
    s.fields = {{"xid", "79"}, {"pid", std::to_string(4000 + i)}};
    out.push_back(encodeSymptomPayload(s, "boot-a"));
  }
  return out;
}

}  // namespace

TEST_CASE("symptom payload: packed with a trained dictionary, smaller and read back as the compact form",
          "[store][codec]") {
  const auto samples = cascadePayloads(400);
  auto bytes = trainPayloadDictionary(samples, 32 << 10);
  REQUIRE(bytes);
  PayloadDictionaries dicts;
  const PayloadDictionary* dict = dicts.add(7, *bytes, true);
  REQUIRE(dict->ok());
  CHECK(dicts.current().get() == dict);
  size_t compact = 0, packed = 0;
  std::string body;
  for (const auto& p : samples) {
    const std::string q = dict->pack(p);
    REQUIRE(q[0] == kPackedPayloadTag);
    CHECK(packedDictionaryId(q) == 7);
    REQUIRE(dict->unpack(q, &body));
    CHECK(body == p.substr(1));
    compact += p.size();
    packed += q.size();
  }
  CHECK(packed * 3 < compact);  // these rows differ only in host, pid and time: under a third

  // The row reads back as the symptom, with the dictionaries; without them (or another id's) the
  // columns alone, as for any damaged payload.
  auto s = fullSymptom();
  const std::string boot = "boot-a";  // the row's columns point into it
  Row row(s, boot);
  const std::string q = dict->pack(encodeSymptomPayload(s, boot));
  CHECK(symptomJsonText(decodeSymptomRow(row.c, q, SIZE_MAX, &dicts)) == symptomJsonText(s));
  const std::string columns_only = symptomJsonText(decodeSymptomRow(row.c, "", SIZE_MAX));
  CHECK(symptomJsonText(decodeSymptomRow(row.c, q)) == columns_only);
  PayloadDictionaries other;
  other.add(8, *bytes, true);
  CHECK(symptomJsonText(decodeSymptomRow(row.c, q, SIZE_MAX, &other)) == columns_only);
  // Damaged: cut anywhere, a byte flipped: never a throw, the columns or the symptom.
  for (size_t cut = 0; cut < q.size(); ++cut) {
    auto d = decodeSymptomRow(row.c, q.substr(0, cut), SIZE_MAX, &dicts);
    CHECK(d.node == s.node);
  }
  std::string flipped = q;
  flipped[q.size() / 2] ^= 0x5a;
  CHECK(decodeSymptomRow(row.c, flipped, SIZE_MAX, &dicts).rule_id == s.rule_id);
  // JSON and text that is not compact pass through pack() unchanged.
  CHECK(dict->pack("{\"rule_id\":\"x\"}") == "{\"rule_id\":\"x\"}");
  // Too few samples to learn from: no dictionary.
  CHECK_FALSE(trainPayloadDictionary(cascadePayloads(3), 32 << 10));
}

#include <catch2/catch.hpp>

#include <random>

#include "common/symptom_aggregator.h"
#include "common/wire.h"

using namespace faultline::common;

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

TEST_CASE("PCI ids normalise across driver spellings", "[symptom]") {
  CHECK(normalizePciId("PCI:0000:3b:00") == "0000:3b:00.0");
  CHECK(normalizePciId("00000000:3B:00.0") == "0000:3b:00.0");
  CHECK(normalizePciId("3b:00.1") == "0000:3b:00.1");
  CHECK(normalizePciId("mlx5_0") == "mlx5_0");
  CHECK(normalizePciId("CPU_SrcID#1_MC#0") == "CPU_SrcID#1_MC#0");
}

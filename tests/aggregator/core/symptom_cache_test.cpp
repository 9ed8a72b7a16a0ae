// The store's decoded-symptom cache (aggregator/store/symptom_cache.h): bounded, oldest out
// first, and never an answer that decoding the stored payload would not give — after a group
// that rolled back, after a prune that let SQLite give ids again, through every insert path.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "aggregator/store/store.h"
#include "aggregator/store/symptom_cache.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

common::Symptom richSymptom(const std::string& node, const std::string& rule, int64_t t, int i) {
  auto s = makeSymptom(node, rule, t, common::SubDomain::kNetwork, common::Role::kCascade, "mlx5_" + std::to_string(i));
  s.last_ns = t + i * kSec;
  s.count = static_cast<uint32_t>(1 + i);
  s.fields = {{"rank", std::to_string(i)}, {"peer", "10.0.0." + std::to_string(i)}};
  s.evidence = {"line one of " + rule + " with \"quotes\" and \\ and é", "line two " + std::to_string(i)};
  s.summary = "summary " + std::to_string(i) + " on " + node;
  s.boot_id = "boot-" + node;
  if (i % 3 == 0) s.time_known = false;
  return s;
}

// What the window holds, as text: from `store`, and from a second store on the same database
// whose cache is off (every payload decoded).
struct Window {
  std::vector<std::string> cached, decoded;
  int64_t cached_max = 0, decoded_max = 0;
};
Window readBoth(Store& store, const std::string& target, const Clock& clock, const std::vector<std::string>& nodes) {
  Window w;
  for (const auto& s : store.symptomsForWindow(nodes, 0, kT0 + 3600 * kSec, kT0 + 3600 * kSec, &w.cached_max))
    w.cached.push_back(symptomToJson(s).dump());
  StoreOptions off;
  off.symptom_cache_bytes = 0;
  std::string error;
  auto plain = Store::open(target, clock, off, &error);
  INFO(error);
  REQUIRE(plain);
  for (const auto& s : plain->symptomsForWindow(nodes, 0, kT0 + 3600 * kSec, kT0 + 3600 * kSec, &w.decoded_max))
    w.decoded.push_back(symptomToJson(s).dump());
  return w;
}

}  // namespace

TEST_CASE("symptom cache: found by id, replaced in place, the oldest evicted past its bytes", "[store]") {
  const auto a = makeSymptom("n1", "rule.a", kT0);
  const size_t one = SymptomCache::footprint(a);
  SymptomCache cache(3 * one + one / 2);  // room for three
  cache.put(1, a);
  cache.put(2, makeSymptom("n1", "rule.b", kT0));
  cache.put(3, makeSymptom("n1", "rule.c", kT0));
  REQUIRE(cache.find(2));
  CHECK(cache.find(2)->rule_id == "rule.b");
  CHECK(cache.find(4) == nullptr);
  CHECK(cache.size() == 3);
  // The same id again replaces its entry (a newer row under a reused id), the bytes stay counted once.
  cache.put(2, makeSymptom("n1", "rule.B", kT0));
  CHECK(cache.find(2)->rule_id == "rule.B");
  CHECK(cache.size() == 3);
  CHECK(cache.bytes() == 3 * one);
  // A fourth does not fit: the first put goes.
  cache.put(4, makeSymptom("n1", "rule.d", kT0));
  CHECK(cache.find(1) == nullptr);
  CHECK(cache.find(4) != nullptr);
  CHECK(cache.evicted() == 1);
  CHECK(cache.bytes() <= cache.maxBytes());
  cache.erase(3);
  CHECK(cache.find(3) == nullptr);
  CHECK(cache.size() == 2);
  // One symptom bigger than the whole cache is not kept (and no older entry answers for its id).
  auto huge = makeSymptom("n1", "rule.e", kT0);
  huge.evidence = {std::string(4 * one, 'x')};
  cache.put(4, huge);
  CHECK(cache.find(4) == nullptr);
  CHECK(cache.find(2) != nullptr);
  SymptomCache off(0);
  off.put(1, a);
  CHECK(off.size() == 0);
}

TEST_CASE("symptom cache: a window read through the cache is what decoding the stored payloads gives", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  const std::string path = dir.file("c.db");
  auto store = openStore(path, clock);
  std::vector<std::string> nodes;
  size_t expected = 0;
  REQUIRE(store->beginGroup(nullptr));
  for (int n = 0; n < 6; ++n) {
    const std::string node = "gpu-0" + std::to_string(n);
    nodes.push_back(node);
    for (uint64_t seq = 1; seq <= 3; ++seq) {
      std::vector<common::Symptom> syms;
      for (int i = 0; i < 4; ++i) syms.push_back(richSymptom(node, "rule." + std::to_string(i), kT0 + seq * kSec, i));
      expected += syms.size();
      CHECK(store->ingestBatchGrouped(makeBatch(node, seq, std::move(syms)), "agent-" + node).status ==
            IngestResult::Status::kStored);
    }
  }
  REQUIRE(store->endGroup(nullptr));
  // Outside a group too, and through the one-batch path (which does not cache).
  CHECK(store->ingestBatchGrouped(makeBatch("gpu-00", 4, {richSymptom("gpu-00", "rule.x", kT0, 5)}), "agent-gpu-00")
            .status == IngestResult::Status::kStored);
  CHECK(store->ingestBatch(makeBatch("gpu-01", 4, {richSymptom("gpu-01", "rule.y", kT0, 7)}), "agent-gpu-01").status ==
        IngestResult::Status::kStored);
  expected += 2;
  auto w = readBoth(*store, storeTarget(path), clock, nodes);
  CHECK(w.cached.size() == expected);
  CHECK(w.cached == w.decoded);
  CHECK(w.cached_max == w.decoded_max);
  CHECK(w.cached_max == store->maxSymptomId());
}

TEST_CASE("symptom cache: ids SQLite gives again after a rolled-back group or a prune are not answered from the cache",
          "[store][sqlite]") {
  TempDir dir;
  ManualClock clock(kT0);
  const std::string path = dir.file("r.db");
  auto store = openStore(path, clock);
  const std::vector<std::string> nodes = {"gpu-01", "gpu-02", "gpu-03"};
  // A real SQLite failure on one symptom's INSERT fails the group (as in ingest_grouped_test).
  execOn(path,
         "CREATE TRIGGER poison BEFORE INSERT ON symptoms WHEN NEW.rule_id = 'poison' "
         "BEGIN SELECT RAISE(ABORT, 'poisoned'); END;");
  REQUIRE(store->beginGroup(nullptr));
  CHECK(store->ingestBatchGrouped(makeBatch("gpu-01", 1, {richSymptom("gpu-01", "rule.rolled_back", kT0, 1)}),
                                  "agent-gpu-01")
            .status == IngestResult::Status::kStored);
  CHECK(store->ingestBatchGrouped(makeBatch("gpu-02", 1, {richSymptom("gpu-02", "poison", kT0, 1)}), "agent-gpu-02")
            .status == IngestResult::Status::kRejected);
  CHECK_FALSE(store->endGroup(nullptr));
  // Id 1 again, for another symptom, through the path that does not cache.
  CHECK(store->ingestBatch(makeBatch("gpu-02", 2, {richSymptom("gpu-02", "rule.other", kT0, 2)}), "agent-gpu-02")
            .status == IngestResult::Status::kStored);
  auto w = readBoth(*store, path, clock, nodes);
  REQUIRE(w.cached.size() == 1);
  CHECK(w.cached == w.decoded);
  CHECK(w.cached[0].find("rule.other") != std::string::npos);

  // Cached rows, then a prune pass that takes every row: SQLite numbers new rows from 1 again.
  for (uint64_t seq = 3; seq <= 5; ++seq)
    CHECK(store->ingestBatchGrouped(makeBatch("gpu-02", seq, {richSymptom("gpu-02", "rule.pruned", kT0, int(seq))}),
                                    "agent-gpu-02")
              .status == IngestResult::Status::kStored);
  while (store->pruneStep(kT0 + 3600 * kSec, 0, 1000) == 1000) {
  }
  REQUIRE(store->counts().symptoms == 0);
  CHECK(store->ingestBatch(makeBatch("gpu-03", 1, {richSymptom("gpu-03", "rule.third", kT0, 4),
                                                   richSymptom("gpu-03", "rule.fourth", kT0, 5)}),
                           "agent-gpu-03")
            .status == IngestResult::Status::kStored);
  CHECK(store->ingestBatchGrouped(makeBatch("gpu-03", 2, {richSymptom("gpu-03", "rule.fifth", kT0, 6)}), "agent-gpu-03")
            .status == IngestResult::Status::kStored);
  w = readBoth(*store, path, clock, nodes);
  REQUIRE(w.cached.size() == 3);
  CHECK(w.cached == w.decoded);
  CHECK(w.cached[0].find("rule.third") != std::string::npos);
  CHECK(w.cached[2].find("rule.fifth") != std::string::npos);
}

TEST_CASE("symptom cache: its default size is a sixteenth of the memory, 64 MiB to 1 GiB", "[store]") {
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  CHECK(defaultSymptomCacheBytes(0) == 64 * kMiB);              // memory unknown
  CHECK(defaultSymptomCacheBytes(512 * kMiB) == 64 * kMiB);     // a small VM
  CHECK(defaultSymptomCacheBytes(4 * kGiB) == 256 * kMiB);
  CHECK(defaultSymptomCacheBytes(12 * kGiB) == 768 * kMiB);
  CHECK(defaultSymptomCacheBytes(16 * kGiB) == 1 * kGiB);
  CHECK(defaultSymptomCacheBytes(512 * kGiB) == 1 * kGiB);
  // This machine's (or cgroup's): something, and no more than the machine has.
  const uint64_t here = availableMemoryBytes();
  CHECK(here > 0);
  CHECK(here <= uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE)));
}

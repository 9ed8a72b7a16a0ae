// The grouped ingest writer (Store::ingestBatchGrouped, symptomJsonText): the same rows as the
// one-batch-per-transaction path, exactly once inside a group, nothing of a failed group kept.
#include <catch2/catch.hpp>

#include "aggregator/store/store.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

std::vector<std::string> storedPayloads(Store& store, const std::vector<std::string>& nodes) {
  std::vector<std::string> out;
  for (const auto& s : store.symptomsForWindow(nodes, 0, kT0 + 3600 * kSec, kT0 + 3600 * kSec, nullptr))
    out.push_back(symptomToJson(s).dump());
  return out;
}

}  // namespace

TEST_CASE("ingest: symptomJsonText writes what symptomToJson(...).dump() writes", "[store][ingest]") {
  auto s = makeSymptom("gpu-01", "nccl.remote_error", kT0 + 7, common::SubDomain::kNetwork, common::Role::kCascade,
                       "mlx5_0/1");
  s.symptom = "nccl_remote";
  s.category = "nccl";
  s.source = "/var/log/slurm/job.out";
  s.source_kind = common::SourceKind::kApplication;
  s.last_ns = kT0 + 99;
  s.time_known = true;
  s.count = 4'000'000'000u;
  s.fallback_root = true;
  s.summary = "quote \" backslash \\ slash / tab \t newline \n cr \r bs \b ff \f";
  s.evidence = {"ctl \x01\x1f del \x7f", "utf-8: é 中 \xF0\x9F\x98\x80 end", ""};
  s.fields = {{"rank", "12"}, {"k\"ey", "v\\al"}, {"", ""}};
  s.boot_id = "b";
  CHECK(symptomJsonText(s) == symptomToJson(s).dump());
  s.evidence.clear();
  s.fields.clear();
  s.first_ns = -5;
  s.time_known = false;
  s.fallback_root = false;
  CHECK(symptomJsonText(s) == symptomToJson(s).dump());
  // Long runs are scanned eight bytes at a time: every special byte at every offset of a word.
  for (std::string special : {"\"", "\\", "\x01", "\x1f", "\n", "\x7f", "é", "中", "\xF0\x9F\x98\x80", " ", "~"})
    for (size_t at = 0; at < 20; ++at) {
      s.summary = std::string(at, 'a') + special + std::string(19 - at, 'z');
      s.evidence = {std::string(at + 3, 'x') + special, special + std::string(at, 'y')};
      CHECK(symptomJsonText(s) == symptomToJson(s).dump());
    }
  // Not UTF-8 (a lone continuation byte, an overlong, a surrogate, a truncated sequence): the
  // same as dump() — which refuses it.
  for (std::string bad : {"\x80", "\xC0\xAF", "\xED\xA0\x80", "\xE4\xB8"}) {
    s.summary = bad;
    CHECK_THROWS(symptomToJson(s).dump());
    CHECK_THROWS(symptomJsonText(s));
  }
}

TEST_CASE("ingest: the grouped writer stores the same rows as one transaction per batch", "[store][ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto one = openStore(dir.file("one.db"), clock);
  auto grouped = openStore(dir.file("grouped.db"), clock);
  std::vector<common::SymptomBatchData> batches;
  for (uint64_t seq = 1; seq <= 3; ++seq)
    for (std::string node : {"gpu-01", "gpu-02"}) {
      auto s = makeSymptom(node, "gpu.xid79", kT0 + int64_t(seq) * kSec, common::SubDomain::kHardware,
                           common::Role::kRoot, "0000:3b:00.0");
      s.fields = {{"xid", "79"}};
      s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, \"fallen off\""};
      auto b = makeBatch(node, seq, {s, makeSymptom(node, "nccl.timeout", kT0 + int64_t(seq) * kSec)},
                         seq == 3 ? "boot-2" : "boot-1");
      b.sources.push_back({node, "kmsg", "kmsg", 10 * seq, 0, "ok", ""});
      batches.push_back(b);
    }
  for (const auto& b : batches)
    REQUIRE(one->ingestBatch(b, b.header.agent_id).status == IngestResult::Status::kStored);
  REQUIRE(grouped->beginGroup(nullptr));
  for (const auto& b : batches)
    CHECK(grouped->ingestBatchGrouped(b, b.header.agent_id).status == IngestResult::Status::kStored);
  REQUIRE(grouped->endGroup(nullptr));

  CHECK(storedPayloads(*grouped, {"gpu-01", "gpu-02"}) == storedPayloads(*one, {"gpu-01", "gpu-02"}));
  CHECK(storedPayloads(*grouped, {"gpu-01", "gpu-02"}).size() == 12);
  auto ca = one->counts(), cb = grouped->counts();
  CHECK(cb.batches == ca.batches);
  CHECK(cb.symptoms == ca.symptoms);
  CHECK(cb.nodes == 2);
  auto agents_a = one->agents(), agents_b = grouped->agents();
  REQUIRE(agents_b.size() == 2);
  REQUIRE(agents_a.size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(agents_b[i].agent_id == agents_a[i].agent_id);
    CHECK(agents_b[i].batches == agents_a[i].batches);
    CHECK(agents_b[i].symptoms == agents_a[i].symptoms);
    CHECK(agents_b[i].boot_id == "boot-2");
  }
  for (std::string node : {"gpu-01", "gpu-02"}) {
    auto ha = one->nodeHistory(node, 0), hb = grouped->nodeHistory(node, 0);
    REQUIRE(hb.size() == ha.size());
    REQUIRE(hb.size() == 2);  // agent_seen, boot
    for (size_t i = 0; i < ha.size(); ++i) {
      CHECK(hb[i].kind == ha[i].kind);
      CHECK(hb[i].detail == ha[i].detail);
    }
  }
  auto na = one->nodes(), nb = grouped->nodes();
  REQUIRE(nb.size() == 2);
  REQUIRE(nb[0].sources.size() == 1);
  CHECK(nb[0].sources[0].records == na[0].sources[0].records);
}

TEST_CASE("ingest: inside a group a batch is stored once, the checks of the single path hold", "[store][ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("g.db"), clock);
  auto b = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid79", kT0), makeSymptom("gpu-01", "gpu.xid48", kT0)});
  REQUIRE(store->beginGroup(nullptr));
  CHECK(store->ingestBatchGrouped(b, "agent-gpu-01").status == IngestResult::Status::kStored);
  // The resend in the same group (not yet committed) is a duplicate.
  CHECK(store->ingestBatchGrouped(b, "agent-gpu-01").status == IngestResult::Status::kDuplicate);
  CHECK(store->ingestBatchGrouped(b, "agent-gpu-02").reason == "agent id mismatch");
  auto other_node = makeBatch("gpu-01", 2, {makeSymptom("gpu-02", "x", kT0)});
  CHECK(store->ingestBatchGrouped(other_node, "agent-gpu-01").reason == "symptom for another node");
  // Bound to agent-gpu-01 by the first batch of this very group.
  auto intruder = makeBatch("gpu-01", 3, {});
  intruder.header.agent_id = "intruder";
  CHECK(store->ingestBatchGrouped(intruder, "intruder").reason == "hostname bound to another agent");
  auto empty_host = makeBatch("gpu-01", 4, {});
  empty_host.header.hostname.clear();
  CHECK(store->ingestBatchGrouped(empty_host, "agent-gpu-01").reason == "missing agent id or hostname");
  REQUIRE(store->endGroup(nullptr));
  CHECK(store->counts().symptoms == 2);
  CHECK(store->counts().batches == 1);
  // After the commit, and outside a group (its own transaction): still a duplicate.
  CHECK(store->ingestBatchGrouped(b, "agent-gpu-01").status == IngestResult::Status::kDuplicate);
  auto next = makeBatch("gpu-01", 2, {makeSymptom("gpu-01", "gpu.xid48", kT0)});
  CHECK(store->ingestBatchGrouped(next, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(store->counts().symptoms == 3);
}

TEST_CASE("ingest: a write failing inside a group fails the whole group, nothing of it stored", "[store][ingest][sqlite]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("f.db"), clock);
  // A real SQLite failure on one symptom's INSERT (the cached statements are re-prepared).
  execOn(dir.file("f.db"),
         "CREATE TRIGGER poison BEFORE INSERT ON symptoms WHEN NEW.rule_id = 'poison' "
         "BEGIN SELECT RAISE(ABORT, 'poisoned'); END;");
  auto good1 = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid79", kT0)});
  auto bad = makeBatch("gpu-02", 1, {makeSymptom("gpu-02", "gpu.xid79", kT0), makeSymptom("gpu-02", "poison", kT0)});
  auto good2 = makeBatch("gpu-03", 1, {makeSymptom("gpu-03", "gpu.xid79", kT0)});
  REQUIRE(store->beginGroup(nullptr));
  CHECK(store->ingestBatchGrouped(good1, "agent-gpu-01").status == IngestResult::Status::kStored);
  auto r = store->ingestBatchGrouped(bad, "agent-gpu-02");
  CHECK(r.status == IngestResult::Status::kRejected);
  CHECK(r.reason.find("poisoned") != std::string::npos);
  CHECK(store->ingestBatchGrouped(good2, "agent-gpu-03").reason == "store: group failed");
  std::string error;
  CHECK_FALSE(store->endGroup(&error));
  CHECK_FALSE(error.empty());
  auto c = store->counts();
  CHECK(c.symptoms == 0);
  CHECK(c.batches == 0);
  CHECK(c.agents == 0);
  // The next group starts clean: the resent batches are stored (not duplicates), once.
  REQUIRE(store->beginGroup(nullptr));
  CHECK(store->ingestBatchGrouped(good1, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(store->ingestBatchGrouped(good2, "agent-gpu-03").status == IngestResult::Status::kStored);
  REQUIRE(store->endGroup(nullptr));
  CHECK(store->counts().symptoms == 2);
  CHECK(store->counts().batches == 2);
  // Outside a group the failing batch rolls back on its own.
  CHECK(store->ingestBatchGrouped(bad, "agent-gpu-02").status == IngestResult::Status::kRejected);
  CHECK(store->counts().batches == 2);
  CHECK(store->counts().symptoms == 2);
}

TEST_CASE("ingest: symptomFromPayload reads back what symptomFromJson reads, any payload text", "[store][ingest]") {
  auto s = makeSymptom("gpu-01", "nccl.remote_error", kT0 + 7, common::SubDomain::kNetwork, common::Role::kCascade,
                       "mlx5_0/1");
  s.symptom = "nccl_remote";
  s.category = "nccl";
  s.source_kind = common::SourceKind::kKernel;
  s.first_ns = -5;
  s.count = 4'000'000'000u;
  s.fallback_root = true;
  s.time_known = true;
  s.summary = "quote \" backslash \\ tab \t newline \n ctl \x01\x1f del \x7f é 中 \xF0\x9F\x98\x80";
  s.evidence = {"a", "", "b \"c\""};
  s.fields = {{"rank", "12"}, {"k\"ey", "v\\al"}, {"", ""}};
  auto same = [](const common::Symptom& a, const common::Symptom& b) { return symptomToJson(a) == symptomToJson(b); };
  std::string text = symptomJsonText(s);
  CHECK(same(symptomFromPayload(text), s));
  CHECK(same(symptomFromPayload(text), symptomFromJson(nlohmann::json::parse(text))));
  // Plain runs are scanned eight bytes at a time: every escape at every offset of a word.
  for (std::string special : {"\"", "\\", "\x01", "\n", "\x7f", "é", "\xF0\x9F\x98\x80", "/"})
    for (size_t at = 0; at < 20; ++at) {
      auto t = s;
      t.summary = std::string(at, 'a') + special + std::string(19 - at, 'z');
      t.evidence = {std::string(at + 3, 'x') + special, special + std::string(at, 'y')};
      CHECK(same(symptomFromPayload(symptomJsonText(t)), t));
    }
  s.evidence.clear();
  s.fields.clear();
  s.time_known = false;
  CHECK(same(symptomFromPayload(symptomJsonText(s)), s));
  // Texts this reader does not take (other key order, spaces, \u escapes above ASCII, unknown or
  // missing keys, other types) go through nlohmann::json and still read the same.
  nlohmann::json j = symptomToJson(s);
  for (const std::string& other :
       {j.dump(2), std::string(R"({"rule_id":"r","node":"n","count":3,"summary":"caf\u00e9 \ud83d\ude00"})"),
        j.dump().substr(0, j.dump().size() - 1) + R"(,"zzz":1})", std::string(R"({"count":2.0,"evidence":[1,"x"]})")}) {
    INFO(other);
    CHECK(same(symptomFromPayload(other), symptomFromJson(nlohmann::json::parse(other))));
  }
  CHECK(symptomFromPayload(R"({"summary":"caf\u00e9"})").summary == "café");
}

TEST_CASE("ingest: a run of batches in one call gives each batch's result and the rows of one call per batch",
          "[store][ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto one = openStore(dir.file("one.db"), clock);
  auto run = openStore(dir.file("run.db"), clock);
  // Stored before the run in both: gpu-03's agent (binds the hostname) and gpu-01's batch 1.
  auto before = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid79", kT0)});
  auto gpu03 = makeBatch("gpu-03", 1, {makeSymptom("gpu-03", "gpu.xid48", kT0)});
  for (auto* s : {one.get(), run.get()}) {
    REQUIRE(s->ingestBatch(before, "agent-gpu-01").status == IngestResult::Status::kStored);
    REQUIRE(s->ingestBatch(gpu03, "agent-gpu-03").status == IngestResult::Status::kStored);
  }
  // The run: more batches than the largest chunk (so several statements per table), a reboot
  // mid-run, a node first seen in the run, a resend of a stored batch, a repeat inside the run,
  // a hostname bound by an earlier batch of the run, one bound before, and failed checks.
  std::vector<std::pair<common::SymptomBatchData, std::string>> batches;
  for (uint64_t seq = 2; seq <= 140; ++seq)
    for (std::string node : {"gpu-01", "gpu-02"}) {
      std::vector<common::Symptom> syms;
      for (uint64_t k = 0; k < seq % 4; ++k)
        syms.push_back(makeSymptom(node, k % 2 ? "nccl.timeout" : "gpu.xid79", kT0 + int64_t(seq * 10 + k) * kSec));
      auto b = makeBatch(node, seq, syms, seq > 70 ? "boot-2" : (seq == 40 ? "" : "boot-1"));
      b.sources.push_back({node, "kmsg", "kmsg", 10 * seq, seq % 3, seq % 50 ? "ok" : "lagging", ""});
      if (seq % 7 == 0) b.sources.push_back({node, "journal", "journal", seq, 0, "ok", ""});
      batches.emplace_back(b, b.header.agent_id);
    }
  batches.emplace_back(before, "agent-gpu-01");          // stored before the run: duplicate
  batches.emplace_back(batches[5].first, "agent-gpu-02");  // twice in the run: duplicate
  auto intruder = makeBatch("gpu-02", 1, {makeSymptom("gpu-02", "x", kT0)});
  intruder.header.agent_id = "intruder";
  batches.emplace_back(intruder, "intruder");  // gpu-02 was bound by this run's first gpu-02 batch
  auto squatter = makeBatch("gpu-03", 9, {});
  squatter.header.agent_id = "squatter";
  batches.emplace_back(squatter, "squatter");                 // bound before the run
  batches.emplace_back(makeBatch("gpu-04", 1, {}), "other");  // agent id mismatch
  batches.emplace_back(makeBatch("gpu-04", 1, {makeSymptom("gpu-05", "x", kT0)}), "agent-gpu-04");

  std::vector<IngestResult> expected;
  for (const auto& [b, agent] : batches) expected.push_back(one->ingestBatch(b, agent));
  // Every other batch comes with its payload texts made beforehand (as the ingest endpoint's
  // socket thread makes them), the rest has ingestBatches make them.
  std::vector<Store::Payloads> made(batches.size());
  std::vector<Store::IngestInput> in;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (i % 2 == 0) made[i] = run->payloadsFor(batches[i].first);
    in.push_back({&batches[i].first, batches[i].second, i % 2 == 0 ? &made[i] : nullptr});
  }
  REQUIRE(run->beginGroup(nullptr));
  auto got = run->ingestBatches(in);
  REQUIRE(run->endGroup(nullptr));

  REQUIRE(got.size() == expected.size());
  size_t stored = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("batch " << i);
    CHECK(ingestStatusName(got[i].status) == ingestStatusName(expected[i].status));
    CHECK(got[i].reason == expected[i].reason);
    CHECK(got[i].symptoms == expected[i].symptoms);
    stored += got[i].status == IngestResult::Status::kStored;
  }
  CHECK(stored == 2 * 139);
  CHECK(ingestStatusName(got[got.size() - 6].status) == std::string("duplicate"));
  CHECK(got[got.size() - 4].reason == "hostname bound to another agent");
  CHECK(got[got.size() - 3].reason == "hostname bound to another agent");

  const std::vector<std::string> nodes = {"gpu-01", "gpu-02", "gpu-03"};
  CHECK(storedPayloads(*run, nodes) == storedPayloads(*one, nodes));
  auto ca = one->counts(), cb = run->counts();
  CHECK(cb.batches == ca.batches);
  CHECK(cb.symptoms == ca.symptoms);
  CHECK(cb.agents == ca.agents);
  auto agents_a = one->agents(), agents_b = run->agents();
  REQUIRE(agents_b.size() == agents_a.size());
  for (size_t i = 0; i < agents_a.size(); ++i) {
    CHECK(agents_b[i].agent_id == agents_a[i].agent_id);
    CHECK(agents_b[i].hostname == agents_a[i].hostname);
    CHECK(agents_b[i].boot_id == agents_a[i].boot_id);
    CHECK(agents_b[i].batches == agents_a[i].batches);
    CHECK(agents_b[i].symptoms == agents_a[i].symptoms);
  }
  auto na = one->nodes(), nb = run->nodes();
  REQUIRE(nb.size() == na.size());
  for (size_t i = 0; i < na.size(); ++i) {
    INFO(na[i].hostname);
    CHECK(nb[i].hostname == na[i].hostname);
    CHECK(nb[i].boot_id == na[i].boot_id);
    CHECK(nb[i].agent_id == na[i].agent_id);
    CHECK(nb[i].symptoms == na[i].symptoms);
    REQUIRE(nb[i].sources.size() == na[i].sources.size());
    for (size_t k = 0; k < na[i].sources.size(); ++k) {
      CHECK(nb[i].sources[k].source == na[i].sources[k].source);
      CHECK(nb[i].sources[k].status == na[i].sources[k].status);
      CHECK(nb[i].sources[k].records == na[i].sources[k].records);
      CHECK(nb[i].sources[k].skipped == na[i].sources[k].skipped);
    }
  }
  for (const auto& node : nodes) {
    auto ha = one->nodeHistory(node, 0), hb = run->nodeHistory(node, 0);
    REQUIRE(hb.size() == ha.size());
    for (size_t i = 0; i < ha.size(); ++i) {
      CHECK(hb[i].kind == ha[i].kind);
      CHECK(hb[i].detail == ha[i].detail);
    }
  }
  CHECK(one->nodeHistory("gpu-01", 0).size() == 2);  // agent_seen, boot-1 -> boot-2
}

TEST_CASE("ingest: a symptom text that is not UTF-8 refuses its batch, payloads made beforehand or not",
          "[store][ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  auto bad = makeSymptom("gpu-01", "gpu.xid79", kT0);
  bad.summary = "\xC0\xAF";  // an overlong '/'
  auto b1 = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid48", kT0), bad});
  auto b2 = makeBatch("gpu-01", 2, {bad});
  auto good = makeBatch("gpu-01", 3, {makeSymptom("gpu-01", "gpu.xid48", kT0 + kSec)});
  const auto made1 = store->payloadsFor(b1), made_good = store->payloadsFor(good);
  CHECK(made1.texts.empty());
  CHECK(made1.error.rfind("bad symptom text: ", 0) == 0);
  REQUIRE(made_good.error.empty());
  REQUIRE(made_good.texts.size() == 1);
  CHECK(made_good.texts[0] == encodeSymptomPayload(good.symptoms[0], good.header.boot_id));
  // Payloads of another batch (a count that does not fit) are refused too, not written.
  auto other = makeBatch("gpu-01", 4, {makeSymptom("gpu-01", "a", kT0), makeSymptom("gpu-01", "b", kT0)});
  auto got = store->ingestBatches(
      {{&b1, "agent-gpu-01", &made1}, {&b2, "agent-gpu-01"}, {&good, "agent-gpu-01", &made_good},
       {&other, "agent-gpu-01", &made_good}});
  REQUIRE(got.size() == 4);
  CHECK(got[0].status == IngestResult::Status::kRejected);
  CHECK(got[0].reason == made1.error);
  CHECK(got[1].status == IngestResult::Status::kRejected);
  CHECK(got[1].reason == made1.error);  // the same words when ingestBatches makes them
  CHECK(got[2].status == IngestResult::Status::kStored);
  CHECK(got[3].status == IngestResult::Status::kRejected);
  CHECK(store->counts().symptoms == 1);
}

TEST_CASE("store: a window's symptoms come in (node, id) order whatever their times", "[store][ingest]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("order.db"), clock);
  // Each node's later batches carry earlier times: the time index's order is not the id order.
  for (uint64_t seq = 1; seq <= 3; ++seq)
    for (std::string node : {"gpu-02", "gpu-01"}) {
      std::vector<common::Symptom> list;
      for (int k = 0; k < 3; ++k) {
        auto s = makeSymptom(node, "r" + std::to_string(seq) + std::to_string(k), kT0 + int64_t(100 - seq * 10 - k) * kSec);
        list.push_back(s);
      }
      REQUIRE(store->ingestBatch(makeBatch(node, seq, list), "agent-" + node).status == IngestResult::Status::kStored);
    }
  int64_t max_id = 0;
  auto got = store->symptomsForWindow({"gpu-01", "gpu-02"}, 0, kT0 + 3600 * kSec, kT0 + 3600 * kSec, &max_id);
  std::vector<std::string> seen;
  for (const auto& s : got) seen.push_back(s.node + "/" + s.rule_id);
  CHECK(seen == std::vector<std::string>{"gpu-01/r10", "gpu-01/r11", "gpu-01/r12", "gpu-01/r20", "gpu-01/r21",
                                         "gpu-01/r22", "gpu-01/r30", "gpu-01/r31", "gpu-01/r32", "gpu-02/r10",
                                         "gpu-02/r11", "gpu-02/r12", "gpu-02/r20", "gpu-02/r21", "gpu-02/r22",
                                         "gpu-02/r30", "gpu-02/r31", "gpu-02/r32"});
  CHECK(max_id == store->maxSymptomId());
}

// Issue 30 live: the unmatched templates agents ship are stored per node (template_store.h), read
// back per job window, and judged into the verdict's `unrecognized` and `divergent_node` as
// `faultline attribute` judges a bundle's (aggregator/verdicts/live_unrecognized.h) — spatially,
// temporally, and against the same workload's earlier successful jobs. [store], [verdicts] and
// [jobs] tests run on SQLite and again on PostgreSQL (tests/CMakeLists.txt).
#include "aggregator/verdicts/live_unrecognized.h"

#include <catch2/catch.hpp>

#include "aggregator/ingest/ingestor.h"
#include "aggregator/jobs/job_events.h"
#include "aggregator/query/query.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "common/domain_classifier.h"
#include "common/rule_set.h"
#include "tools/domain_model/builtin.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

common::UnmatchedTemplate sighting(const std::string& text, uint64_t count, const std::string& line, int64_t ns,
                                   bool timed = true, common::SourceKind kind = common::SourceKind::kJournal) {
  return {text, count, line, ns, timed, kind};
}

common::SymptomBatchData sightingsBatch(const std::string& node, uint64_t seq,
                                        std::vector<common::UnmatchedTemplate> templates) {
  auto b = makeBatch(node, seq, {});
  b.unmatched = std::move(templates);
  return b;
}

struct LiveFixture {
  TempDir dir;
  ManualClock clock{kT0};
  std::unique_ptr<Store> store;
  std::unique_ptr<VerdictEngine> engine;

  LiveFixture() {
    store = openStore(dir.file("live.db"), clock);
    static auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
    REQUIRE(loaded.rules);
    VerdictOptions o;
    o.window_margin_ns = 30 * kSec;
    engine = std::make_unique<VerdictEngine>(*store, clock, loaded.rules, o);
  }
  // A node whose agent follows the journal (records read, status ok), heard from now.
  void agent(const std::string& node, uint64_t records = 1000) {
    HeartbeatInfo hb;
    hb.agent_id = "agent-" + node;
    hb.hostname = node;
    hb.boot_id = "boot-1";
    hb.created_ns = clock.nowNs();
    hb.sources = {{"journal", "journal-file", "ok", "", records, 0, 0}};
    std::string reason;
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  }
  void ingest(const common::SymptomBatchData& b) {
    REQUIRE(store->ingestBatch(b, b.header.agent_id).status == IngestResult::Status::kStored);
  }
  // gpu-02 alone prints the ledger failure (`lines` of it, the first at `at`), in batch `seq`.
  void ledgerOnGpu02(uint64_t seq, uint64_t lines, int64_t at);
  // gpu-01..03 with live agents, each printing the SRP noise a minute after `start` (batch 1) and
  // 10 s before `end` (batch `late_seq`): noise every node shares, never unusual.
  void threeNodesWithNoise(int64_t start, int64_t end, uint64_t early_lines, uint64_t late_lines, uint64_t late_seq);
  void job(const std::string& id, const std::string& nodes, int64_t start, int64_t end, const std::string& state,
           const JobWorkload& workload) {
    recordTestJob(*store, id, nodes, start, end, state, workload);
  }
};

const std::string kLedger = "cannot reconcile ledger <HEX>: quorum failure";
const std::string kNoise = "ib_srp: login to target <HEX> failed, will retry";

void LiveFixture::ledgerOnGpu02(uint64_t seq, uint64_t lines, int64_t at) {
  ingest(sightingsBatch("gpu-02", seq, {sighting(kLedger, lines, "cannot reconcile ledger 0x3f2a: quorum failure", at)}));
}

void LiveFixture::threeNodesWithNoise(int64_t start, int64_t end, uint64_t early_lines, uint64_t late_lines,
                                      uint64_t late_seq) {
  for (const char* n : {"gpu-01", "gpu-02", "gpu-03"}) {
    agent(n);
    ingest(sightingsBatch(n, 1, {sighting(kNoise, early_lines, "ib_srp: login to target 0x11 failed, will retry", start + 60 * kSec)}));
    ingest(sightingsBatch(n, late_seq, {sighting(kNoise, late_lines, "ib_srp: login to target 0x12 failed, will retry", end - 10 * kSec)}));
  }
}

}  // namespace

TEST_CASE("template store: sightings stored once per batch, summed per window, pruned with the symptoms",
          "[store][unmatched]") {
  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("t.db"), clock);
  auto b1 = sightingsBatch("gpu-01", 1,
                           {sighting(kLedger, 3, "cannot reconcile ledger 0x3f2a: quorum failure", kT0 + 10 * kSec),
                            sighting("Traceback (most recent call last):", 1, "Traceback (most recent call last):",
                                     kT0 + 12 * kSec, false, common::SourceKind::kApplication)});
  auto b2 = sightingsBatch("gpu-01", 2, {sighting(kLedger, 2, "cannot reconcile ledger 0x1: quorum failure", kT0 + 5 * kSec)});
  auto b3 = sightingsBatch("gpu-02", 1, {sighting(kLedger, 7, "cannot reconcile ledger 0x2: quorum failure", kT0 + 99 * kSec)});
  REQUIRE(store->ingestBatch(b1, "agent-gpu-01").status == IngestResult::Status::kStored);
  // The grouped writer's path, with a resend of b1 in the run: a duplicate writes nothing.
  auto results = store->ingestBatches({{&b2, "agent-gpu-01"}, {&b1, "agent-gpu-01"}, {&b3, "agent-gpu-02"}});
  REQUIRE(results.size() == 3);
  CHECK(results[0].status == IngestResult::Status::kStored);
  CHECK(results[1].status == IngestResult::Status::kDuplicate);
  CHECK(results[2].status == IngestResult::Status::kStored);
  CHECK(store->ingestBatch(b3, "agent-gpu-02").status == IngestResult::Status::kDuplicate);

  auto rows = store->unmatchedForWindow({"gpu-01", "gpu-02"}, kT0, kT0 + 60 * kSec, 1000);
  REQUIRE(rows.size() == 2);  // gpu-02's is outside the window
  CHECK(rows[0].node == "gpu-01");
  CHECK(rows[0].t.text == kLedger);
  CHECK(rows[0].t.count == 5);                   // 3 + 2, the resend not counted
  CHECK(rows[0].t.first_ns == kT0 + 5 * kSec);   // the earliest row's line and time
  CHECK(rows[0].t.first_line == "cannot reconcile ledger 0x1: quorum failure");
  CHECK(rows[0].last_ns == kT0 + 10 * kSec);
  CHECK(rows[0].t.kind == common::SourceKind::kJournal);
  CHECK(rows[1].t.text == "Traceback (most recent call last):");
  CHECK_FALSE(rows[1].t.time_known);
  CHECK(rows[1].t.kind == common::SourceKind::kApplication);
  CHECK(store->unmatchedForWindow({"gpu-02"}, kT0, kT0 + 100 * kSec, 1000).size() == 1);
  CHECK(store->unmatchedForWindow({"gpu-01", "gpu-02"}, kT0, kT0 + 100 * kSec, 2).size() == 2);  // the limit

  // Retention: received before the cutoff, gone (the symptoms' own pass).
  clock.advance(86400 * kSec);
  while (store->pruneStep(clock.nowNs(), 0, 2) == 2) {
  }
  CHECK(store->unmatchedForWindow({"gpu-01", "gpu-02"}, kT0, kT0 + 100 * kSec, 1000).empty());
}

TEST_CASE("ingest: the unmatched templates stored, and those an agent left out, are counted", "[ingest][unmatched]") {
  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("i.db"), clock);
  Metrics metrics;
  Ingestor ingestor(*store, metrics, clock, {});
  auto b = sightingsBatch("gpu-01", 1, {sighting(kLedger, 3, "cannot reconcile ledger 0x1: quorum failure", kT0),
                                        sighting(kNoise, 1, "ib_srp: login to target 0x11 failed, will retry", kT0)});
  b.unmatched_left_out = 5;
  b.unmatched_lines_left_out = 40;
  CHECK(ingestor.ingest(b, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(ingestor.ingest(b, "agent-gpu-01").status == IngestResult::Status::kDuplicate);  // counted once
  CHECK(metrics.counter("faultline_unmatched_templates_total", "stored") == 2);
  CHECK(metrics.counter("faultline_unmatched_templates_total", "left_out") == 5);
}

TEST_CASE("jobs: the workload (name, user, partition) from the job events, sacct and the job rows",
          "[jobs][unmatched]") {
  std::string error;
  auto u = jobUpdateFromJson(nlohmann::json{{"nodes", "gpu-[01-02]"}, {"name", "llama-pretrain"}, {"user", "ana"},
                                            {"partition", "h100"}},
                             "7", JobEventKind::kStart, kT0, &error);
  INFO(error);
  REQUIRE(u);
  CHECK(u->workload.name == "llama-pretrain");
  CHECK(u->workload.user == "ana");
  CHECK(u->workload.partition == "h100");
  CHECK_FALSE(jobUpdateFromJson(nlohmann::json{{"name", 7}}, "7", JobEventKind::kStart, kT0, &error));
  CHECK(error.find("name") != std::string::npos);
  CHECK_FALSE(jobUpdateFromJson(nlohmann::json{{"user", std::string(300, 'u')}}, "7", JobEventKind::kStart, kT0, &error));

  // A real capture (samples/host-oom): sacct names the workload of every job.
  std::vector<std::string> errors;
  auto sacct = jobUpdatesFromSacct(readFile(FAULTLINE_SOURCE_DIR "/samples/host-oom/sacct.json"), &errors);
  CHECK(errors.empty());
  REQUIRE(sacct.size() == 1);
  CHECK(sacct[0].workload.name == "prep");
  CHECK(sacct[0].workload.user == "bob");
  CHECK(sacct[0].workload.partition == "gpu");

  // Stored: an update without the workload keeps it; the job's JSON shows it.
  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("j.db"), clock);
  REQUIRE(store->recordJob(*u, &error));
  JobUpdate end;
  end.job_id = "7";
  end.state = "FAILED";
  end.end_ns = kT0 + 100 * kSec;
  auto row = store->recordJob(end, &error);
  REQUIRE(row);
  CHECK(row->workload.name == "llama-pretrain");
  CHECK(row->workload.partition == "h100");
  CHECK(store->job("7")->workload.user == "ana");
}

TEST_CASE("verdicts: a failed job's unmatched error lines, spatial and temporal, with the node that diverges",
          "[verdicts][unmatched]") {
  LiveFixture f;
  const int64_t start = kT0 + 10 * kSec, end = kT0 + 3600 * kSec;
  // Every node prints the SRP noise all along; gpu-02 alone the ledger failure, a minute before the end.
  f.threeNodesWithNoise(start, end, 40, 2, 3);
  f.ledgerOnGpu02(2, 3, end - 60 * kSec);
  // A line outside the job's window (an hour after its end) is not the job's.
  f.ingest(sightingsBatch("gpu-03", 2, {sighting("fsck: cannot open /dev/sdq: No such device", 1,
                                                 "fsck: cannot open /dev/sdq: No such device", end + 3600 * kSec)}));
  f.job("500", "gpu-[01-03]", start, end, "FAILED", {"llama-pretrain", "ana", "h100"});
  f.clock.advance(end + 5 * kSec - f.clock.nowNs());
  for (const char* n : {"gpu-01", "gpu-02", "gpu-03"}) f.agent(n);
  auto v = f.engine->onJobEnded("500");
  REQUIRE(v);
  const auto& d = v->diagnosis;
  CHECK(d.sub_domain == common::SubDomain::kUnattributed);
  REQUIRE(d.unrecognized.size() == 1);  // the noise every node printed is not unusual
  const auto& u = d.unrecognized[0];
  CHECK(u.template_text == kLedger);
  CHECK(u.count == 3);
  CHECK(u.nodes == std::vector<std::string>{"gpu-02"});
  CHECK(u.first_node == "gpu-02");
  CHECK(u.first_line == "cannot reconcile ledger 0x3f2a: quorum failure");
  CHECK(u.time_known);
  CHECK(u.first_ns == end - 60 * kSec);
  REQUIRE(u.why.size() == 2);
  CHECK(u.why[0] == "spatial: printed by 1 of the 3 nodes with journal logs (gpu-02)");
  // The logs' last stamped line (the noise, 10 s before the end) closes the temporal window.
  CHECK(u.why[1] == "temporal: first seen 50 s before the last line");
  REQUIRE(d.divergent_node);
  CHECK(d.divergent_node->node == "gpu-02");
  CHECK(d.divergent_node->confidence == Approx(common::kDivergentNodeConfidence));
  CHECK(d.responsible.empty());  // a lead, never a responsible node
  CHECK(d.explanation.find("A lead, not a verdict: the logs of gpu-02") != std::string::npos);

  // The API's job JSON carries it as stored, and the CLI's report prints it.
  auto stored = f.store->latestVerdict("500");
  REQUIRE(stored);
  const auto json = common::toJson(stored->diagnosis);
  REQUIRE(json["unrecognized"].size() == 1);
  CHECK(json["unrecognized"][0]["template"] == kLedger);
  CHECK(json["divergent_node"]["node"] == "gpu-02");
  CHECK(common::renderReport(stored->diagnosis).find("cannot reconcile ledger 0x3f2a") != std::string::npos);
}

TEST_CASE("verdicts: template sightings that arrive after a revision revise the verdict when they change it",
          "[verdicts][unmatched]") {
  LiveFixture f;
  const int64_t start = kT0 + 10 * kSec, end = kT0 + 3600 * kSec;
  f.threeNodesWithNoise(start, end, 4, 1, 2);
  f.job("510", "gpu-[01-03]", start, end, "FAILED", {});
  f.clock.advance(end + 5 * kSec - f.clock.nowNs());
  auto v1 = f.engine->onJobEnded("510");
  REQUIRE(v1);
  CHECK(v1->diagnosis.unrecognized.empty());
  f.engine->tick();  // the sightings stored before the first verdict are in it: no revision for them
  CHECK(f.store->latestVerdict("510")->revision == v1->revision);

  // gpu-02's agent ships the templates of its file's last lines with a later batch — after the
  // verdict was made, with no symptom beside them.
  f.ledgerOnGpu02(3, 2, end - 30 * kSec);
  REQUIRE(f.engine->tick() == 1);
  auto v2 = f.store->latestVerdict("510");
  REQUIRE(v2);
  CHECK(v2->revision == v1->revision + 1);
  CHECK(v2->reason == "late_templates");
  REQUIRE(v2->diagnosis.unrecognized.size() == 1);
  CHECK(v2->diagnosis.unrecognized[0].template_text == kLedger);

  // Nothing new: no revision. Noise every node already printed changes nothing: no revision either.
  CHECK(f.engine->tick() == 0);
  f.ingest(sightingsBatch("gpu-01", 3, {sighting(kNoise, 1, "ib_srp: login to target 0x13 failed, will retry", end - 20 * kSec)}));
  CHECK(f.engine->tick() == 0);
  // A sighting outside the job's window is not the job's.
  f.ingest(sightingsBatch("gpu-01", 4, {sighting("fsck: cannot open /dev/sdq: No such device", 1,
                                                 "fsck: cannot open /dev/sdq: No such device", end + 7200 * kSec)}));
  CHECK(f.engine->tick() == 0);
  CHECK(f.store->latestVerdict("510")->revision == v2->revision);
}

TEST_CASE("verdicts: a node's journal that begins to count after the final revision revises what it says",
          "[verdicts][unmatched]") {
  // The job's own times are on the aggregator's clock, or a year before it (a replay, an import, a
  // scheduler whose clock is off): coverage begins on the aggregator's clock either way.
  int64_t behind = 0;
  SECTION("the job's times on the aggregator's clock") { behind = 0; }
  SECTION("the job's times a year before the aggregator's clock") { behind = 365 * 86400 * kSec; }
  LiveFixture f;
  const int64_t start = kT0 + 10 * kSec, end = kT0 + 3600 * kSec;
  f.clock.advance(behind);
  f.threeNodesWithNoise(start, end, 4, 1, 2);
  f.ledgerOnGpu02(3, 2, end - 30 * kSec);
  f.clock.advance(end + behind + 5 * kSec - f.clock.nowNs());
  f.job("520", "gpu-[01-03]", start, end, "FAILED", {});  // its end, recorded as it is reported
  f.agent("gpu-01");
  f.agent("gpu-02");
  f.agent("gpu-03", 0);  // live, but its agent has read nothing of its journal (yet)
  auto v1 = f.engine->onJobEnded("520");
  REQUIRE(v1);
  REQUIRE(v1->diagnosis.unrecognized.size() == 1);
  REQUIRE_FALSE(v1->diagnosis.unrecognized[0].why.empty());
  CHECK(v1->diagnosis.unrecognized[0].why[0] == "spatial: printed by 1 of the 2 nodes with journal logs (gpu-02)");
  // Past the settle point (and its revision), the agents' heartbeats going on as before.
  f.clock.advance(125 * kSec);
  f.agent("gpu-01");
  f.agent("gpu-02");
  f.agent("gpu-03", 0);
  f.engine->tick();
  const int before = f.store->latestVerdict("520")->revision;

  // gpu-03's journal counts from its next heartbeat on: the line is now 1 of 3 nodes'.
  f.clock.advance(30 * kSec);
  f.agent("gpu-03", 1000);
  REQUIRE(f.engine->tick() == 1);
  auto v2 = f.store->latestVerdict("520");
  REQUIRE(v2);
  CHECK(v2->revision == before + 1);
  CHECK(v2->reason == "late_coverage");
  REQUIRE(v2->diagnosis.unrecognized.size() == 1);
  CHECK(v2->diagnosis.unrecognized[0].why[0] == "spatial: printed by 1 of the 3 nodes with journal logs (gpu-02)");

  // Records that only grow are no news; nor is the same source counted again.
  f.clock.advance(30 * kSec);
  for (const char* n : {"gpu-01", "gpu-02", "gpu-03"}) f.agent(n, 5000);
  CHECK(f.engine->tick() == 0);
  CHECK(f.store->latestVerdict("520")->revision == v2->revision);
}

TEST_CASE("store: a source counts from when it first read records and was ok, and from the node's first heartbeat",
          "[store][unmatched]") {
  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("c.db"), clock);
  auto beat = [&](const std::string& node, uint64_t records, const std::string& status) {
    HeartbeatInfo hb;
    hb.agent_id = "agent-" + node;
    hb.hostname = node;
    hb.boot_id = "boot-1";
    hb.created_ns = clock.nowNs();
    hb.sources = {{"journal", "journal-file", status, "", records, 0, 0}};
    std::string reason;
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  };
  // A batch's sources come before the node's first heartbeat: they count from that heartbeat.
  auto b = makeBatch("gpu-01", 1, {});
  b.sources = {{"gpu-01", "journal", "journal-file", 10, 0, "ok", ""}};
  REQUIRE(store->ingestBatch(b, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(store->nodesCountedSince(0) == std::map<std::string, int64_t>{{"gpu-01", kT0}});
  // The grouped writer's path counts the same way (a source with nothing read does not).
  auto b3 = makeBatch("gpu-03", 1, {}), b4 = makeBatch("gpu-04", 1, {});
  b3.sources = {{"gpu-03", "journal", "journal-file", 10, 0, "partial", "rotated"}};
  b4.sources = {{"gpu-04", "journal", "journal-file", 0, 0, "ok", ""}};
  auto results = store->ingestBatches({{&b3, "agent-gpu-03"}, {&b4, "agent-gpu-04"}});
  REQUIRE(results.size() == 2);
  CHECK(results[0].status == IngestResult::Status::kStored);
  CHECK(store->nodesCountedSince(0) == std::map<std::string, int64_t>{{"gpu-01", kT0}, {"gpu-03", kT0}});
  CHECK(store->nodesCountedSince(kT0).empty());
  clock.advance(kSec);
  beat("gpu-01", 20, "ok");
  CHECK(store->nodesCountedSince(kT0) == std::map<std::string, int64_t>{{"gpu-01", kT0 + kSec}});
  clock.advance(kSec);
  beat("gpu-01", 30, "ok");  // still counting: the time it began stays
  beat("gpu-02", 0, "ok");   // nothing read: not counting
  CHECK(store->nodesCountedSince(kT0) == std::map<std::string, int64_t>{{"gpu-01", kT0 + kSec}});
  CHECK(store->nodesCountedSince(kT0 + kSec).empty());
  clock.advance(kSec);
  beat("gpu-01", 30, "error");  // stops counting
  beat("gpu-02", 5, "partial");
  CHECK(store->nodesCountedSince(kT0) == std::map<std::string, int64_t>{{"gpu-02", kT0 + 3 * kSec}});
  clock.advance(kSec);
  beat("gpu-01", 31, "ok");  // counts again, from now
  CHECK(store->nodesCountedSince(kT0 + 3 * kSec) == std::map<std::string, int64_t>{{"gpu-01", kT0 + 4 * kSec}});
}

TEST_CASE("verdicts: the same workload's earlier successful job that printed the template makes it not unusual",
          "[verdicts][unmatched]") {
  LiveFixture f;
  for (const char* n : {"gpu-01", "gpu-02", "gpu-03", "gpu-04"}) f.agent(n);
  const JobWorkload llama{"llama-pretrain", "ana", "h100"};
  // The good run, on other nodes: gpu-04 printed the ledger line too, and the job completed.
  const int64_t good_start = kT0 + 10 * kSec, good_end = kT0 + 1800 * kSec;
  f.ingest(sightingsBatch("gpu-04", 1, {sighting(kLedger, 1, "cannot reconcile ledger 0x9: quorum failure", good_end - 30 * kSec)}));
  f.job("600", "gpu-04", good_start, good_end, "COMPLETED", llama);
  // The failed run: gpu-02 prints the ledger line and a new one.
  const int64_t start = kT0 + 2000 * kSec, end = kT0 + 5600 * kSec;
  const std::string kShard = "checkpoint shard <NUM> failed verification";
  f.ingest(sightingsBatch("gpu-02", 2,
                          {sighting(kLedger, 3, "cannot reconcile ledger 0x3f2a: quorum failure", end - 60 * kSec),
                           sighting(kShard, 1, "checkpoint shard 17 failed verification", end - 50 * kSec)}));
  f.clock.advance(end + 5 * kSec - f.clock.nowNs());
  for (const char* n : {"gpu-01", "gpu-02", "gpu-03", "gpu-04"}) f.agent(n);

  SECTION("same workload: the baseline knows the ledger line") {
    f.job("601", "gpu-[01-03]", start, end, "FAILED", llama);
    auto v = f.engine->onJobEnded("601");
    REQUIRE(v);
    REQUIRE(v->diagnosis.unrecognized.size() == 1);
    const auto& u = v->diagnosis.unrecognized[0];
    CHECK(u.template_text == kShard);
    REQUIRE(u.why.size() == 3);
    CHECK(u.why[1] == "cross-job: not in the baseline runs' logs");
  }
  SECTION("another user's job of the same name is no baseline") {
    f.job("602", "gpu-[01-03]", start, end, "FAILED", {"llama-pretrain", "bo", "h100"});
    auto v = f.engine->onJobEnded("602");
    REQUIRE(v);
    CHECK(v->diagnosis.unrecognized.size() == 2);
    for (const auto& u : v->diagnosis.unrecognized)
      for (const auto& why : u.why) CHECK(why.rfind("cross-job", 0) != 0);
  }
  SECTION("a failed run of the same workload is no baseline") {
    JobUpdate failed;
    failed.job_id = "600";
    failed.state = "FAILED";
    std::string error;
    REQUIRE(f.store->recordJob(failed, &error));
    f.job("603", "gpu-[01-03]", start, end, "FAILED", llama);
    auto v = f.engine->onJobEnded("603");
    REQUIRE(v);
    CHECK(v->diagnosis.unrecognized.size() == 2);
  }
}

TEST_CASE("verdicts: no divergent node when another node's agent did not answer, nor when a rule decided",
          "[verdicts][unmatched]") {
  LiveFixture f;
  for (const char* n : {"gpu-01", "gpu-02"}) f.agent(n);  // gpu-03 has no agent
  const int64_t start = kT0 + 10 * kSec, end = kT0 + 600 * kSec;
  f.ledgerOnGpu02(1, 3, end - 60 * kSec);
  f.job("700", "gpu-[01-03]", start, end, "FAILED", {});
  f.clock.advance(end + 5 * kSec - f.clock.nowNs());
  for (const char* n : {"gpu-01", "gpu-02"}) f.agent(n);
  auto v = f.engine->onJobEnded("700");
  REQUIRE(v);
  REQUIRE(v->diagnosis.unrecognized.size() == 1);
  CHECK_FALSE(v->diagnosis.divergent_node);  // gpu-03's logs were not read: nothing localizes

  // A rule-based root on gpu-01: the verdict's domain and node stand; no lead beside them.
  f.agent("gpu-03");
  auto xid = makeSymptom("gpu-01", "gpu.xid.79", end - 30 * kSec, common::SubDomain::kHardware, common::Role::kRoot,
                         "0000:3b:00.0");
  xid.symptom = "gpu_fell_off_bus";
  f.ingest(makeBatch("gpu-01", 1, {xid}));
  f.job("701", "gpu-[01-03]", start, end, "FAILED", {});
  auto w = f.engine->onJobEnded("701");
  REQUIRE(w);
  CHECK(w->diagnosis.sub_domain == common::SubDomain::kHardware);
  CHECK_FALSE(w->diagnosis.divergent_node);
  CHECK(w->diagnosis.unrecognized.size() == 1);  // still listed: what no rule read
}

TEST_CASE("job output: the output file's templates are validated, stored with the output and read back",
          "[jobs][unmatched]") {
  const auto body = nlohmann::json::parse(readFile(FAULTLINE_SOURCE_DIR "/tests/fuzz/seeds/upload/unmatched-templates"));
  std::string error;
  auto out = jobOutputFromJson(body, "4812345", kT0, &error);
  INFO(error);
  REQUIRE(out);
  REQUIRE(out->unmatched.size() == 2);
  const auto& shard = out->unmatched[0];
  CHECK(shard.text == "ValueError: shard <NUM> has <NUM> rows, expected <NUM>");
  CHECK(shard.count == 8);
  CHECK(shard.nodes == std::map<std::string, uint64_t>{{"", 1}, {"gpu-a02", 7}});
  CHECK(shard.time_known);
  CHECK(shard.kinds == std::set<common::SourceKind>{common::SourceKind::kApplication});
  CHECK_FALSE(out->unmatched[1].time_known);
  CHECK(out->unmatched[1].early);
  // Hostile entries are refused with the entry named, like a bad symptom.
  for (auto bad : {nlohmann::json{{"template", "x"}, {"count", 0}, {"nodes", nlohmann::json::object()}, {"kind", "journal"}},
                   nlohmann::json{{"template", "x"}, {"count", 1}, {"nodes", {{"n", -1}}}, {"kind", "journal"}},
                   nlohmann::json{{"template", "x"}, {"count", 1}, {"nodes", nlohmann::json::object()}, {"kind", "fs"}},
                   nlohmann::json{{"template", std::string("a\0b", 3)}, {"count", 1}, {"nodes", nlohmann::json::object()},
                                  {"kind", "journal"}}}) {
    auto b = body;
    b["unmatched"] = nlohmann::json::array({bad});
    CHECK_FALSE(jobOutputFromJson(b, "4812345", kT0, &error));
    CHECK(error.rfind("unmatched template 0", 0) == 0);
  }

  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("o.db"), clock);
  REQUIRE(store->putJobOutput(*out, &error));
  auto back = store->jobOutputs("4812345");
  REQUIRE(back.size() == 1);
  REQUIRE(back[0].unmatched.size() == 2);
  CHECK(back[0].unmatched[0].text == shard.text);
  CHECK(back[0].unmatched[0].nodes == shard.nodes);
  CHECK(back[0].unmatched[0].first_ns == shard.first_ns);
  // As rows for the merge: the first line's node first, "" (no known node) kept.
  auto rows = outputRows(back[0].unmatched);
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].node == "gpu-a02");
  CHECK(rows[0].t.count == 7);
  CHECK(rows[1].node == "");
  CHECK(rows[2].node == "gpu-a01");
  CHECK(rows[2].early == std::optional<bool>(true));
}

TEST_CASE("live unrecognized: templates two agents generalized apart merge as one miner would", "[unmatched]") {
  // gpu-01 saw "init" lines, gpu-02 "start" lines of one message: offline one miner makes them one
  // template printed by both nodes (not spatially unusual); so must the merge.
  std::vector<UnmatchedSighting> rows = {
      {"gpu-01", sighting("GPU <NUM> failed to init", 2, "GPU 3 failed to init", kT0 + 5 * kSec), kT0 + 5 * kSec},
      {"gpu-02", sighting("GPU <NUM> failed to start", 1, "GPU 1 failed to start", kT0 + 2 * kSec), kT0 + 2 * kSec},
      {"gpu-02", sighting("Traceback (most recent call last):", 1, "Traceback (most recent call last):", kT0, false,
                          common::SourceKind::kApplication),
       kT0},
  };
  auto merged = mergeSightings(rows, kT0 + 1);
  REQUIRE(merged.size() == 2);
  CHECK(merged[0].text == "GPU <NUM> failed to <*>");
  CHECK(merged[0].count == 3);
  CHECK(merged[0].nodes == std::map<std::string, uint64_t>{{"gpu-01", 2}, {"gpu-02", 1}});
  CHECK(merged[0].first_node == "gpu-01");  // node order, as a bundle's folders are read
  CHECK(merged[0].first_ns == kT0 + 2 * kSec);
  CHECK(merged[1].early);  // read before kT0 + 1: not new at the end
  CHECK_FALSE(merged[1].time_known);

  // Which nodes have logs of which kind: sources with records, from answering agents.
  std::vector<common::CoverageEntry> coverage = {{"gpu-01", "journal", "journal-file", 10, 0, "ok", ""},
                                                 {"gpu-01", "/var/log/app.log", "application", 0, 0, "ok", ""},
                                                 {"gpu-02", "/var/log/fm.log", "fabricmanager", 3, 0, "partial", ""},
                                                 {"gpu-03", "journal", "journal-file", 10, 0, "ok", ""}};
  auto covered = coveredByKind(coverage, {"gpu-01", "gpu-02"});
  CHECK(covered[common::SourceKind::kJournal] == std::set<std::string>{"gpu-01"});
  CHECK(covered[common::SourceKind::kKernel] == std::set<std::string>{"gpu-01"});
  CHECK(covered[common::SourceKind::kFabricManager] == std::set<std::string>{"gpu-02"});
  CHECK(covered.count(common::SourceKind::kApplication) == 0);  // no records read
}

TEST_CASE("verdicts: an unattributed live verdict gains the unmatched lines' domain lead, as attribute's does",
          "[verdicts][unmatched]") {
  std::string why;
  auto model = common::DomainClassifier::parse(common::builtinDomainModelText(), &why);
  REQUIRE(model);
  TempDir dir;
  ManualClock clock{kT0};
  auto store = openStore(dir.file("lead.db"), clock);
  static auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  VerdictOptions o;
  o.domain_model = &*model;
  VerdictEngine engine(*store, clock, loaded.rules, o);
  VerdictEngine without(*store, clock, loaded.rules, VerdictOptions{});
  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-07";
  hb.hostname = "gpu-07";
  hb.boot_id = "boot-1";
  hb.created_ns = clock.nowNs();
  hb.sources = {{"journal", "journal-file", "ok", "", 1000, 0, 0}};
  REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &why));
  const int64_t start = kT0 + 10 * kSec, end = kT0 + 600 * kSec;
  const std::string line = "mlx5_core 0000:3b:00.0: port 1 link down: cable unplugged, infiniband fabric error";
  REQUIRE(store->ingestBatch(sightingsBatch("gpu-07", 1, {sighting(line, 4, line, end - 30 * kSec)}), hb.agent_id)
              .status == IngestResult::Status::kStored);
  recordTestJob(*store, "700", "gpu-07", start, end, "FAILED", {"train", "bo", "a100"});
  clock.advance(end + 5 * kSec - clock.nowNs());
  hb.created_ns = clock.nowNs();
  REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &why));
  auto plain = without.evaluate(*store->job("700"), "job_end");
  auto v = engine.evaluate(*store->job("700"), "job_end");
  const auto& d = v.diagnosis;
  CHECK(d.sub_domain == common::SubDomain::kUnattributed);
  REQUIRE(!d.unrecognized.empty());
  const std::string lead = common::unrecognizedDomainLead(d.unrecognized, *model);
  REQUIRE(!lead.empty());
  CHECK(d.explanation == plain.diagnosis.explanation + " " + lead);
  CHECK(d.explanation.find("a lead, not a verdict") != std::string::npos);
  CHECK(d.sub_domain == plain.diagnosis.sub_domain);  // a lead never changes the verdict
  CHECK(d.responsible.empty());
}

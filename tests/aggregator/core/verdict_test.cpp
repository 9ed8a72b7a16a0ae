#include "aggregator/verdicts/verdict_engine.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

#include "aggregator/offline/attribute.h"
#include "aggregator/offline/bundle.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const common::RuleSet> shippedRules() {
  static auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  return loaded.rules;
}

struct Fixture {
  TempDir dir;
  ManualClock clock{kT0};
  std::unique_ptr<Store> store;
  Metrics metrics;
  VerdictOptions options;
  std::unique_ptr<VerdictEngine> engine;

  Fixture() {
    std::string error;
    store = Store::open(storeTarget(dir.file("v.db")), clock, {}, &error);
    REQUIRE(store);
    options.settle_ns = 60 * kSec;
    options.window_margin_ns = 30 * kSec;
    options.agent_timeout_ns = 90 * kSec;
    options.final_timeout_ns = 1800 * kSec;
    engine = std::make_unique<VerdictEngine>(*store, clock, shippedRules(), options, &metrics);
  }
  void heartbeat(const std::string& node, int64_t created_ns, uint64_t spool = 0,
                 std::optional<common::NodeInventory> inventory = std::nullopt) {
    HeartbeatInfo hb;
    hb.inventory = std::move(inventory);
    hb.agent_id = "agent-" + node;
    hb.hostname = node;
    hb.boot_id = "boot-1";
    hb.created_ns = created_ns;
    hb.spool_batches = spool;
    hb.sources = {{"kmsg", "kmsg", "ok", "", 10, 0, 0}};
    std::string reason;
    REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &reason));
  }
  void job(const std::string& id, const std::string& nodes, int64_t start, int64_t end, const std::string& state) {
    recordTestJob(*store, id, nodes, start, end, state);
  }
  void ingest(const common::SymptomBatchData& b) {
    REQUIRE(store->ingestBatch(b, b.header.agent_id).status == IngestResult::Status::kStored);
  }
};

// A real kmsg Xid 79 line run through the shipped rules, so the verdict comes from real rules.
common::Symptom xid79(const std::string& node, int64_t t) {
  auto s = makeSymptom(node, "gpu.xid.79", t, common::SubDomain::kHardware, common::Role::kRoot, "0000:3b:00.0");
  s.symptom = "gpu_fell_off_bus";
  return s;
}

}  // namespace

TEST_CASE("verdicts: provisional at once, revised after settle, final when every node reported", "[verdicts]") {
  Fixture f;
  for (const char* n : {"gpu-01", "gpu-02"}) f.heartbeat(n, kT0);
  f.job("100", "gpu-[01-02]", kT0, kT0 + 300 * kSec, "RUNNING");
  f.ingest(makeBatch("gpu-01", 1, {xid79("gpu-01", kT0 + 290 * kSec)}));
  CHECK_FALSE(f.engine->onJobEnded("100"));  // still running
  f.clock.advance(301 * kSec);
  f.job("100", "", 0, kT0 + 300 * kSec, "FAILED");

  auto v1 = f.engine->onJobEnded("100");
  REQUIRE(v1);
  CHECK(v1->revision == 1);
  CHECK(v1->status == "provisional");
  CHECK(v1->reason == "job_end");
  CHECK(v1->diagnosis.sub_domain == common::SubDomain::kHardware);
  REQUIRE_FALSE(v1->diagnosis.responsible.empty());
  CHECK(v1->diagnosis.responsible[0].node == "gpu-01");
  CHECK(v1->missing_nodes == std::vector<std::string>{"gpu-01", "gpu-02"});
  CHECK_FALSE(f.engine->onJobEnded("100"));  // one first verdict only
  CHECK(f.engine->tick() == 0);              // nothing due yet
  CHECK(f.metrics.observations("faultline_verdict_latency_seconds") == 1);

  f.clock.advance(60 * kSec);
  for (const char* n : {"gpu-01", "gpu-02"}) f.heartbeat(n, kT0 + 320 * kSec);  // not past end + margin
  CHECK(f.engine->tick() == 1);
  auto v2 = f.store->latestVerdict("100");
  CHECK(v2->revision == 2);
  CHECK(v2->reason == "settle");
  CHECK(v2->status == "provisional");
  // Both agents are live (a heartbeat 41 s ago): not reported past the window yet, waited for,
  // not missing. At revision 1 their last heartbeats were 301 s old: missing then.
  CHECK(v2->missing_nodes.empty());
  CHECK(f.engine->tick() == 0);

  f.heartbeat("gpu-01", kT0 + 400 * kSec);
  f.heartbeat("gpu-02", kT0 + 400 * kSec, /*spool=*/2);  // still has unsent batches
  CHECK(f.engine->tick() == 0);
  f.heartbeat("gpu-02", kT0 + 410 * kSec, 0);
  CHECK(f.engine->tick() == 1);
  auto v3 = f.store->latestVerdict("100");
  CHECK(v3->revision == 3);
  CHECK(v3->status == "final");
  CHECK(v3->reason == "reported");
  CHECK(v3->missing_nodes.empty());
  CHECK(f.store->verdictHistory("100").size() == 3);
  CHECK(f.engine->tick() == 0);
}

TEST_CASE("verdicts: late symptoms for the window make a new revision", "[verdicts]") {
  Fixture f;
  f.job("200", "gpu-[01-02]", kT0, kT0 + 300 * kSec, "FAILED");
  f.clock.advance(300 * kSec);
  REQUIRE(f.engine->tick() == 1);  // first verdict without an explicit onJobEnded
  auto v1 = f.store->latestVerdict("200");
  CHECK(v1->symptoms == 0);
  CHECK(f.engine->tick() == 0);
  // A symptom for another time on the same node does not touch this job.
  f.ingest(makeBatch("gpu-02", 1, {xid79("gpu-02", kT0 + 86400 * kSec)}));
  CHECK(f.engine->tick() == 0);
  f.ingest(makeBatch("gpu-02", 2, {xid79("gpu-02", kT0 + 200 * kSec)}));
  CHECK(f.engine->tick() == 1);
  auto v2 = f.store->latestVerdict("200");
  CHECK(v2->reason == "late_symptoms");
  CHECK(v2->symptoms == 1);
  CHECK(v2->diagnosis.sub_domain == common::SubDomain::kHardware);
  CHECK(v2->diagnosis.responsible.at(0).node == "gpu-02");
}

TEST_CASE("verdicts: a tick does not judge a job again for symptoms its last evaluation read", "[verdicts]") {
  Fixture f;
  for (const char* n : {"gpu-01", "gpu-02"}) f.heartbeat(n, kT0);
  f.job("210", "gpu-[01-02]", kT0, kT0 + 300 * kSec, "RUNNING");
  // The cascade's last symptoms are stored after the engine's last tick and before the end.
  CHECK(f.engine->tick() == 0);
  f.ingest(makeBatch("gpu-01", 1, {xid79("gpu-01", kT0 + 290 * kSec)}));
  f.clock.advance(301 * kSec);
  f.job("210", "", 0, kT0 + 300 * kSec, "FAILED");
  REQUIRE(f.engine->onJobEnded("210"));
  CHECK(f.metrics.counter("faultline_verdict_evaluations_total") == 1);
  // The next tick sees that symptom as new since its watermark, but the end's verdict read it.
  CHECK(f.engine->tick() == 0);
  CHECK(f.metrics.counter("faultline_verdict_evaluations_total") == 1);
  // A symptom the verdict has not read is news: judged again, a revision.
  f.ingest(makeBatch("gpu-02", 1, {xid79("gpu-02", kT0 + 295 * kSec)}));
  CHECK(f.engine->tick() == 1);
  CHECK(f.metrics.counter("faultline_verdict_evaluations_total") == 2);
  auto v2 = f.store->latestVerdict("210");
  REQUIRE(v2);
  CHECK(v2->revision == 2);
  CHECK(v2->reason == "late_symptoms");
  CHECK(v2->symptoms == 2);
  CHECK(f.engine->tick() == 0);
  CHECK(f.metrics.counter("faultline_verdict_evaluations_total") == 2);
}

TEST_CASE("verdicts: a job's uploaded output counts, also before its end, ranks placed by the layout", "[verdicts]") {
  Fixture f;
  // The output arrives first (the node epilog beat slurmctld's): a job not known yet. Its rank 5
  // could not be placed where it was read.
  common::Symptom tb = makeSymptom("", "python.exception", 0, common::SubDomain::kApplication);
  tb.time_known = false;
  tb.symptom = "python_exception";
  tb.fields["rank"] = "5";
  tb.source = "/shared/slurm-300.out";
  JobOutput out;
  out.job_id = "300";
  out.source = out.coverage.source = "/shared/slurm-300.out";
  out.coverage.format = "application";
  out.coverage.records = 40;
  out.symptoms = {tb};
  std::string error;
  REQUIRE(f.store->putJobOutput(out, &error));
  f.clock.advance(300 * kSec);
  CHECK(f.engine->tick() == 0);                  // nothing to judge: no job
  CHECK_FALSE(f.engine->onJobOutput("300"));
  // The job ends; the sacct poll knows 4 tasks per node, so rank 5 ran on gpu-02.
  JobUpdate u;
  u.job_id = "300";
  u.nodelist = "gpu-[01-02]";
  u.start_ns = kT0;
  u.end_ns = kT0 + 290 * kSec;
  u.state = "FAILED";
  u.ntasks_per_node = 4;
  u.source = "sacct";
  REQUIRE(f.store->recordJob(u, &error));
  auto v1 = f.engine->onJobEnded("300");
  REQUIRE(v1);
  CHECK(v1->symptoms == 1);
  CHECK(v1->diagnosis.sub_domain == common::SubDomain::kApplication);
  REQUIRE_FALSE(v1->diagnosis.responsible.empty());
  CHECK(v1->diagnosis.responsible[0].node == "gpu-02");
  bool covered = false;
  for (const auto& c : v1->diagnosis.coverage) covered |= c.source == "/shared/slurm-300.out" && c.records == 40;
  CHECK(covered);
  CHECK(f.engine->tick() == 0);  // the output was already judged: no second revision for it

  // A second file (stderr) written through the SQLite file, with no engine to judge it at once:
  // the next tick sees it.
  JobOutput err = out;
  err.source = err.coverage.source = "/shared/slurm-300.err";
  err.symptoms[0].rule_id = "cuda.oom";
  err.symptoms[0].fields["rank"] = "0";
  REQUIRE(f.store->putJobOutput(err, &error));
  CHECK(f.engine->tick() == 1);
  auto v2 = f.store->latestVerdict("300");
  CHECK(v2->reason == "late_symptoms");
  CHECK(v2->symptoms == 2);
  CHECK(f.engine->tick() == 0);
  // Retention removes a job's outputs with the job.
  while (f.store->pruneStep(kT0 + 100'000 * kSec, kT0 + 100'000 * kSec, 100) == 100) {
  }
  CHECK(f.store->jobOutputs("300").empty());
  CHECK_FALSE(f.store->job("300"));
}

TEST_CASE("verdicts: nodes without a live agent show as missing, final after the timeout", "[verdicts]") {
  Fixture f;
  f.heartbeat("gpu-01", kT0);
  f.job("300", "gpu-[01-03]", kT0, kT0 + 100 * kSec, "NODE_FAIL");
  f.clock.advance(100 * kSec);  // gpu-01's heartbeat is now 100 s old: dead too
  f.heartbeat("gpu-02", kT0 + 500 * kSec);
  auto v = f.engine->onJobEnded("300");
  REQUIRE(v);
  std::map<std::string, std::string> status;
  for (const auto& c : v->diagnosis.coverage) status[c.node] = c.status;
  CHECK(status["gpu-01"] == "missing");
  CHECK(status["gpu-02"] == "ok");
  CHECK(status["gpu-03"] == "missing");
  CHECK(v->status == "provisional");
  f.clock.advance(1800 * kSec);
  f.engine->tick();
  auto last = f.store->latestVerdict("300");
  CHECK(last->status == "final");
  CHECK(last->reason == "timeout");
  CHECK(last->missing_nodes == std::vector<std::string>{"gpu-01", "gpu-03"});
}

TEST_CASE("verdicts: a refined job state revises the verdict, successes get none", "[verdicts]") {
  Fixture f;
  f.job("400", "gpu-01", kT0, kT0 + 100 * kSec, "FAILED");
  f.job("401", "gpu-01", kT0, kT0 + 100 * kSec, "COMPLETED");
  f.clock.advance(100 * kSec);
  CHECK(f.engine->tick() == 1);
  CHECK_FALSE(f.store->latestVerdict("401"));
  f.job("400", "", 0, 0, "NODE_FAIL");
  CHECK(f.engine->tick() == 1);
  auto v = f.store->latestVerdict("400");
  CHECK(v->reason == "job_update");
  CHECK(v->diagnosis.terminal_state == "node_fail");
}

// The aggregator must reach the verdict `faultline attribute` reaches for the same evidence: each
// sample bundle's symptoms go in as per-node agent batches, its job as a job record.
TEST_CASE("verdicts: stored verdicts equal offline attribution for every sample, job output uploaded", "[verdicts][samples]") {
  auto rules = shippedRules();
  common::RuleEngine engine(rules);
  std::vector<fs::path> samples;
  for (const auto& e : fs::directory_iterator(FAULTLINE_SOURCE_DIR "/samples"))
    if (fs::exists(e.path() / "expected.json")) samples.push_back(e.path());
  std::sort(samples.begin(), samples.end());
  REQUIRE(samples.size() >= 10);
  size_t compared = 0, with_output = 0;
  for (const auto& dir : samples) {
    std::string error;
    auto bundle = offline::loadBundle(dir.string(), engine, &error);
    REQUIRE(bundle);
    auto offline = offline::attributeBundle(dir.string(), engine, &error);
    REQUIRE(offline);
    if (!bundle->job.end_ns) continue;  // a live job needs an end to be judged
    Fixture f;
    f.clock.advance(bundle->job.end_ns - kT0);
    // What node.json says of a node (its GPUs, its addresses) the node's agent sends live as its
    // inventory.
    for (const auto& [node, info] : bundle->nodes) {
      if (!info.gpu_count && info.addresses.empty()) continue;
      common::NodeInventory inv;
      inv.addresses = info.addresses;
      if (info.gpu_count)
        for (int i = 0; i < *info.gpu_count; ++i) {
          const bool listed = size_t(i) < info.gpus.size();
          inv.gpus.push_back({uint32_t(listed ? info.gpus[i].index : i), listed ? info.gpus[i].pci : "",
                              listed ? info.gpus[i].uuid : "", listed ? info.gpus[i].serial : ""});
        }
      else
        inv.gpu_error = "node.json lists no GPUs";  // a GPU count the live side does not know either
      f.heartbeat(node, bundle->job.start_ns, 0, std::move(inv));
    }
    // Node logs reach the aggregator from each node's agent; the job-wide logs at the bundle's
    // top (the job's output file) from `faultline job output`, one upload per file.
    std::map<std::string, common::SymptomBatchData> batches;
    std::map<std::string, JobOutput> outputs;
    for (const auto& s : bundle->symptoms) {
      // Everything not under nodes/ (the job's output file; a Kubernetes bundle's kube/ events and
      // pods/ logs, which no agent collects) arrives as an upload of the job's output.
      if (fs::path(s.source).lexically_relative(dir).string().rfind("nodes/", 0) != 0) {
        auto& o = outputs[s.source];
        o.job_id = bundle->job.job_id.empty() ? "job" : bundle->job.job_id;
        o.source = o.coverage.source = s.source;
        o.symptoms.push_back(s);
        continue;
      }
      REQUIRE_FALSE(s.node.empty());
      auto& b = batches[s.node];
      if (b.header.hostname.empty()) b = makeBatch(s.node, 1, {});
      b.symptoms.push_back(s);
    }
    for (auto& [node, b] : batches) f.ingest(b);
    // A node whose logs the bundle read (a Kubernetes bundle's pod logs, with no nodes/ folder) is
    // one an agent answered for live: a heartbeat of its own, as the inventory loop gives others.
    for (const auto& c : bundle->coverage)
      if (!c.node.empty() && c.records > 0 && (c.status == "ok" || c.status == "partial") && !bundle->nodes.count(c.node))
        f.heartbeat(c.node, bundle->job.start_ns);
    for (auto& [source, o] : outputs) REQUIRE(f.store->putJobOutput(o, &error));
    if (!outputs.empty()) ++with_output;
    JobUpdate u = jobUpdateOf(bundle->job, bundle->job.job_id.empty() ? "job" : bundle->job.job_id);
    REQUIRE(f.store->recordJob(u, &error));
    if (!f.store->job(u.job_id)->failed()) continue;
    auto v = f.engine->onJobEnded(u.job_id);
    REQUIRE(v);
    auto got = common::toJson(v->diagnosis);
    auto want = common::toJson(*offline);
    got.erase("coverage");
    want.erase("coverage");
    // Templates of unmatched lines are mined offline only (agents do not ship them yet): the live
    // verdict lists none and gives no lead (docs/output-schema.md, "unrecognized").
    CHECK(got["unrecognized"].empty());
    CHECK(got["divergent_node"].is_null());
    REQUIRE(want["divergent_node"].is_null());  // else the explanation differs by the lead's sentence
    got.erase("unrecognized");
    want.erase("unrecognized");
    INFO(dir.filename().string());
    CHECK(got.dump(1) == want.dump(1));
    ++compared;
  }
  CHECK(compared >= 25);
  CHECK(with_output >= 25);
}

TEST_CASE("verdicts: metric evidence is asked at the first verdict and at settle, and revises the verdict", "[verdicts]") {
  Fixture f;
  for (const char* n : {"gpu-01", "gpu-02"}) f.heartbeat(n, kT0);
  std::vector<std::string> asked;
  f.engine->setMetricRequest([&](const common::JobInfo& job) { asked.push_back(job.job_id); });
  f.job("300", "gpu-[01-02]", kT0, kT0 + 300 * kSec, "RUNNING");
  f.clock.advance(301 * kSec);
  f.job("300", "", 0, kT0 + 300 * kSec, "FAILED");
  auto v1 = f.engine->onJobEnded("300");
  REQUIRE(v1);
  CHECK(v1->diagnosis.sub_domain == common::SubDomain::kUnattributed);  // no log evidence at all
  CHECK(asked == std::vector<std::string>{"300"});

  // What --prometheus found: gpu-02's GPU lost its memory row 20 s before the end.
  common::Symptom s;
  s.rule_id = "metric.dcgm.uncorrectable_remapped_rows";
  s.symptom = "gpu_row_remap_uncorrectable";
  s.sub_domain = common::SubDomain::kHardware;
  s.category = "gpu_memory";
  s.role = common::Role::kRoot;
  s.severity = common::Severity::kCritical;
  s.node = "gpu-02";
  s.device = "0000:5d:00.0";
  s.source = "prometheus http://127.0.0.1:9090";
  s.source_kind = common::SourceKind::kMetric;
  s.first_ns = s.last_ns = kT0 + 280 * kSec;
  s.time_known = true;
  common::CoverageEntry cov{"", "prometheus http://127.0.0.1:9090 DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "promql",
                            40, 0, "ok", "2 series of the job's nodes"};
  auto v2 = f.engine->onMetricEvidence("300", {s}, {cov});
  REQUIRE(v2);
  CHECK(v2->revision == 2);
  CHECK(v2->reason == "metrics");
  CHECK(v2->diagnosis.sub_domain == common::SubDomain::kHardware);
  REQUIRE(v2->diagnosis.responsible.size() == 1);
  CHECK(v2->diagnosis.responsible[0].node == "gpu-02");
  CHECK(std::any_of(v2->diagnosis.coverage.begin(), v2->diagnosis.coverage.end(),
                    [](const auto& c) { return c.format == "promql" && c.status == "ok"; }));
  // The same evidence again changes nothing: no revision.
  auto same = f.engine->onMetricEvidence("300", {s}, {cov});
  REQUIRE(same);
  CHECK(same->revision == 2);
  // Settle: asked again, and the settle revision still holds the evidence.
  f.clock.advance(130 * kSec);
  CHECK(f.engine->tick() == 1);
  CHECK(asked == std::vector<std::string>{"300", "300"});
  auto v3 = f.store->latestVerdict("300");
  CHECK(v3->reason == "settle");
  CHECK(v3->diagnosis.sub_domain == common::SubDomain::kHardware);
}

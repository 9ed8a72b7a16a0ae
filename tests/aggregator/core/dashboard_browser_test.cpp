// The dashboard in a real browser: a real SQLite store filled with the symptoms of sample bundles
// (as their nodes' agents would have sent them, moved in time so they ended in the last days),
// their jobs and agents' heartbeats; the real faultline-aggregator computes the verdicts and
// serves /ui/; Debian's headless Chromium (puppeteer-core, tests/browser/dashboard.mjs) checks
// what a person would see on each page and in `faultline attribute --html` reports opened from
// disk. Screenshots land in BUILD/browser-screenshots/.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>

#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/offline/bundle.h"
#include "aggregator/store/store.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

// Writes a sample's evidence into the store as its nodes' agents and its job's epilog would have,
// with every time moved by `shift_ns`. Node logs arrive as agent batches; the job's own output
// file as a job output upload. Returns the job id used.
class Seeder {
 public:
  Seeder(Store& store, const common::RuleEngine& engine) : store_(store), engine_(engine) {}

  std::string add(const std::string& sample, const std::string& job_id, int64_t end_ns) {
    std::string error;
    auto bundle = offline::loadBundle(FAULTLINE_SOURCE_DIR "/samples/" + sample, engine_, &error);
    REQUIRE(bundle);
    const int64_t shift = end_ns - bundle->job.end_ns;
    std::map<std::string, std::vector<common::Symptom>> by_node, by_output;
    for (auto s : bundle->symptoms) {
      if (s.time_known) {
        s.first_ns += shift;
        s.last_ns += shift;
      }
      bool node_log = s.source.find("/nodes/") != std::string::npos && !s.node.empty();
      (node_log ? by_node[s.node] : by_output[s.source]).push_back(std::move(s));
    }
    for (auto& [node, symptoms] : by_node) {
      auto batch = makeBatch(node, ++sequence_[node], std::move(symptoms));
      REQUIRE(store_.ingestBatch(batch, batch.header.agent_id).status == IngestResult::Status::kStored);
    }
    JobUpdate u;
    u.job_id = job_id;
    u.state = bundle->job.state;
    u.start_ns = bundle->job.start_ns + shift;
    u.end_ns = bundle->job.end_ns + shift;
    u.nodes = bundle->job.nodes;
    u.ntasks_per_node = bundle->job.ntasks_per_node;
    u.source = "test";
    REQUIRE(store_.recordJob(u, &error));
    for (auto& [source, symptoms] : by_output) {
      JobOutput o;
      o.job_id = job_id;
      o.source = source;
      o.received_ns = end_ns;
      o.coverage = {"", source, "application", 1, 0, "ok", ""};
      o.symptoms = std::move(symptoms);
      REQUIRE(store_.putJobOutput(o, &error));
    }
    return job_id;
  }

 private:
  Store& store_;
  const common::RuleEngine& engine_;
  std::map<std::string, uint64_t> sequence_;
};

json expectedOf(const std::string& sample) {
  return json::parse(readFile(FAULTLINE_SOURCE_DIR "/samples/" + sample + "/expected.json"));
}

}  // namespace

TEST_CASE("dashboard: jobs, a 64-node cascade, fleet and agents pages and --html reports in headless Chromium",
          "[browser]") {
  TempDir dir;
  const std::string db = dir.file("agg.db"), cli = FAULTLINE_CLI_BIN;
  auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  common::RuleEngine engine(loaded.rules);
  SystemClock clock;
  const int64_t now = clock.nowNs(), day = 86400 * kSec;

  // Failed jobs from samples whose verdict needs nothing but the logs, ending over the last days;
  // gpu-z02 loses a GPU in three of them (the repeat offender).
  struct Seed {
    std::string sample, job_id;
    int64_t end_ns;
  };
  const std::vector<Seed> seeds = {
      {"cascade64-xid79", "7731842", now - 2 * 3600 * kSec}, {"ambiguous-dbe-nfs", "4880412", now - 1 * day},
      {"cuda-oom", "4920777", now - 1 * day - 3600 * kSec},  {"lustre-error", "5150719", now - 2 * day},
      {"ib-link-flap", "4860204", now - 3 * day},             {"xid94-mig-contained", "5160094", now - 4 * day},
      {"xid94-mig-contained", "5160095", now - 3 * day - 7200 * kSec},
      {"xid94-mig-contained", "5160096", now - 5 * day}};
  {
    // The seeding store reads a manual clock: the silent agent's heartbeat is written an hour ago.
    ManualClock seed_clock(now - 3600 * kSec);
    std::string error;
    auto store = Store::open(db, seed_clock, {}, &error);
    REQUIRE(store);
    Seeder seeder(*store, engine);
    for (const auto& s : seeds) seeder.add(s.sample, s.job_id, s.end_ns);
    // A job whose only evidence line carries markup: it must stay text.
    auto hostile = makeSymptom("gpu-x01", "python.exception", now - 600 * kSec, common::SubDomain::kApplication);
    hostile.evidence = {"ValueError: <script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"};
    hostile.summary = "<b>bold</b> <script>window.__pwned=3</script>";
    // ... and whose agent shipped an error line no rule matched, with markup (issue 30: the live
    // verdict lists it under "Unrecognized error lines").
    auto hostile_batch = makeBatch("gpu-x01", 1, {hostile});
    hostile_batch.unmatched = {{"loader: cannot open <iframe src=<PATH>>", 2, "loader: cannot open <iframe src=/x>",
                                now - 400 * kSec, true, common::SourceKind::kJournal}};
    REQUIRE(store->ingestBatch(hostile_batch, "agent-gpu-x01").status == IngestResult::Status::kStored);
    JobUpdate u;
    u.job_id = "666";
    u.state = "FAILED";
    u.start_ns = now - 1800 * kSec;
    u.end_ns = now - 300 * kSec;
    u.nodes = {"gpu-x01"};
    REQUIRE(store->recordJob(u, &error));
    // Agents: one node silent for an hour, two heard from just now.
    for (auto [node, at] : std::vector<std::pair<std::string, int64_t>>{
             {"gpu-d04", now - 3600 * kSec}, {"gpu-z02", now}, {"gpu-b17", now}}) {
      seed_clock.advance(at - seed_clock.nowNs());
      HeartbeatInfo hb;
      hb.agent_id = "agent-" + node;
      hb.hostname = node;
      hb.boot_id = "boot-1";
      hb.agent_version = "test";
      hb.ruleset_version = loaded.rules->version;
      hb.created_ns = at;
      hb.started_ns = at - day;
      REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &error));
    }
  }

  std::ofstream(dir.file("token")) << "t0ken\n";
  Child agg;
  agg.pid = fork();
  REQUIRE(agg.pid >= 0);
  if (agg.pid == 0) {
    std::string port_file = dir.file("port"), token = dir.file("token");
    execl(FAULTLINE_AGGREGATOR_BIN, "faultline-aggregator", "--db", db.c_str(), "--port", "0", "--port-file",
          port_file.c_str(), "--token-file", token.c_str(), "--rules", FAULTLINE_SOURCE_DIR "/rules", "--tick",
          "0.05", nullptr);
    _exit(127);
  }
  REQUIRE(waitFor([&] { return !readFile(dir.file("port")).empty(); }));
  const std::string url = "http://127.0.0.1:" + std::to_string(std::stoi(readFile(dir.file("port"))));
  auto verdict = [&](const std::string& id) {
    auto out = runCommand(cli + " --server " + url + " job " + id + " --json 2>/dev/null", 64 << 20);
    return out.status == 0 ? json::parse(out.out, nullptr, false) : json();
  };
  for (const auto& s : seeds) REQUIRE(waitFor([&] { return verdict(s.job_id).is_object(); }, std::chrono::seconds(60)));
  REQUIRE(waitFor([&] { return verdict("666").is_object(); }, std::chrono::seconds(60)));

  // The plan: what the logs say (expected.json, written by reading them), checked against the
  // stored verdicts first, then against what the pages show.
  json plan;
  plan["base"] = url;
  plan["screenshots"] = std::string(FAULTLINE_BINARY_DIR) + "/browser-screenshots";
  plan["failed_jobs"] = json::array();
  std::map<std::string, int> per_domain;
  std::map<std::string, std::set<std::string>> jobs_of_node;
  for (const auto& s : seeds) {
    auto e = expectedOf(s.sample);
    auto v = verdict(s.job_id);
    INFO(s.sample << ": " << v.dump().substr(0, 400));
    CHECK(v["sub_domain"] == e["sub_domain"]);
    json nodes = json::array();
    for (const auto& n : e["responsible_nodes"]) {
      nodes.push_back(n);
      jobs_of_node[n.get<std::string>()].insert(s.job_id);
    }
    plan["failed_jobs"].push_back({{"id", s.job_id}, {"sub_domain", e["sub_domain"]}, {"nodes", nodes}});
    per_domain[e["sub_domain"].get<std::string>()]++;
  }
  plan["failed_jobs"].push_back({{"id", "666"}, {"sub_domain", "application"}, {"nodes", {"gpu-x01"}}});
  per_domain["application"]++;
  plan["filter"] = {{"sub_domain", "hardware"}, {"count", per_domain["hardware"]}};
  plan["node_filter"] = {{"node", "gpu-z02"}, {"ids", jobs_of_node["gpu-z02"]}};
  plan["cascade"] = {{"id", "7731842"}, {"root_node", "gpu-b17"}, {"root_rule", "xid.79"},
                     {"cascade_rule", "nccl.remote_error"}};
  plan["fleet_top"] = "gpu-z02";
  plan["agents"] = {{"live", {"gpu-z02", "gpu-b17"}}, {"stale", {"gpu-d04"}}};
  plan["hostile_job"] = "666";
  plan["hostile_unrecognized"] = verdict("666")["unrecognized"].size();
  CHECK(plan["hostile_unrecognized"] == 1);
  plan["html"] = json::array();
  for (std::string sample : {"cascade64-xid79", "cuda-oom"}) {
    std::string file = dir.file(sample + ".html");
    auto out = runCommand(cli + " attribute " FAULTLINE_SOURCE_DIR "/samples/" + sample + " --html " + file + " 2>&1",
                          1 << 20);
    INFO(out.out);
    REQUIRE(out.status == 0);
    auto e = expectedOf(sample);
    // How many unrecognized error lines the report must list (issue 30), from the same diagnosis.
    auto js = runCommand(cli + " attribute --json " FAULTLINE_SOURCE_DIR "/samples/" + sample, 8 << 20);
    REQUIRE(js.status == 0);
    const size_t unrecognized = json::parse(js.out)["unrecognized"].size();
    plan["html"].push_back({{"file", file}, {"sub_domain", e["sub_domain"]}, {"cause", e["cause_rule"]},
                            {"unrecognized", unrecognized}});
  }
  std::ofstream(dir.file("plan.json")) << plan.dump(2);

  auto run = runCommand("node " FAULTLINE_SOURCE_DIR "/tests/browser/dashboard.mjs " + dir.file("plan.json") + " 2>&1",
                        4 << 20);
  INFO(run.out);
  CHECK(run.status == 0);
  CHECK_THAT(run.out, Catch::Contains("checks passed"));
}

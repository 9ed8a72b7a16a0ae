#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "aggregator/jobs/job_events.h"
#include "aggregator/jobs/sacct_poller.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

// Real `sacct --json` output (Slurm 23.11) with a second, still running job and a pending one.
std::string threeJobs() {
  json j = json::parse(readFile(FAULTLINE_SOURCE_DIR "/samples/host-oom/sacct.json"));
  json running = j["jobs"][0];
  running["job_id"] = 4910050;
  running["state"]["current"] = {"RUNNING"};
  running["nodes"] = "gpu-h[01-02]";
  running["time"]["end"] = json{{"set", true}, {"infinite", false}, {"number", 0}};
  json pending = running;
  pending["job_id"] = 4910051;
  pending["state"]["current"] = {"PENDING"};
  pending["nodes"] = "None assigned";
  j["jobs"].push_back(running);
  j["jobs"].push_back(pending);
  return j.dump(2);
}

}  // namespace

TEST_CASE("jobs: start/end bodies of the HTTP write endpoint", "[jobs]") {
  std::string error;
  auto start = jobUpdateFromJson(json{{"nodes", "gpu-[01-04]"}, {"time", "2024-06-01T10:00:00Z"}}, "7",
                                 JobEventKind::kStart, kT0 + 5, &error);
  REQUIRE(start);
  CHECK(start->state == "RUNNING");
  CHECK(start->start_ns == kT0);
  CHECK(start->nodelist == "gpu-[01-04]");
  auto end = jobUpdateFromJson(json{{"exit_code", "1:0"}}, "7", JobEventKind::kEnd, kT0 + 5, &error);
  REQUIRE(end);
  CHECK(end->state == "FAILED");
  CHECK(end->end_ns == kT0 + 5);
  CHECK(jobUpdateFromJson(json{{"exit_code", "0:0"}}, "7", JobEventKind::kEnd, kT0, &error)->state == "COMPLETED");
  CHECK(jobUpdateFromJson(json{{"time", 1717236000}}, "7", JobEventKind::kEnd, kT0 + 5, &error)->end_ns == kT0);
  CHECK_FALSE(jobUpdateFromJson(json{{"time", "yesterday"}}, "7", JobEventKind::kEnd, 0, &error));
  CHECK_FALSE(jobUpdateFromJson(json{{"state", "failed; rm"}}, "7", JobEventKind::kEnd, 0, &error));
  CHECK_FALSE(jobUpdateFromJson(json::array(), "7", JobEventKind::kEnd, 0, &error));
}

TEST_CASE("jobs: job events refuse nonsense with the reason", "[jobs]") {
  const int64_t now = kT0 + 5;
  auto refused = [&](const json& body, JobEventKind kind, const std::string& says) {
    std::string error;
    auto u = jobUpdateFromJson(body, "7", kind, now, &error);
    INFO(body.dump() << " -> " << error);
    CHECK_FALSE(u);
    CHECK(error.find(says) != std::string::npos);
  };
  const auto end = JobEventKind::kEnd, start = JobEventKind::kStart;
  // The bundle format's key names: "nodelist" is an accepted alias, "exitcode" is not a key.
  refused(json{{"nodelist", "gpu-[01-02]"}, {"exitcode", "1:0"}}, end, "unknown key 'exitcode'");
  std::string error;
  auto alias = jobUpdateFromJson(json{{"nodelist", "gpu-[01-02]"}, {"exit_code", "1:0"}}, "7", end, now, &error);
  REQUIRE(alias);
  CHECK(alias->nodelist == "gpu-[01-02]");
  CHECK(alias->state == "FAILED");
  refused(json{{"nodes", 5}}, end, "host list");
  refused(json{{"nodes", {"gpu-01", 5}}}, end, "host list");
  refused(json{{"exit_code", "banana"}}, end, "EXIT[:SIGNAL]");
  refused(json{{"state", "EXPLODED"}}, end, "not a Slurm job state");
  refused(json{{"state", "CANCELLED by me"}}, end, "not a Slurm job state");
  refused(json{{"nodes", "gpu-01"}, {"time", "2030-01-01T00:00:00Z"}}, start, "in the future");
  refused(json{{"time", 12.5}}, end, "before 2000");
  refused(json{{"time", -1}}, end, "bad time");
  refused(json::object(), start, "names the job's nodes");
  refused(json{{"start_time", "2024-06-01T11:00:00Z"}, {"time", "2024-06-01T10:00:00Z"}}, end, "after the end");
  refused(json{{"time_limit", 60}}, end, "time_limit");
  // What Slurm itself says passes.
  CHECK(jobUpdateFromJson(json{{"state", "CANCELLED by 1000"}}, "7", end, now, &error));
  CHECK(jobUpdateFromJson(json{{"state", "OUT_OF_MEMORY"}, {"exit_code", "0:125"}}, "7", end, now, &error));
  CHECK(jobUpdateFromJson(json{{"nodes", {"gpu-01", "gpu-02"}}}, "7", start, now, &error));
}

TEST_CASE("jobs: every job of real sacct --json output", "[jobs]") {
  std::vector<std::string> errors;
  auto jobs = jobUpdatesFromSacct(threeJobs(), &errors);
  CHECK(errors.empty());
  REQUIRE(jobs.size() == 3);
  CHECK(jobs[0].job_id == "4910033");
  CHECK(jobs[0].state == "OUT_OF_MEMORY");
  CHECK(jobs[0].nodes == std::vector<std::string>{"gpu-g03", "gpu-g04"});
  CHECK(jobs[0].end_ns > jobs[0].start_ns);
  CHECK(jobs[1].state == "RUNNING");
  CHECK(jobs[1].end_ns == 0);
  CHECK(jobs[2].nodes.empty());
  CHECK(jobUpdatesFromSacct("{not json", &errors).empty());
  CHECK_FALSE(errors.empty());
}

TEST_CASE("jobs: sacct poll through a fake sacct command, and import", "[jobs]") {
  TempDir dir;
  ManualClock clock(kT0);
  std::string error;
  auto store = Store::open(testing::storeTarget(dir.file("j.db")), clock, {}, &error);
  REQUIRE(store);
  {
    std::ofstream(dir.file("out.json")) << threeJobs();
    std::ofstream script(dir.file("sacct"));
    script << "#!/bin/sh\n# fake sacct: checks it was asked for JSON, prints a capture\n"
              "case \"$*\" in *--json*) ;; *) echo 'want --json' >&2; exit 2;; esac\n"
              "cat '" << dir.file("out.json") << "'\n";
  }
  std::filesystem::permissions(dir.file("sacct"), std::filesystem::perms::owner_all);

  SacctPoller poller({dir.file("sacct") + " --json --allusers", 1 << 20});
  auto r = poller.pollOnce(*store);
  CHECK(r.ok);
  CHECK(r.errors.empty());
  CHECK(r.jobs == 3);
  auto oom = store->job("4910033");
  REQUIRE(oom);
  CHECK(oom->terminal_state == "out_of_memory");
  CHECK(oom->source == "sacct");
  CHECK(store->job("4910050")->terminal_state.empty());
  CHECK(store->jobsAwaitingVerdict().size() == 1);
  // Polling again changes nothing but the update stamp.
  CHECK(poller.pollOnce(*store).jobs == 3);
  CHECK(store->counts().jobs == 3);

  SacctPoller broken({dir.file("sacct") + " --no-json", 1 << 20});
  auto bad = broken.pollOnce(*store);
  CHECK_FALSE(bad.ok);
  REQUIRE(bad.errors.size() == 1);
  CHECK_THAT(bad.errors[0], Catch::Contains("status 2"));

  std::vector<std::string> errors;
  CHECK(importSacct(*store, readFile(FAULTLINE_SOURCE_DIR "/samples/timeout-healthy/sacct.json"), "import", &errors) == 1);
  CHECK(errors.empty());
}

TEST_CASE("jobs: job output bodies are validated as hostile input", "[jobs]") {
  std::string error;
  json sym{{"rule_id", "python.exception"}, {"symptom", "python_exception"}, {"sub_domain", "application"},
           {"role", "root"}, {"severity", "error"}, {"node", ""}, {"source", "/home/u/slurm-7.out"},
           {"source_kind", "application"}, {"first_ns", 0}, {"last_ns", 0}, {"time_known", false}, {"count", 1},
           {"evidence", {"KeyError: 'input_ids'"}}, {"fields", {{"rank", "5"}}}};
  json body{{"source", "/home/u/slurm-7.out"},
            {"coverage", {{"format", "application"}, {"records", 67}, {"skipped", 0}, {"status", "ok"}}},
            {"symptoms", {sym}}};
  auto out = jobOutputFromJson(body, "7", kT0, &error);
  INFO(error);
  REQUIRE(out);
  CHECK(out->job_id == "7");
  CHECK(out->received_ns == kT0);
  CHECK(out->coverage.source == "/home/u/slurm-7.out");
  CHECK(out->coverage.records == 67);
  REQUIRE(out->symptoms.size() == 1);
  CHECK(out->symptoms[0].field("rank") == "5");
  CHECK(out->symptoms[0].sub_domain == common::SubDomain::kApplication);

  // Each of these is refused with a reason, never stored half.
  auto refused = [&](json b) {
    std::string why;
    bool bad = !jobOutputFromJson(b, "7", kT0, &why);
    INFO(b.dump().substr(0, 200) << " -> " << why);
    CHECK(bad);
    CHECK_FALSE(why.empty());
  };
  refused(json::array());
  refused(json{{"symptoms", json::array()}});                              // no source
  refused(json{{"source", ""}, {"symptoms", json::array()}});              // empty source
  refused(json{{"source", std::string(5000, 'p')}, {"symptoms", json::array()}});
  refused(json{{"source", std::string("a\0b", 3)}, {"symptoms", json::array()}});
  refused(json{{"source", "f"}});                                          // no symptoms
  refused(json{{"source", "f"}, {"symptoms", json::object()}});
  refused(json{{"source", "f"}, {"coverage", {{"status", "fine"}}}, {"symptoms", json::array()}});
  refused(json{{"source", "f"}, {"coverage", {{"records", -1}}}, {"symptoms", json::array()}});
  auto with = [&](const char* key, json value) {
    json b = body;
    b["symptoms"][0][key] = std::move(value);
    return b;
  };
  refused(with("rule_id", ""));
  refused(with("rule_id", 7));
  refused(with("sub_domain", "plumbing"));
  refused(with("role", "victim"));
  refused(with("severity", "meh"));
  refused(with("source_kind", "tape"));
  refused(with("first_ns", -5));
  refused(with("first_ns", 10));  // after last_ns
  refused(with("count", 0));
  refused(with("count", 1ull << 40));
  refused(with("time_known", "yes"));
  refused(with("evidence", {"a", "b", "c", "d"}));
  refused(with("evidence", {1}));
  refused(with("fields", {{"rank", 5}}));
  refused(with("node", std::string(300, 'n')));
  refused(with("summary", std::string(70 << 10, 's')));
  refused(with("summary", std::string("x\0y", 3)));
  refused(with("fields", {{"a", {{"b", {{"c", "deep"}}}}}}));
  {
    json b = body;
    b["symptoms"].push_back("not an object");
    refused(b);
  }
  {
    json b = body;
    b["symptoms"] = json::array();
    for (size_t i = 0; i <= kMaxJobOutputSymptoms; ++i) b["symptoms"].push_back(json{{"rule_id", "r"}});
    refused(b);
  }
  // A start/end event may carry the layout that places ranks on nodes.
  auto end = jobUpdateFromJson(json{{"ntasks_per_node", 4}}, "7", JobEventKind::kEnd, kT0, &error);
  REQUIRE(end);
  CHECK(end->ntasks_per_node == 4);
  CHECK_FALSE(jobUpdateFromJson(json{{"ntasks_per_node", "4"}}, "7", JobEventKind::kEnd, kT0, &error));
  CHECK_FALSE(jobUpdateFromJson(json{{"ntasks_per_node", -1}}, "7", JobEventKind::kEnd, kT0, &error));
}

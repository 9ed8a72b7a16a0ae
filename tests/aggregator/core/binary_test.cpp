// End to end through the shipped binaries: faultline-aggregator as a child process on an
// ephemeral port, the Slurm prolog/epilog scripts calling the real `faultline` CLI, a fake sacct,
// and the query CLI over both --server and --db.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <fstream>

#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/store/store.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

CommandOutput run(const std::string& cmd) { return runCommand(cmd + " 2>/dev/null", 64 << 20); }

}  // namespace

TEST_CASE("binaries: prolog/epilog -> aggregator -> verdict, sacct poll, query CLI", "[binary]") {
  TempDir dir;
  const std::string db = dir.file("agg.db"), cli = FAULTLINE_CLI_BIN;
  std::ofstream(dir.file("token")) << "t0ken\n";
  std::ofstream(dir.file("sacct.json")) << readFile(FAULTLINE_SOURCE_DIR "/samples/host-oom/sacct.json");
  std::ofstream(dir.file("sacct")) << "#!/bin/sh\ncat '" << dir.file("sacct.json") << "'\n";
  std::filesystem::permissions(dir.file("sacct"), std::filesystem::perms::owner_all);

  // Evidence already stored by an agent of gpu-01: a GPU that fell off the bus a minute ago.
  SystemClock clock;
  const int64_t now = clock.nowNs();
  {
    std::string error;
    auto store = Store::open(db, clock, {}, &error);
    REQUIRE(store);
    auto s = makeSymptom("gpu-01", "gpu.xid.79", now - 60 * kSec, common::SubDomain::kHardware, common::Role::kRoot,
                         "0000:3b:00.0");
    REQUIRE(store->ingestBatch(makeBatch("gpu-01", 1, {s}), "agent-gpu-01").status == IngestResult::Status::kStored);
  }

  Child agg;
  agg.pid = fork();
  REQUIRE(agg.pid >= 0);
  if (agg.pid == 0) {
    std::string port_file = dir.file("port"), token = dir.file("token"), sacct = dir.file("sacct");
    execl(FAULTLINE_AGGREGATOR_BIN, "faultline-aggregator", "--db", db.c_str(), "--port", "0", "--port-file",
          port_file.c_str(), "--token-file", token.c_str(), "--rules", FAULTLINE_SOURCE_DIR "/rules",
          "--sacct-command", sacct.c_str(), "--sacct-interval", "0.2", "--tick", "0.05", nullptr);
    _exit(127);
  }
  REQUIRE(waitFor([&] { return !readFile(dir.file("port")).empty(); }));
  const std::string url = "http://127.0.0.1:" + std::to_string(std::stoi(readFile(dir.file("port"))));
  const std::string server = cli + " --server " + url;

  // The Slurm scripts, as slurmctld would run them.
  std::string env = "SLURM_JOB_ID=900 SLURM_JOB_NODELIST='gpu-[01-02]' FAULTLINE_BIN=" + cli +
                    " FAULTLINE_SERVER=" + url + " FAULTLINE_TOKEN_FILE=" + dir.file("token");
  auto prolog = run("env " + env + " SLURM_JOB_START_TIME=" + std::to_string((now - 300 * kSec) / kSec) + " " +
                    FAULTLINE_SOURCE_DIR "/aggregator/slurm/prolog.sh");
  CHECK(prolog.status == 0);
  auto epilog = run("env " + env + " SLURM_JOB_EXIT_CODE2=1:0 " FAULTLINE_SOURCE_DIR "/aggregator/slurm/epilog.sh");
  CHECK(epilog.status == 0);

  // The epilog's end event made the verdict at once: no waiting.
  auto job = run(server + " job 900 --json");
  REQUIRE(job.status == 0);
  auto d = json::parse(job.out);
  CHECK(d["terminal_state"] == "fail");
  CHECK(d["sub_domain"] == "hardware");
  CHECK(d["responsible_nodes"][0]["node"] == "gpu-01");
  CHECK(d["verdict"]["revision"] == 1);
  auto report = run(server + " job 900");
  CHECK(report.status == 0);
  CHECK_THAT(report.out, Catch::Contains("job 900: fail / hardware"));
  CHECK_THAT(report.out, Catch::Contains("verdict: revision 1, provisional"));

  // A job whose only evidence is its output file on the shared filesystem: the epilog sends the
  // end, then the output's symptoms (paths from SLURM_JOB_STDOUT, the layout from scontrol).
  std::filesystem::copy_file(FAULTLINE_SOURCE_DIR "/samples/app-keyerror-rank5/slurm-4812345.out",
                             dir.file("slurm-903.out"));
  std::ofstream(dir.file("scontrol")) << "#!/bin/sh\necho 'JobId=903 JobName=train UserId=u(1000) JobState=FAILED "
                                         "NumNodes=2 NumCPUs=64 NumTasks=8 StdErr=" << dir.file("slurm-903.out")
                                      << " StdOut=" << dir.file("slurm-%j.out") << "'\n";
  std::filesystem::permissions(dir.file("scontrol"), std::filesystem::perms::owner_all);
  auto epilog903 = run("env SLURM_JOB_ID=903 SLURM_JOB_NODELIST='gpu-a[01-02]' FAULTLINE_BIN=" + cli +
                       " FAULTLINE_SERVER=" + url + " FAULTLINE_TOKEN_FILE=" + dir.file("token") +
                       " FAULTLINE_SCONTROL=" + dir.file("scontrol") + " SLURM_JOB_EXIT_CODE2=1:0 " +
                       FAULTLINE_SOURCE_DIR "/aggregator/slurm/epilog.sh");
  CHECK(epilog903.status == 0);
  auto d903 = json::parse(run(server + " job 903 --json").out, nullptr, false);
  REQUIRE(d903.is_object());
  CHECK(d903["sub_domain"] == "application");
  CHECK(d903["cause"]["rule_id"] == "python.exception");
  CHECK(d903["responsible_nodes"][0]["node"] == "gpu-a02");  // rank 5 with 4 tasks per node
  CHECK(d903["verdict"]["revision"] == 2);
  CHECK(d903["verdict"]["reason"] == "job_output");
  auto history = run(server + " job 903 --history");
  CHECK_THAT(history.out, Catch::Contains("job_output"));
  // The CLI on its own: a missing file is a usage error; a retried upload changes nothing.
  CHECK(run(server + " --token-file " + dir.file("token") + " job output 903 " + dir.file("nope.out")).status == 2);
  auto retried = run(server + " --token-file " + dir.file("token") + " job output 903 " + dir.file("slurm-903.out") +
                     " --json");
  CHECK(retried.status == 0);
  CHECK(json::parse(retried.out, nullptr, false)[0]["verdict"]["revision"] == 2);

  // The sacct poll brings in job 4910033 (OUT_OF_MEMORY); the engine's tick judges it.
  REQUIRE(waitFor([&] { return run(cli + " --db " + db + " job 4910033 --json").status == 0; }));
  auto jobs = json::parse(run(cli + " --db " + db + " jobs --json --state failed").out);
  CHECK(jobs.size() == 3);
  auto via_server = json::parse(run(server + " jobs --json --state failed").out);
  CHECK(via_server == jobs);  // both mechanisms answer the same documents

  auto table = run(server + " jobs --node gpu-02");
  CHECK(table.status == 0);
  CHECK_THAT(table.out, Catch::Contains("900"));
  CHECK_THAT(run(server + " nodes --rank --since 7d").out, Catch::Contains("gpu-01"));
  CHECK_THAT(run(server + " node gpu-01").out, Catch::Contains("rank 1 of 2"));  // gpu-a02 (job 903) is the other
  CHECK_THAT(run(server + " symptoms --node gpu-01 --rule 'gpu.*'").out, Catch::Contains("gpu.xid.79"));
  CHECK(run(server + " agents --json").status == 0);
  CHECK(run(server + " nodes").status == 0);

  // Meaningful exit codes.
  CHECK(run(server + " job 123456").status == 1);
  CHECK(run(server + " jobs --since yesterday").status == 2);
  CHECK(run(server + " --token nope job end 901").status == 2);
  CHECK(run(cli + " --server http://127.0.0.1:1 --timeout 2 jobs").status == 3);
  CHECK(run(cli + " --db " + dir.file("missing/x.db") + " jobs").status == 3);

  // A direct --db job event and a sacct import are judged by the running aggregator.
  CHECK(run(cli + " --db " + db + " job end 902 --nodes gpu-02 --exit-code 0:9").status == 0);
  REQUIRE(waitFor([&] { return run(cli + " --db " + db + " job 902 --json").status == 0; }));
  CHECK(run(server + " --token-file " + dir.file("token") + " job import " FAULTLINE_SOURCE_DIR
                     "/samples/timeout-healthy/sacct.json")
            .status == 0);

  auto metrics = run("curl -s " + url + "/metrics");
  if (metrics.status == 0) CHECK_THAT(metrics.out, Catch::Contains("faultline_verdicts_total"));

  kill(agg.pid, SIGTERM);
  int status = 0;
  REQUIRE(waitpid(agg.pid, &status, 0) == agg.pid);
  agg.pid = -1;
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("binaries: the systemd unit verifies against the built binary", "[binary][systemd]") {
  if (runCommand("command -v systemd-analyze", 4096).status != 0) {
    WARN("systemd-analyze not installed; skipped");
    return;
  }
  TempDir dir;
  std::string unit = readFile(FAULTLINE_SOURCE_DIR "/systemd/faultline-aggregator.service");
  const std::string from = "/usr/bin/faultline-aggregator";
  auto pos = unit.find(from);
  REQUIRE(pos != std::string::npos);
  unit.replace(pos, from.size(), FAULTLINE_AGGREGATOR_BIN);
  std::ofstream(dir.file("faultline-aggregator.service")) << unit;
  for (const char* key : {"Type=notify", "WatchdogSec=", "StateDirectory=faultline", "NoNewPrivileges=yes"})
    CHECK_THAT(unit, Catch::Contains(key));
  // Unknown keys are only warnings: fail on any output at all.
  auto r = runCommand("systemd-analyze verify " + dir.file("faultline-aggregator.service") + " 2>&1", 1 << 20);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.empty());
}

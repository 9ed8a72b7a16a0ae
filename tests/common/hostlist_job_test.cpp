#include <catch2/catch.hpp>

#include "common/hostlist.h"
#include "common/job.h"

using namespace faultline::common;
using V = std::vector<std::string>;

TEST_CASE("Slurm host lists expand like Slurm does", "[hostlist]") {
  CHECK(*expandHostlist("gpu-a[01-03,20]") == V{"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a20"});
  CHECK(*expandHostlist("n[1-3]-ib") == V{"n1-ib", "n2-ib", "n3-ib"});
  CHECK(*expandHostlist("gb-r129-[01-02]") == V{"gb-r129-01", "gb-r129-02"});
  CHECK(*expandHostlist("r[1-2]-n[08-09]") == V{"r1-n08", "r1-n09", "r2-n08", "r2-n09"});
  CHECK(*expandHostlist("a1,b[2-3],c") == V{"a1", "b2", "b3", "c"});
  CHECK(*expandHostlist("x[098-101]") == V{"x098", "x099", "x100", "x101"});
  CHECK(expandHostlist("")->empty());
  std::string err;
  CHECK(!expandHostlist("gpu-a[01-", &err));
  CHECK(err.find("unbalanced") != std::string::npos);
  CHECK(!expandHostlist("gpu[5-1]", &err));
  CHECK(!expandHostlist("gpu[1-99999999]", &err));
  CHECK(!expandHostlist("gpu[a-b]", &err));
}

TEST_CASE("timestamps, offsets and durations", "[job]") {
  CHECK(*parseTimestampNs("1970-01-01T00:00:01Z") == 1000000000);
  CHECK(*parseTimestampNs("2024-06-01T10:00:00+02:00") == *parseTimestampNs("2024-06-01T08:00:00Z"));
  CHECK(*parseTimestampNs("2024-06-01 08:00:00.5") == *parseTimestampNs("2024-06-01T08:00:00Z") + 500000000);
  CHECK(*parseTimestampNs("1717236000") == 1717236000LL * 1000000000);
  CHECK(!parseTimestampNs("yesterday"));
  CHECK(!parseTimestampNs("2024-13-01T00:00:00Z"));
  CHECK(*parseUtcOffset("-0500") == -5 * 3600);
  CHECK(*parseSlurmDuration("2-00:00:00") == 2 * 86400);
  CHECK(*parseSlurmDuration("120") == 7200);
  CHECK(*parseSlurmDuration("01:30:00") == 5400);
  CHECK(*parseSlurmDuration("UNLIMITED") == 0);
  CHECK(formatTimeNs(*parseTimestampNs("2024-06-01T08:00:00.123Z")) == "2024-06-01T08:00:00.123Z");
}

TEST_CASE("job.json and sacct --json give the same job", "[job]") {
  std::string err;
  auto job = parseJobJson(R"({"job_id": 77, "state": "CANCELLED by 1000", "exit_code": "0:15",
      "start_time": "2024-06-01T10:00:00Z", "end_time": "2024-06-01T11:00:00Z",
      "nodelist": "gpu-a[01-02]", "ntasks_per_node": 8, "time_limit": "02:00:00"})", &err);
  REQUIRE(job);
  CHECK(job->job_id == "77");
  CHECK(terminalStateOf(job->state) == "cancelled");
  CHECK(job->nodes == V{"gpu-a01", "gpu-a02"});
  CHECK(job->nodeOfRank(9) == "gpu-a02");
  CHECK(job->nodeOfRank(16).empty());
  CHECK(job->time_limit_sec == 7200);

  auto layout = parseJobJson(R"({"state": "FAILED", "nodes": ["b", "a"], "task_layout": {"a": "0-3", "b": "4,6-7"}})", &err);
  REQUIRE(layout);
  CHECK(layout->nodeOfRank(6) == "b");
  CHECK(layout->nodeOfRank(5).empty());

  CHECK(!parseJobJson("{not json", &err));
  CHECK(!parseJobJson(R"({"job_id": 1})", &err));
  CHECK(err.find("state") != std::string::npos);

  // Slurm 23.x shape: wrapped numbers, state list.
  auto sacct = parseSacctJson(R"({"jobs": [{"job_id": 4812345, "state": {"current": ["TIMEOUT"], "reason": "None"},
      "exit_code": {"status": ["ERROR"], "return_code": {"set": true, "infinite": false, "number": 0},
                    "signal": {"id": {"set": true, "infinite": false, "number": 15}, "name": "TERM"}},
      "nodes": "gpu-a[01-04]", "time": {"start": 1717236000, "end": 1717243200,
      "limit": {"set": true, "infinite": false, "number": 120}}}]})", "", &err);
  REQUIRE(sacct);
  CHECK(sacct->state == "TIMEOUT");
  CHECK(sacct->exit_code == "0:15");
  CHECK(sacct->nodes.size() == 4);
  CHECK(sacct->time_limit_sec == 7200);
  CHECK(sacct->start_ns == 1717236000LL * 1000000000);
  // The main step's task and node counts give the block rank layout.
  auto steps = parseSacctJson(R"({"jobs": [{"job_id": 6, "state": {"current": ["FAILED"]}, "nodes": "g[1-2]",
      "steps": [{"step": {"name": "batch"}, "tasks": {"count": 1}, "nodes": {"count": 1}},
                {"step": {"name": "python"}, "tasks": {"count": 16}, "nodes": {"count": 2}}]}]})", "", &err);
  REQUIRE(steps);
  CHECK(steps->ntasks_per_node == 8);
  CHECK(steps->nodeOfRank(9) == "g2");
  // Slurm 21.08 shape: plain values.
  auto old = parseSacctJson(R"({"jobs": [{"job_id": 5, "state": {"current": "FAILED"},
      "exit_code": {"status": "FAILED", "return_code": 1}, "nodes": "n1", "time": {"start": 1, "end": 2, "limit": 5}}]})",
                            "", &err);
  REQUIRE(old);
  CHECK(old->state == "FAILED");
  CHECK(old->exit_code == "1:0");
}

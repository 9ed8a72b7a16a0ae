// Inputs the fuzz targets (tests/fuzz, docs/testing.md) found in common/, as unit tests: each
// failed (or crashed) before its fix. The inputs are seeds in tests/fuzz/seeds/<target>/.
#include <catch2/catch.hpp>

#include <string>

#include "common/job.h"
#include "common/rule_set.h"

using namespace faultline::common;

TEST_CASE("fuzz: job times whose nanoseconds leave int64 are refused (fuzz_job)", "[fuzz]") {
  CHECK(parseTimestampNs("2261-12-31T23:59:59Z"));
  CHECK_FALSE(parseTimestampNs("6024-06-01T10:00:00Z"));
  CHECK_FALSE(parseTimestampNs("0013-06-01T10:00:00Z"));
  CHECK_FALSE(parseTimestampNs("99999999999"));
  CHECK(*parseTimestampNs("1717236000.5") == 1717236000500000000);
}

TEST_CASE("fuzz: a Slurm time limit past what Slurm can hold is refused, not an overflow (fuzz_job)", "[fuzz]") {
  // The input fuzz_job found (seeds/job/time-limit-overflow): UBSan saw 9223372036854775807 * 60
  // after strtoll clamped a 90-digit minutes field.
  CHECK_FALSE(parseSlurmDuration("2-00:" + std::string(90, '8') + "00:00"));
  CHECK_FALSE(parseSlurmDuration(std::string(30, '9') + "-00:00:00"));
  CHECK_FALSE(parseSlurmDuration("99999999999"));  // 11 digits of minutes
  CHECK_FALSE(parseSlurmDuration("x-01:00:00"));   // days not a number
  CHECK_FALSE(parseSlurmDuration("-01:00:00"));
  CHECK(*parseSlurmDuration("4294967294") == int64_t{4294967294} * 60);  // Slurm's largest, in minutes
  CHECK_FALSE(parseSlurmDuration("4294967295"));
  CHECK(*parseSlurmDuration("365-00:00:00") == 365 * 86400);
  CHECK(*parseSlurmDuration("1-12") == 86400 + 12 * 3600);
  CHECK(*parseSlurmDuration("10:30") == 630);
}

TEST_CASE("fuzz: a job.json 'state' that is not a string is refused with a reason, not thrown (fuzz_job)",
          "[fuzz]") {
  // seeds/job/state-number: nlohmann's value("state", "") threw type_error 302 on a number.
  std::string error;
  CHECK_FALSE(parseJobJson("{\n  \"job_id\": \"910011\",\n  \"state\": 8\n}\n", &error));
  CHECK(error == "job.json: 'state' is not a string");
  error.clear();
  CHECK(parseJobJson(R"({"job_id": "1", "state": "FAILED"})", &error));
  // A sacct step whose name is not a string is a step like any other.
  error.clear();
  CHECK_NOTHROW(parseSacctJson(R"({"jobs": [{"job_id": 7, "state": {"current": ["FAILED"]}, "steps": [)"
                               R"({"step": {"name": 5}, "tasks": {"count": 2}, "nodes": {"list": ["a"]}}]}]})",
                               "7", &error));
}

TEST_CASE("fuzz: a rule file that is not UTF-8 is an error, not an assertion in the engine (fuzz_rules)", "[fuzz]") {
  const std::string file = "rules:\n"
                           "  - id: gpu.fuzz\n"
                           "    since: 0.1.0\n"
                           "    symptom: gpu_fuzz\n"
                           "    sub_domain: hardware\n"
                           "    category: gpu\n"
                           "    role: root\n"
                           "    severity: error\n"
                           "    prefilter: 'fallen \xa4 off'\n"
                           "    pattern: 'fallen'\n";
  auto loaded = loadRuleSet({{"rules/x/fuzz.yaml", file}}, "1.0.0");
  CHECK_FALSE(loaded.rules);
  REQUIRE(loaded.errors.size() == 1);
  CHECK(loaded.errors[0] == "rules/x/fuzz.yaml:9: not UTF-8 text");
}

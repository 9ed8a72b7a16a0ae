#include "aggregator/fleet/fleet.h"

#include <catch2/catch.hpp>

#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

VerdictRow verdict(const std::string& job, const std::string& node, const std::string& device,
                   common::SubDomain sd = common::SubDomain::kHardware, const std::string& rule = "gpu.xid.79") {
  VerdictRow v;
  v.job_id = job;
  v.diagnosis.job_id = job;
  v.diagnosis.sub_domain = sd;
  if (!node.empty()) v.diagnosis.responsible = {{node, device, 0.9}};
  common::Cause c;
  c.rule_id = rule;
  c.node = node;
  c.device = device;
  if (sd == common::SubDomain::kNetwork) c.fields = {{"port", "mlx5_0/1"}, {"peer", "leaf3/17"}};
  v.diagnosis.cause = c;
  return v;
}

JobRow job(const std::string& id, int64_t end) {
  JobRow j;
  j.info.job_id = id;
  j.info.end_ns = end;
  return j;
}

}  // namespace

TEST_CASE("fleet: scattered failures concentrate on a few nodes and devices", "[fleet]") {
  std::vector<VerdictRow> verdicts{
      verdict("1", "gpu-07", "0000:3b:00.0"),
      verdict("2", "gpu-07", "0000:3b:00.0"),
      verdict("3", "gpu-07", "0000:5e:00.0"),
      verdict("4", "gpu-12", "mlx5_0/1", common::SubDomain::kNetwork, "ib.link_down"),
      verdict("5", "gpu-12", "mlx5_0/1", common::SubDomain::kNetwork, "ib.link_down"),
      verdict("6", "gpu-03", ""),
      verdict("7", "", ""),
  };
  verdicts.back().diagnosis.systemic = true;
  std::vector<JobRow> jobs;
  for (int i = 1; i <= 7; ++i) jobs.push_back(job(std::to_string(i), kT0 + i * kSec));
  auto r = rankFleet(verdicts, jobs, kT0, 0);
  CHECK(r.jobs == 7);
  CHECK(r.systemic_jobs == 1);
  REQUIRE(r.nodes.size() == 3);
  CHECK(r.nodes[0].node == "gpu-07");
  CHECK(r.nodes[0].jobs == 3);
  CHECK(r.nodes[0].job_ids == std::vector<std::string>{"1", "2", "3"});
  CHECK(r.nodes[0].first_ns == kT0 + kSec);
  CHECK(r.nodes[0].last_ns == kT0 + 3 * kSec);
  CHECK(r.nodes[1].node == "gpu-12");
  CHECK(r.nodes[1].sub_domains == std::vector<std::string>{"network"});
  REQUIRE(r.devices.size() == 3);
  CHECK(r.devices[0].device == "0000:3b:00.0");
  CHECK(r.devices[0].jobs == 2);
  // The same cause on the same port pair repeats: grouped as a pattern.
  REQUIRE(r.patterns.size() == 2);
  bool ib = false;
  for (const auto& p : r.patterns)
    if (p.rule_id == "ib.link_down") {
      ib = true;
      CHECK(p.detail == "peer=leaf3/17 port=mlx5_0/1");
      CHECK(p.job_ids == std::vector<std::string>{"4", "5"});
    }
  CHECK(ib);
  // A threshold keeps only repeat offenders.
  auto repeat = rankFleet(verdicts, jobs, kT0, 0, 2);
  CHECK(repeat.nodes.size() == 2);
  auto j = toJson(r);
  CHECK(j["nodes"][0]["node"] == "gpu-07");
}

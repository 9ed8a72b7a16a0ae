// dashboard_seed DB JOBS CASCADE_NODES: a store for bench/dashboard.sh. JOBS failed jobs with
// stored verdicts over the last 30 days on a pool of 2,000 nodes (domains, causes and nodes
// drawn with a fixed seed), and one job "cascade" whose verdict is the correlator's on a
// CASCADE_NODES-node cascade (Xid 79 on one node, NCCL errors and watchdog timeouts on all of
// them). Writes through the aggregator's Store, in group commits; prints the cascade's job id.
#include <cstdio>
#include <random>
#include <string>

#include "aggregator/clock.h"
#include "aggregator/store/store.h"
#include "common/correlator.h"
#include "common/rule_set.h"

using namespace faultline;

namespace {

constexpr int64_t kSec = 1'000'000'000;

common::Diagnosis cascadeDiagnosis(const common::JobInfo& job, const common::RuleSet* rules) {
  const char* kinds[][3] = {{"nccl.remote_error", "network", "nccl"},
                            {"nccl.connection_closed", "network", "nccl"},
                            {"nccl.watchdog_timeout", "application", "nccl"},
                            {"c10d.watchdog_terminated", "none", "nccl"},
                            {"torchrun.child_failed", "none", "launcher"}};
  std::vector<common::Symptom> symptoms;
  for (size_t n = 0; n < job.nodes.size(); ++n)
    for (int k = 0; k < 5; ++k) {
      common::Symptom s;
      s.rule_id = s.symptom = kinds[k][0];
      s.sub_domain = *common::parseSubDomain(kinds[k][1]);
      s.category = kinds[k][2];
      s.role = k == 4 ? common::Role::kTeardown : common::Role::kCascade;
      s.fallback_root = k < 3;
      s.node = job.nodes[n];
      s.source_kind = common::SourceKind::kApplication;
      s.time_known = true;
      s.first_ns = s.last_ns = job.end_ns - (600 - 20 * k - static_cast<int64_t>(n % 7)) * kSec;
      s.count = 8;
      s.evidence = {std::string(job.nodes[n]) + ":41872:41990 [3] NCCL WARN " + kinds[k][0]};
      symptoms.push_back(std::move(s));
    }
  common::Symptom root;
  root.rule_id = "xid.79";
  root.symptom = "gpu_fallen_off_bus";
  root.sub_domain = common::SubDomain::kHardware;
  root.category = "gpu";
  root.severity = common::Severity::kCritical;
  root.node = job.nodes[job.nodes.size() / 3];
  root.device = "0000:5d:00.0";
  root.source_kind = common::SourceKind::kKernel;
  root.time_known = true;
  root.first_ns = root.last_ns = job.end_ns - 630 * kSec;
  root.evidence = {"NVRM: Xid (PCI:0000:5d:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."};
  symptoms.push_back(root);
  return common::correlate(job, std::move(symptoms), rules);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DB JOBS CASCADE_NODES [RULES_DIR]\n", argv[0]);
    return 2;
  }
  const std::string db = argv[1];
  const long jobs = std::stol(argv[2]);
  const long cascade_nodes = std::stol(argv[3]);
  auto loaded = common::loadRuleDirs({argc > 4 ? argv[4] : FAULTLINE_SOURCE_DIR "/rules"});
  if (!loaded.rules) return 2;
  aggregator::SystemClock clock;
  std::string error;
  auto store = aggregator::Store::open(db, clock, {}, &error);
  if (!store) {
    std::fprintf(stderr, "dashboard_seed: %s\n", error.c_str());
    return 1;
  }
  const int64_t now = clock.nowNs();
  std::mt19937_64 rng(7);
  const char* causes[][2] = {{"xid.79", "hardware"},          {"xid.48", "hardware"},
                             {"kernel.ib_port_down", "network"}, {"cuda.oom", "application"},
                             {"python.exception", "application"}, {"kernel.lustre_error", "infrastructure"},
                             {"xid.119", "system_software"}};
  for (long i = 0; i < jobs; ++i) {
    if (i % 2000 == 0) store->beginGroup(&error);
    aggregator::JobUpdate u;
    u.job_id = std::to_string(1'000'000 + i);
    u.state = "FAILED";
    u.end_ns = now - static_cast<int64_t>(rng() % (30LL * 86400)) * kSec;
    u.start_ns = u.end_ns - 3600 * kSec;
    for (int n = 0; n < 4; ++n) u.nodes.push_back("gpu-" + std::to_string(rng() % 2000));
    if (!store->recordJob(u, &error)) return 1;
    const auto& c = causes[rng() % 7];
    aggregator::VerdictRow v;
    v.job_id = u.job_id;
    v.created_ns = u.end_ns + 5 * kSec;
    v.status = "final";
    v.reason = "job_end";
    v.diagnosis.job_id = u.job_id;
    v.diagnosis.terminal_state = "fail";
    v.diagnosis.sub_domain = *common::parseSubDomain(c[1]);
    v.diagnosis.responsible.push_back({u.nodes[0], "", 0.9});
    common::Cause cause;
    cause.rule_id = cause.symptom = c[0];
    cause.node = u.nodes[0];
    cause.sub_domain = v.diagnosis.sub_domain;
    v.diagnosis.cause = cause;
    v.diagnosis.explanation = std::string(c[0]) + " on " + u.nodes[0] + " is the earliest root symptom.";
    if (!store->addVerdict(v, &error)) return 1;
    if (i % 2000 == 1999 || i + 1 == jobs) store->endGroup(&error);
  }
  aggregator::JobUpdate u;
  u.job_id = "cascade";
  u.state = "FAILED";
  u.end_ns = now - 3600 * kSec;
  u.start_ns = u.end_ns - 7200 * kSec;
  for (long n = 0; n < cascade_nodes; ++n) u.nodes.push_back("gpu-c" + std::to_string(1000 + n));
  if (!store->recordJob(u, &error)) return 1;
  common::JobInfo info;
  info.job_id = u.job_id;
  info.state = u.state;
  info.start_ns = u.start_ns;
  info.end_ns = u.end_ns;
  info.nodes = u.nodes;
  aggregator::VerdictRow v;
  v.job_id = u.job_id;
  v.created_ns = u.end_ns + 5 * kSec;
  v.status = "final";
  v.reason = "job_end";
  v.diagnosis = cascadeDiagnosis(info, loaded.rules.get());
  if (!store->addVerdict(v, &error)) return 1;
  std::printf("cascade\n");
  return 0;
}

// correlate_bench: the correlator on one fleet-wide cascade, in process (no store, no network).
//
// The symptoms are the cascade sample's (--sample, default samples/cascade64-xid79), produced by
// the real rule engine over its node logs and rank output (cascade_sample.h), spread over
// --nodes hosts the way bench/aggregator_load.cpp does: the middle host replays the sample's
// root node (gpu-b17: Xid 79, fallen off the bus), every other host one of the 63 others (NCCL
// remote errors, watchdog timeouts, IB completion errors, connection closed ...). Each host
// reports --per-node symptoms: its sample node's list taken cyclically, each later pass one
// second later (the next aggregation window of an ongoing cascade). Noise on --noise-every'th
// host: a GPU lost three hours before the job and the reboot after it, a driver load, an old
// soft lockup (outside every window). The options are what the aggregator passes: node facts
// (GPU count, an address) and a node history entry for every node.
//
// Printed, best of --repeat runs, each on a fresh copy of the symptoms:
//   peer       the same symptoms grouped once by (rule, role) with each group's node set, then
//              freed: one plain pass, the floor of any verdict;
//   correlate  faultline::common::correlate() (it owns and frees its symptoms too);
// both are given their own copy, made before the clock starts;
// wall and CPU seconds, symptoms/s, the heap allocations inside correlate() (operator new is
// counted), the ratio correlate/peer, the verdict (RIGHT when it names
// the sample's expected node, rule and domain) and an FNV-1a hash of the whole diagnosis JSON, so
// two builds can be compared on identical output.
//
//   cmake --build build -j2 --target correlate_bench
//   build/bench/correlate_bench --nodes 1024
//   build/bench/correlate_bench --nodes 10000
// Instructions of correlate() alone (callgrind counts only inside it):
//   valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out --toggle-collect='faultline::common::correlate(*'
//     build/bench/correlate_bench --nodes 1024 --repeat 1
//   callgrind_annotate /tmp/cg.out | head -40
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/cascade_sample.h"
#include "common/correlator.h"
#include "common/diagnosis.h"
#include "common/rule_set.h"

// Heap allocations made by the process (operator new), to print those of one correlate() call.
// new and delete are replaced as a pair (malloc/free); GCC cannot tell once they are inlined.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
namespace {
std::atomic<uint64_t> g_allocations{0};
}
void* operator new(size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace {

using namespace faultline;
using namespace faultline::bench;

constexpr int64_t kSec = 1'000'000'000;

std::string hostName(size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "gpu-n%05zu", i);
  return buf;
}

struct Times {
  double wall = 0, cpu = 0;
};

double cpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

template <typename F>
Times measure(F&& f) {
  auto w0 = std::chrono::steady_clock::now();
  double c0 = cpuSeconds();
  f();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count(), cpuSeconds() - c0};
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

// The peer: what any verdict must at least do with the symptoms it is given — look at each
// once, grouping by (rule, role) with the group's nodes (the shape of the verdict's chain), and
// free them.
size_t plainPass(std::vector<common::Symptom> symptoms) {
  std::map<std::pair<std::string, common::Role>, std::set<std::string>> groups;
  for (const auto& s : symptoms) groups[{s.rule_id, s.role}].insert(s.node);
  size_t n = 0;
  for (const auto& [k, nodes] : groups) n += nodes.size();
  return n;
}

common::Symptom noiseSymptom(const std::string& host, const char* rule, const char* symptom, common::SubDomain d,
                             common::Role role, common::Severity sev, const char* category, int64_t t,
                             const std::string& boot) {
  return common::Symptom{.rule_id = rule, .symptom = symptom, .sub_domain = d, .category = category, .role = role,
                         .severity = sev, .node = host, .device = "", .source = "kmsg", .source_kind = common::SourceKind::kKernel,
                         .first_ns = t, .last_ns = t, .time_known = true,
                         .evidence = {std::string("[noise] ") + rule + " on " + host}, .fields = {},
                         .summary = std::string(symptom) + " on " + host, .boot_id = boot};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"correlate() on a synthetic fleet-wide cascade"};
  std::string rules_dir = "rules", sample_dir = "samples/cascade64-xid79";
  size_t nodes = 1024, per_node = 20, noise_every = 50, repeat = 3;
  app.add_option("--rules", rules_dir, "rule directory");
  app.add_option("--sample", sample_dir, "cascade sample bundle");
  app.add_option("--nodes", nodes, "nodes in the job")->check(CLI::Range(2, 100000));
  app.add_option("--per-node", per_node, "symptoms per node (the sample node's list, cyclically)")->check(CLI::Range(1, 1000));
  app.add_option("--noise-every", noise_every, "every Nth node gets pre-job noise (0: none)");
  app.add_option("--repeat", repeat, "runs of each; the best is printed")->check(CLI::Range(1, 100));
  CLI11_PARSE(app, argc, argv);

  std::shared_ptr<const common::RuleSet> rules;
  std::string error;
  auto sample = loadCascadeSampleWithRules(sample_dir, rules_dir, &rules, &error);
  if (!sample) {
    std::fprintf(stderr, "correlate_bench: %s\n", error.c_str());
    return 2;
  }
  if (sample->expected_node.empty() || !sample->by_node.count(sample->expected_node)) {
    std::fprintf(stderr, "correlate_bench: %s: expected.json names no node with symptoms\n", sample_dir.c_str());
    return 2;
  }
  std::vector<std::string> others;
  for (const auto& [h, list] : sample->by_node)
    if (h != sample->expected_node) others.push_back(h);

  const size_t root_index = nodes / 2 + 1;
  common::JobInfo job = sample->job;
  job.nodes.clear();
  job.ranks.clear();
  job.ntasks_per_node = 0;
  std::vector<common::Symptom> symptoms;
  symptoms.reserve(nodes * (per_node + 4));
  common::CorrelatorOptions opts;
  for (size_t i = 1; i <= nodes; ++i) {
    const std::string host = hostName(i);
    job.nodes.push_back(host);
    const std::string& from = i == root_index ? sample->expected_node : others[(i - 1) % others.size()];
    const auto& tmpl = sample->by_node[from];
    const std::string boot = "b00710ad-" + host;
    for (size_t k = 0; k < per_node; ++k) {
      int64_t pass = static_cast<int64_t>(k / tmpl.size());
      symptoms.push_back(moveSymptom(tmpl[k % tmpl.size()], from, host, pass * kSec));
      symptoms.back().boot_id = boot;
    }
    if (noise_every && i % noise_every == 0 && i != root_index) {
      const int64_t t0 = job.start_ns;
      using common::Role, common::SubDomain, common::Severity;
      symptoms.push_back(noiseSymptom(host, "xid.79", "gpu_fallen_off_bus", SubDomain::kHardware, Role::kRoot,
                                      Severity::kCritical, "gpu", t0 - 3 * 3600 * kSec, "old-boot-" + host));
      symptoms.push_back(noiseSymptom(host, "kernel.boot", "node_boot", SubDomain::kNone, Role::kContext,
                                      Severity::kInfo, "boot", t0 - 5400 * kSec, boot));
      symptoms.push_back(noiseSymptom(host, "kernel.nvidia_driver_loaded", "nvidia_driver_loaded", SubDomain::kNone,
                                      Role::kContext, Severity::kInfo, "driver", t0 - 5300 * kSec, boot));
      symptoms.push_back(noiseSymptom(host, "kernel.soft_lockup", "cpu_soft_lockup", SubDomain::kSystemSoftware, Role::kRoot,
                                      Severity::kError, "kernel", t0 - 30 * 86400 * kSec, boot));
    }
    auto& facts = opts.node_facts[host];
    auto inv = sample->inventory.find(from);
    if (inv != sample->inventory.end() && !inv->second.gpus.empty()) facts.gpu_count = static_cast<int>(inv->second.gpus.size());
    facts.addresses = {"10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." + std::to_string(i % 256)};
    auto& h = opts.node_history[host];
    h.window_ns = 7 * 86400 * kSec;
  }
  size_t fields = 0, evidence = 0;
  for (const auto& s : symptoms) {
    fields += s.fields.size();
    evidence += s.evidence.size();
  }
  std::printf("correlate bench: %zu nodes, %zu symptoms (%zu per node from %s, root %s <- %s; noise on every %zu-th "
              "node; %.1f fields, %.1f evidence lines per symptom), ruleset %s, %zu relations\n",
              nodes, symptoms.size(), per_node, sample_dir.c_str(), hostName(root_index).c_str(),
              sample->expected_node.c_str(), noise_every, double(fields) / double(symptoms.size()),
              double(evidence) / double(symptoms.size()), rules->version.c_str(), rules->relations.size());

  Times best_peer{1e30, 1e30}, best_corr{1e30, 1e30};
  size_t peer_out = 0;
  uint64_t allocations = 0;
  common::Diagnosis d;
  for (size_t r = 0; r < repeat; ++r) {
    std::vector<common::Symptom> peer_copy = symptoms;
    Times t = measure([&] { peer_out = plainPass(std::move(peer_copy)); });
    best_peer = {std::min(best_peer.wall, t.wall), std::min(best_peer.cpu, t.cpu)};
    std::vector<common::Symptom> copy = symptoms;  // correlate() takes its symptoms by value
    const uint64_t a0 = g_allocations.load();
    t = measure([&] { d = common::correlate(job, std::move(copy), rules.get(), opts); });
    allocations = g_allocations.load() - a0;
    best_corr = {std::min(best_corr.wall, t.wall), std::min(best_corr.cpu, t.cpu)};
  }
  const double n = double(symptoms.size());
  std::printf("peer       one grouping pass + free:  wall %8.3f s  cpu %8.3f s  %10.0f symptoms/s  (%zu group nodes)\n",
              best_peer.wall, best_peer.cpu, n / best_peer.wall, peer_out);
  std::printf("correlate  correlate():              wall %8.3f s  cpu %8.3f s  %10.0f symptoms/s\n", best_corr.wall,
              best_corr.cpu, n / best_corr.wall);
  std::printf("allocs     %llu heap allocations inside correlate() (%.1f per symptom)\n",
              static_cast<unsigned long long>(allocations), double(allocations) / n);
  std::printf("ratio      correlate / peer: wall x%.2f, cpu x%.2f (best of %zu)\n", best_corr.wall / best_peer.wall,
              best_corr.cpu / std::max(best_peer.cpu, 1e-9), repeat);
  const std::string node = d.responsible.empty() ? "" : d.responsible.front().node;
  const std::string rule = d.cause ? d.cause->rule_id : "";
  const std::string domain(common::subDomainName(d.sub_domain));
  const bool right = node == hostName(root_index) && rule == sample->expected_rule && domain == sample->expected_sub_domain;
  std::printf("verdict    sub_domain %s, responsible %s, cause %s, %zu chain entries (expected %s %s %s): %s\n",
              domain.c_str(), node.c_str(), rule.c_str(), d.chain.size(), hostName(root_index).c_str(),
              sample->expected_sub_domain.c_str(), sample->expected_rule.c_str(), right ? "RIGHT" : "WRONG");
  std::printf("diagnosis  json fnv1a %016llx\n", static_cast<unsigned long long>(fnv1a(common::toJson(d).dump())));
  return right ? 0 : 1;
}

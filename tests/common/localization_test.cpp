// What the evidence localizes and what it decides (issue 27, ../shared/TAXONOMY.md):
// - one-sided evidence names its node only when the job's other nodes were read and are clean;
// - a far end named by one reporter is one end of a path, not a suspect;
// - cascade evidence (rules whose role is cascade and that may not anchor alone) and the rules a
//   wrapper relation names, alone, of every shipped rule and any node count, commit no domain.
// Generated over the shipped rules (rules/) and every combination below, not hand-picked cases.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <set>

#include "common/correlator.h"
#include "common/causality.h"
#include "common/rule_set.h"

using namespace faultline::common;

namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1717236000LL * kSec;

const RuleSet& shipped() {
  static const auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.errors.empty());
  return *loaded.rules;
}

JobInfo failedJob(int nodes) {
  JobInfo j;
  j.job_id = "7";
  j.state = "FAILED";
  j.start_ns = kT0;
  j.end_ns = kT0 + 3600 * kSec;
  for (int i = 1; i <= nodes; ++i) j.nodes.push_back(fmt::format("n{}", i));
  return j;
}

// A symptom as the rule engine makes it from `r`, on `node`, from the node's own logs unless the
// rule reads only rank logs.
Symptom fromRule(const Rule& r, const std::string& node, int64_t t_sec) {
  Symptom s;
  s.rule_id = r.id;
  s.symptom = r.symptom;
  s.category = r.category;
  s.sub_domain = r.sub_domain;
  s.role = r.role;
  s.severity = r.severity;
  s.fallback_root = r.fallback_root;
  s.fields = r.fields;
  s.node = node;
  s.source_kind = r.sources.empty() ? SourceKind::kKernel : r.sources.front();
  s.first_ns = s.last_ns = kT0 + t_sec * kSec;
  s.time_known = true;
  s.count = 1;
  return s;
}

std::vector<std::string> nodesOf(const Diagnosis& d) {
  std::vector<std::string> v;
  for (const auto& r : d.responsible) v.push_back(r.node);
  std::sort(v.begin(), v.end());
  return v;
}

bool concrete(SubDomain d) {
  return d == SubDomain::kHardware || d == SubDomain::kNetwork || d == SubDomain::kSystemSoftware ||
         d == SubDomain::kInfrastructure || d == SubDomain::kApplication;
}

enum class Cover { kAll, kNone, kPartial };

// covered_nodes for a job of `n` nodes whose evidence is on n2: every node / n2 only / n2 and
// half of the others.
std::set<std::string> coverage(Cover c, int n) {
  std::set<std::string> out{"n2"};
  for (int i = 1; i <= n; ++i)
    if (c == Cover::kAll || (c == Cover::kPartial && i % 2 == 0)) out.insert(fmt::format("n{}", i));
  return out;
}

}  // namespace

TEST_CASE("one-sided evidence names its node only when the other nodes were read and are clean",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  // One-sided evidence from shipped rules: cascade lines that may anchor alone (fallback) and
  // roots of the node's own parts.
  for (const char* id : {"nvrm.gsp_timeout_report", "kernel.netif_carrier_lost", "xid.79", "kernel.ib_port_down"}) {
    const Rule* r = rules.find(id);
    REQUIRE(r);
    for (int n : {2, 3, 4, 16}) {
      for (Cover cover : {Cover::kAll, Cover::kNone, Cover::kPartial}) {
        CAPTURE(id, n, static_cast<int>(cover));
        CorrelatorOptions o;
        o.covered_nodes = coverage(cover, n);
        auto d = correlate(failedJob(n), {fromRule(*r, "n2", 10)}, &rules, o);
        const bool all_read = o.covered_nodes->size() == static_cast<size_t>(n);
        if (r->role == Role::kRoot) {
          // A root symptom is the node's own fault: named whatever the other nodes show.
          CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
        } else if (all_read) {
          CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
        } else {
          CHECK(nodesOf(d).empty());
          CHECK(d.explanation.find("had no logs for the window") != std::string::npos);
          CHECK(d.explanation.find("n1") != std::string::npos);  // an unread node is named as such
        }
      }
    }
  }
}

TEST_CASE("a communication library's root in the job's output names its node only when the other nodes were read",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  // NCCL's NVLS set-up failure is printed by every member of the collective, whichever node's
  // Fabric Manager is at fault; Open MPI's port-error event names its own host and stays local.
  const Rule* nvls = rules.find("nccl.nvls_bind_failed");
  const Rule* port = rules.find("ompi.openib_port_error");
  REQUIRE(nvls);
  REQUIRE(port);
  for (int n : {2, 4}) {
    for (Cover cover : {Cover::kAll, Cover::kNone, Cover::kPartial}) {
      CAPTURE(n, static_cast<int>(cover));
      CorrelatorOptions o;
      o.covered_nodes = coverage(cover, n);
      const bool all_read = o.covered_nodes->size() == static_cast<size_t>(n);
      Symptom a = fromRule(*nvls, "n2", 10);
      a.source_kind = SourceKind::kApplication;
      auto d = correlate(failedJob(n), {a}, &rules, o);
      CHECK(d.sub_domain == nvls->sub_domain);
      if (all_read) {
        CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
      } else {
        CHECK(nodesOf(d).empty());
        CHECK(d.explanation.find("had no logs for the window") != std::string::npos);
      }
      // A device named by the report is the node's own part: named whatever the coverage.
      a.device = "0000:18:00.0";
      CHECK(nodesOf(correlate(failedJob(n), {a}, &rules, o)) == std::vector<std::string>{"n2"});
      Symptom p = fromRule(*port, "n2", 10);
      p.source_kind = SourceKind::kApplication;
      p.fields["local_host"] = "n2";
      CHECK(nodesOf(correlate(failedJob(n), {p}, &rules, o)) == std::vector<std::string>{"n2"});
    }
  }
}

TEST_CASE("a fault between nodes or in shared software names no node even in a one-node job, the job's own "
          "application does",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  // mpich.hydra_topology_library_missing: a launcher built without its topology library, as every
  // host runs it (a `between` relation); ompi.rank_sigkill_host_oom: the job's own memory need.
  const Rule* shared = rules.find("mpich.hydra_topology_library_missing");
  const Rule* own = rules.find("ompi.rank_sigkill_host_oom");
  REQUIRE(shared);
  REQUIRE(own);
  for (int n : {1, 3}) {
    CAPTURE(n);
    CorrelatorOptions o;
    o.covered_nodes = coverage(Cover::kAll, n);
    auto d = correlate(failedJob(n), {fromRule(*shared, n == 1 ? "n1" : "n2", 10)}, &rules, o);
    CHECK(d.sub_domain == shared->sub_domain);
    CHECK(nodesOf(d).empty());
  }
  CorrelatorOptions o;
  o.covered_nodes = coverage(Cover::kAll, 1);
  Symptom k = fromRule(*own, "n1", 10);
  auto d = correlate(failedJob(1), {k}, &rules, o);
  CHECK(d.sub_domain == SubDomain::kApplication);
  CHECK(nodesOf(d) == std::vector<std::string>{"n1"});
}

TEST_CASE("a transfer between nodes failing names no node in a job whose other nodes are not known",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  // NCCL's queue-pair set-up failing over IB is a transfer to another node: a job listed with one
  // node that prints it has a far end no log shows. UCX's memlock limit is the node's own setting.
  const Rule* qp = rules.find("nccl.ib_modify_qp_failed");
  const Rule* memlock = rules.find("ucx.memlock_limit");
  REQUIRE(qp);
  REQUIRE(memlock);
  CorrelatorOptions o;
  o.covered_nodes = coverage(Cover::kAll, 1);
  Symptom a = fromRule(*qp, "n1", 10);
  a.source_kind = SourceKind::kApplication;
  auto d = correlate(failedJob(1), {a}, &rules, o);
  CHECK(d.sub_domain == SubDomain::kNetwork);
  CHECK(nodesOf(d).empty());
  CHECK(d.explanation.find("far end is not in them") != std::string::npos);
  Symptom m = fromRule(*memlock, "n1", 10);
  m.source_kind = SourceKind::kApplication;
  CHECK(nodesOf(correlate(failedJob(1), {m}, &rules, o)) == std::vector<std::string>{"n1"});
}

TEST_CASE("wrappers alone name no node: the explanation says where they are when the other nodes were read",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* r = rules.find("nccl.unhandled_cuda_error");  // a wrapper (rules/causality/wrappers.yaml)
  REQUIRE(r);
  Symptom w = fromRule(*r, "n2", 10);
  w.source_kind = SourceKind::kKernel;  // from the node's own logs, not placed by a rank layout
  for (int n : {2, 4}) {
    for (Cover cover : {Cover::kAll, Cover::kNone, Cover::kPartial}) {
      CAPTURE(n, static_cast<int>(cover));
      CorrelatorOptions o;
      o.covered_nodes = coverage(cover, n);
      auto d = correlate(failedJob(n), {w}, &rules, o);
      CHECK(!concrete(d.sub_domain));
      CHECK(nodesOf(d).empty());
      if (o.covered_nodes->size() == static_cast<size_t>(n))
        CHECK(d.explanation.find("all on n2: look there first") != std::string::npos);
      else
        CHECK(d.explanation.find("had no logs for the window") != std::string::npos);
    }
  }
}

TEST_CASE("a far end named by one reporter is one end of a path, named by two it is the suspect",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* r = rules.find("nccl.ib_completion_error");
  REQUIRE(r);
  auto reporting = [&](const std::string& node, const std::string& peer) {
    Symptom s = fromRule(*r, node, 10);
    s.source_kind = SourceKind::kApplication;
    s.fields["nccl_host"] = node;
    s.fields["peer"] = peer + "<4567>";
    return s;
  };
  CorrelatorOptions o;
  for (int i = 1; i <= 4; ++i) o.node_facts[fmt::format("n{}", i)].addresses = {fmt::format("10.0.0.{}", i)};
  for (Cover cover : {Cover::kAll, Cover::kNone}) {
    o.covered_nodes = coverage(cover, 4);
    // n1 -> n3 only: the path between them, whatever the coverage.
    auto d = correlate(failedJob(4), {reporting("n1", "10.0.0.3")}, &rules, o);
    CHECK(d.sub_domain == SubDomain::kNetwork);
    CHECK(nodesOf(d).empty());
    CHECK(d.explanation.find("lies between") != std::string::npos);
    // Two nodes of a two-node job reporting each other: symmetric, no node.
    d = correlate(failedJob(2), {reporting("n1", "10.0.0.2"), reporting("n2", "10.0.0.1")}, &rules, o);
    CHECK(nodesOf(d).empty());
    // n1 and n4 both name n3: the end they share.
    d = correlate(failedJob(4), {reporting("n1", "10.0.0.3"), reporting("n4", "10.0.0.3")}, &rules, o);
    CHECK(nodesOf(d) == std::vector<std::string>{"n3"});
  }
}

TEST_CASE("cascade and wrapper evidence alone commits no domain, for every shipped rule and node count",
          "[correlator][cascade_only]") {
  const RuleSet& rules = shipped();
  // The rules a wrapper relation names, whatever their own role.
  std::set<std::string> wrappers;
  for (const auto& rel : rules.relations)
    if (rel.effect == RelationEffect::kWrapper) wrappers.insert(rel.symptom.rules.begin(), rel.symptom.rules.end());
  size_t tried = 0;
  for (const Rule& r : rules.rules) {
    const bool cascade = r.role == Role::kCascade && !r.fallback_root;
    if (r.deprecated || (!cascade && !wrappers.count(r.id))) continue;
    for (int n : {1, 2, 8, 64}) {
      // On one node, on every node, and twice on one node a minute apart.
      std::vector<std::vector<Symptom>> shapes;
      shapes.push_back({fromRule(r, "n1", 10)});
      std::vector<Symptom> all;
      for (int i = 1; i <= n; ++i) all.push_back(fromRule(r, fmt::format("n{}", i), 10 + i));
      shapes.push_back(all);
      shapes.push_back({fromRule(r, "n1", 10), fromRule(r, "n1", 70)});
      for (const auto& symptoms : shapes) {
        CAPTURE(r.id, r.file, n, symptoms.size());
        auto d = correlate(failedJob(n), symptoms, &rules);
        CHECK(!concrete(d.sub_domain));
        CHECK(!d.cause);
        ++tried;
      }
    }
  }
  CHECK(tried > 100);
}

TEST_CASE("the messages that only say something else failed never anchor a verdict alone",
          "[correlator][cascade_only]") {
  // ../shared/TAXONOMY.md: a remote error, a collective timeout, a peer's closed connection, a
  // watchdog abort, Xid 43/45, generic wrappers. None of their rules may be a fallback root.
  const RuleSet& rules = shipped();
  size_t checked = 0;
  for (const char* id : {"nccl.remote_error", "nccl.watchdog_timeout", "c10d.blocking_wait_timeout", "c10d.gloo_timeout",
                         "nccl.system_error", "nccl.internal_error", "xid.43", "xid.45", "jax.distributed_task_died",
                         "jax.barrier_timeout", "ompi.daemon_lost", "torchelastic.child_failed"}) {
    const Rule* r = rules.find(id);
    if (!r) continue;
    CAPTURE(id);
    CHECK(!r->fallback_root);
    ++checked;
  }
  CHECK(checked >= 8);
}

TEST_CASE("roots are ordered by onset: a detector that prints after a timeout began earlier than its stamp",
          "[correlator][onset]") {
  const RuleSet& rules = shipped();
  const Rule* other = rules.find("kernel.ib_port_down");
  REQUIRE(other);
  size_t declared = 0;
  for (const Rule& r : rules.rules) {
    if (r.detection_delay_ns == 0 && r.detection_delay_field.empty()) continue;
    ++declared;
    const int64_t delay = r.detection_delay_field.empty() ? r.detection_delay_ns / kSec : 120;
    auto delayed = [&](int64_t t) {
      Symptom s = fromRule(r, "n1", t);
      if (!r.detection_delay_field.empty()) s.fields[r.detection_delay_field] = std::to_string(delay);
      return s;
    };
    // The other root is stamped at 1000 s. The delayed one stamped before it, and stamped after it
    // but with its condition begun before it: the delayed one is the cause both times.
    for (int64_t stamp : {int64_t{990}, 1000 + delay / 2}) {
      CAPTURE(r.id, stamp);
      auto d = correlate(failedJob(1), {fromRule(*other, "n1", 1000), delayed(stamp)}, &rules);
      REQUIRE(d.cause);
      CHECK(d.cause->rule_id == r.id);
    }
    // Stamped so late that its condition began after the other root: the other one is the cause.
    CAPTURE(r.id);
    auto d = correlate(failedJob(1), {fromRule(*other, "n1", 1000), delayed(1000 + delay + 30)}, &rules);
    REQUIRE(d.cause);
    CHECK(d.cause->rule_id == other->id);
  }
  CHECK(declared >= 4);
}

TEST_CASE("the shipped rules keep the boundaries of docs/taxonomy.md that rules check enforces", "[rules][taxonomy]") {
  const RuleSet& rules = shipped();
  auto problems = checkTaxonomy(rules);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
  // Each check bites: a copy of the shipped set with one rule moved across each boundary.
  struct Move {
    const char* rule;
    SubDomain to;
    const char* says;
  };
  for (const Move& m : {Move{"container.nvidia_cli_error", SubDomain::kInfrastructure, "container rule"},
                        Move{"kernel.nfs_not_responding", SubDomain::kHardware, "storage rule"},
                        Move{"nvml.driver_library_mismatch", SubDomain::kApplication, "version mismatch"},
                        Move{"xid.74", SubDomain::kHardware, "NVLink"}}) {
    RuleSet copy = rules;
    auto it = std::find_if(copy.rules.begin(), copy.rules.end(), [&](const Rule& r) { return r.id == m.rule; });
    REQUIRE(it != copy.rules.end());
    it->sub_domain = m.to;
    auto found = checkTaxonomy(copy);
    CAPTURE(m.rule);
    REQUIRE(!found.empty());
    CHECK(found[0].find(m.says) != std::string::npos);
    CHECK(found[0].find(m.rule) != std::string::npos);
  }
}

TEST_CASE("confidence bands and node advice: drain only on a strong verdict of the node's own fault",
          "[diagnosis][confidence]") {
  CHECK(confidenceBand(0.9) == "strong");
  CHECK(confidenceBand(0.8) == "strong");
  CHECK(confidenceBand(0.6) == "likely");
  CHECK(confidenceBand(0.4) == "lead");
  CHECK(nodeAdvice(0.9, SubDomain::kHardware) == "drain");
  CHECK(nodeAdvice(0.9, SubDomain::kNetwork) == "drain");
  CHECK(nodeAdvice(0.7, SubDomain::kSystemSoftware) == "inspect");
  CHECK(nodeAdvice(0.6, SubDomain::kInfrastructure) == "inspect");
  CHECK(nodeAdvice(0.9, SubDomain::kInfrastructure) == "inspect");
  CHECK(nodeAdvice(0.8, SubDomain::kApplication) == "none");
  CHECK(nodeAdvice(0.4, SubDomain::kHardware) == "none");
  CHECK(nodeAdvice(0.3, SubDomain::kUnattributed) == "none");
  // The verdict's band and each node's advice reach the JSON and the text report.
  const RuleSet& rules = shipped();
  auto d = correlate(failedJob(1), {fromRule(*rules.find("xid.79"), "n1", 10)}, &rules);
  auto j = toJson(d);
  CHECK(j["confidence_band"] == "strong");
  CHECK(j["responsible_nodes"][0]["advice"] == "drain");
  CHECK(renderReport(d).find("advice:      drain n1") != std::string::npos);
  auto none = correlate(failedJob(2), {}, &rules);
  CHECK(toJson(none)["confidence_band"].is_null());
}

TEST_CASE("one owner per event: consecutive jobs on a node do not share evidence", "[correlator][owner]") {
  const RuleSet& rules = shipped();
  // Job A ran 0-3600 s on n1 and n2; job B starts on n1 and n2 at 3840 s (4 minutes after A).
  // During A: an Xid 79 on n1 at 3000 s and NCCL errors on n2 at 3010 s. After A's end, an Xid 48
  // on n1 at 3707 s (107 s after the end).
  JobInfo a = failedJob(2);
  JobInfo b = failedJob(2);
  b.job_id = "8";
  b.start_ns = kT0 + 3840 * kSec;
  b.end_ns = b.start_ns + 3600 * kSec;
  Symptom xid79 = fromRule(*rules.find("xid.79"), "n1", 3000);
  Symptom nccl = fromRule(*rules.find("nccl.remote_error"), "n2", 3010);
  Symptom xid48 = fromRule(*rules.find("xid.48"), "n1", 3707);
  // Job A: its Xid 79, not the Xid 48 that came 107 s after its end.
  auto da = correlate(a, {xid79, nccl, xid48}, &rules);
  REQUIRE(da.cause);
  CHECK(da.cause->rule_id == "xid.79");
  for (const auto& e : da.chain) CHECK(e.rule_id != "xid.48");
  // Job B with nothing of its own: none of A's evidence (nor the Xid 48 before its start) is its.
  auto db = correlate(b, {xid79, nccl, xid48}, &rules);
  CHECK(!db.cause);
  CHECK(db.chain.empty());
  // Job B failing on n1 with a CUDA error at start-up: the lasting GPU loss from A is inherited,
  // and said so; A's NCCL errors on n2 are not in B's chain.
  Symptom cuda = fromRule(*rules.find("cuda.no_device"), "n1", 3850);
  auto dc = correlate(b, {xid79, nccl, cuda}, &rules);
  REQUIRE(dc.cause);
  CHECK(dc.cause->rule_id == "xid.79");
  CHECK(dc.explanation.find("inherited fault") != std::string::npos);
  for (const auto& e : dc.chain) CHECK(e.rule_id != "nccl.remote_error");
}

TEST_CASE("a root port's fatal report that names no device takes the GPU the same incident names on its node",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* aer = rules.find("kernel.pcie_aer_fatal");
  const Rule* xid = rules.find("xid.79");
  REQUIRE(aer);
  REQUIRE(xid);
  for (const char* xid_node : {"n1", "n2"}) {
    CAPTURE(xid_node);
    CorrelatorOptions o;
    o.covered_nodes = coverage(Cover::kAll, 2);
    Symptom port = fromRule(*aer, "n1", 10);
    Symptom lost = fromRule(*xid, xid_node, 10);
    lost.first_ns = lost.last_ns = port.first_ns + 100'000'000;  // the driver's Xid 0.1 s later
    lost.device = "0000:02:00.0";
    auto d = correlate(failedJob(2), {port, lost}, &rules, o);
    REQUIRE(d.cause);
    CHECK(d.cause->rule_id == "kernel.pcie_aer_fatal");
    // Only the same node's report of the same incident lends its device.
    CHECK(d.cause->device == (std::string(xid_node) == "n1" ? "0000:02:00.0" : ""));
  }
}

TEST_CASE("a node whose announced release differs from the other nodes' is the cause only when nothing during the "
          "job is",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* banner = rules.find("nccl.cuda_driver_version");
  const Rule* wrapper = rules.find("nccl.system_error");
  const Rule* xid = rules.find("xid.79");
  REQUIRE(banner);
  REQUIRE(wrapper);
  REQUIRE(xid);
  auto announce = [&](const std::string& node, const std::string& v) {
    Symptom s = fromRule(*banner, node, 1);
    s.source_kind = SourceKind::kApplication;
    s.fields["cuda_driver_version"] = v;
    return s;
  };
  CorrelatorOptions o;
  o.covered_nodes = coverage(Cover::kAll, 3);
  std::vector<Symptom> base{announce("n1", "12020"), announce("n2", "12020"), announce("n3", "12080")};
  SECTION("the odd node, with only a wrapper beside it") {
    auto symptoms = base;
    Symptom w = fromRule(*wrapper, "n1", 30);
    w.source_kind = SourceKind::kApplication;
    symptoms.push_back(w);
    auto d = correlate(failedJob(3), symptoms, &rules, o);
    CHECK(d.sub_domain == SubDomain::kSystemSoftware);
    REQUIRE(d.cause);
    CHECK(d.cause->rule_id == "nodes.version_differs");
    CHECK(nodesOf(d) == std::vector<std::string>{"n3"});
  }
  SECTION("no majority: the difference names no node") {
    std::vector<Symptom> symptoms{announce("n1", "12020"), announce("n2", "12080")};
    auto d = correlate(failedJob(2), symptoms, &rules, o);
    REQUIRE(d.cause);
    CHECK(d.cause->rule_id == "nodes.version_differs");
    CHECK(nodesOf(d).empty());
  }
  SECTION("a GPU lost during the job outranks it") {
    auto symptoms = base;
    symptoms.push_back(fromRule(*xid, "n2", 40));
    auto d = correlate(failedJob(3), symptoms, &rules, o);
    CHECK(d.sub_domain == SubDomain::kHardware);
    CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  }
  SECTION("the same release everywhere is no cause") {
    std::vector<Symptom> symptoms{announce("n1", "12020"), announce("n2", "12020"), announce("n3", "12020")};
    auto d = correlate(failedJob(3), symptoms, &rules, o);
    CHECK(!d.cause);
  }
}

TEST_CASE("a world whose members did not all announce themselves is a hang at the time limit, not a healthy run",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* member = rules.find("lightning.distributed_member");
  REQUIRE(member);
  auto announce = [&](int rank, int world) {
    Symptom s = fromRule(*member, "n1", 5 + rank);
    s.source_kind = SourceKind::kApplication;
    s.fields["global_rank"] = std::to_string(rank);
    s.fields["member"] = std::to_string(rank + 1);
    s.fields["world_size"] = std::to_string(world);
    return s;
  };
  JobInfo job = failedJob(2);
  job.state = "TIMEOUT";
  CorrelatorOptions o;
  o.covered_nodes = coverage(Cover::kAll, 2);
  std::vector<Symptom> half, whole;
  for (int r = 0; r < 4; ++r) half.push_back(announce(r, 8));
  for (int r = 0; r < 8; ++r) whole.push_back(announce(r, 8));
  auto hung = correlate(job, half, &rules, o);
  CHECK(hung.sub_domain == SubDomain::kUnattributed);
  CHECK(hung.responsible.empty());
  CHECK(hung.explanation.find("4 of 8 ranks announced themselves") != std::string::npos);
  auto healthy = correlate(job, whole, &rules, o);
  CHECK(healthy.sub_domain == SubDomain::kNone);
  // A failed job with only the missing members decides nothing either.
  auto failed = correlate(failedJob(2), half, &rules, o);
  CHECK(failed.sub_domain == SubDomain::kUnattributed);
  CHECK(!failed.cause);
}

TEST_CASE("a connection never made before the time limit is where a hang began, a reset only its echo",
          "[correlator][localization]") {
  const RuleSet& rules = shipped();
  const Rule* refused = rules.find("errno.connection_refused");
  const Rule* reset = rules.find("errno.connection_reset");
  REQUIRE(refused);
  REQUIRE(reset);
  JobInfo job = failedJob(2);
  job.state = "TIMEOUT";
  CorrelatorOptions o;
  o.covered_nodes = coverage(Cover::kAll, 2);
  auto made = [&](const Rule& r, int64_t t) {
    Symptom s = fromRule(r, "n1", t);
    s.source_kind = SourceKind::kApplication;
    return s;
  };
  auto early = correlate(job, {made(*refused, 20)}, &rules, o);
  CHECK(early.sub_domain == SubDomain::kNetwork);
  REQUIRE(early.cause);
  CHECK(early.cause->rule_id == "errno.connection_refused");
  // At the kill (the limit) it is the stop's echo.
  auto at_kill = correlate(job, {made(*refused, 3600)}, &rules, o);
  CHECK(at_kill.sub_domain == SubDomain::kNone);
  auto echo = correlate(job, {made(*reset, 20)}, &rules, o);
  CHECK(echo.sub_domain == SubDomain::kUnattributed);
  // A cancelled job's refused connect stays undecided.
  JobInfo cancelled = failedJob(2);
  cancelled.state = "CANCELLED";
  CHECK(correlate(cancelled, {made(*refused, 20)}, &rules, o).sub_domain == SubDomain::kNone);
}

// The correlator's reasoning on hand-made symptoms: cascades, ambiguity, systemic faults,
// terminal states. Symptoms carry their roles; the causal knowledge is the shipped
// rules/causality (no extraction rules are loaded).
#include <catch2/catch.hpp>

#include "common/correlator.h"
#include "common/rule_set.h"

using namespace faultline::common;

namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1717236000LL * kSec;

// The shipped causal knowledge alone (rules/causality), loaded once.
const RuleSet* kb() {
  static const auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules/causality"});
  REQUIRE(loaded.errors.empty());
  return loaded.rules.get();
}

// The category the shipped rules give a rule id's family (what relations select on).
std::string categoryOf(const std::string& rule) {
  for (auto [prefix, category] : std::initializer_list<std::pair<const char*, const char*>>{
           {"python.", "python"}, {"xid.", "gpu"}, {"nccl.", "nccl"}, {"fm.", "fabric_manager"}, {"sxid.", "nvswitch"}})
    if (rule.rfind(prefix, 0) == 0) return category;
  return "";
}

Symptom sym(std::string rule, std::string node, SubDomain d, Role role, int64_t t_sec,
            Severity sev = Severity::kError) {
  Symptom s;
  s.category = categoryOf(rule);
  s.rule_id = rule;
  s.symptom = rule;
  s.node = std::move(node);
  s.sub_domain = d;
  s.role = role;
  s.severity = sev;
  s.first_ns = s.last_ns = kT0 + t_sec * kSec;
  s.time_known = true;
  s.source_kind = SourceKind::kKernel;
  return s;
}

JobInfo job(std::string state, int nodes = 4) {
  JobInfo j;
  j.job_id = "1";
  j.state = std::move(state);
  j.start_ns = kT0;
  j.end_ns = kT0 + 3600 * kSec;
  for (int i = 1; i <= nodes; ++i) j.nodes.push_back("n" + std::to_string(i));
  return j;
}

std::vector<std::string> nodesOf(const Diagnosis& d) {
  std::vector<std::string> v;
  for (const auto& r : d.responsible) v.push_back(r.node);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("one root upstream of a cascade on every node is the cause", "[correlator]") {
  std::vector<Symptom> s;
  for (int n = 1; n <= 4; ++n)
    for (int i = 0; i < 50; ++i)
      s.push_back(sym("nccl.remote_error", "n" + std::to_string(n), SubDomain::kNetwork, Role::kCascade, 5 + i));
  s.push_back(sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical));
  // The cascade starts before the root in this log (clock or buffering): still cascade.
  auto d = correlate(job("FAILED"), s, kb());
  CHECK(d.terminal_state == "fail");
  CHECK(d.sub_domain == SubDomain::kHardware);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "xid.79");
  CHECK(nodesOf(d) == std::vector<std::string>{"n3"});
  // Hundreds of identical symptoms collapse into one chain entry with a count and node list.
  auto it = std::find_if(d.chain.begin(), d.chain.end(), [](const ChainEntry& e) { return e.rule_id == "nccl.remote_error"; });
  REQUIRE(it != d.chain.end());
  CHECK(it->count == 200);
  CHECK(it->nodes.size() == 4);
  CHECK(it->role == Role::kCascade);
}

TEST_CASE("an application exception after a hardware fault is its consequence", "[correlator]") {
  std::vector<Symptom> s{sym("python.exception", "n1", SubDomain::kApplication, Role::kRoot, 12),
                         sym("xid.48", "n2", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical)};
  auto d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kHardware);
  CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  // But an exception well before the fault stands on its own: two independent causes.
  s[0].first_ns = s[0].last_ns = kT0 - 0 * kSec + 0;
  s[0].first_ns = s[0].last_ns = kT0 + 10 * kSec - 30 * kSec;
  d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kAmbiguous);
  CHECK(nodesOf(d) == std::vector<std::string>{"n1", "n2"});
  CHECK(d.candidates.size() == 2);
}

TEST_CASE("independent roots in different domains inside the window are ambiguous", "[correlator]") {
  std::vector<Symptom> s{sym("xid.48", "n1", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical),
                         sym("kernel.nfs_not_responding", "n2", SubDomain::kInfrastructure, Role::kRoot, 30)};
  auto d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kAmbiguous);
  CHECK(!d.cause);
  // Outside the causal window the later one is downstream.
  s[1].first_ns = s[1].last_ns = kT0 + 400 * kSec;
  d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kHardware);
  // On the same node it is a consequence, not a competitor.
  s[1].first_ns = s[1].last_ns = kT0 + 30 * kSec;
  s[1].node = "n1";
  d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kHardware);
}

TEST_CASE("more suspect nodes than the threshold is systemic", "[correlator]") {
  std::vector<Symptom> s;
  for (int n = 1; n <= 20; ++n)
    s.push_back(sym("kernel.ib_port_down", "n" + std::to_string(n), SubDomain::kNetwork, Role::kRoot, 10));
  auto d = correlate(job("FAILED", 20), s, kb());
  CHECK(d.sub_domain == SubDomain::kNetwork);
  CHECK(d.systemic);
  CHECK(d.responsible.empty());
  CorrelatorOptions o;
  o.systemic_threshold = 32;
  d = correlate(job("FAILED", 20), s, kb(), o);
  CHECK(!d.systemic);
  CHECK(d.responsible.size() == 20);
}

TEST_CASE("terminal states without fault evidence", "[correlator]") {
  std::vector<Symptom> ctx{sym("slurm.time_limit", "n1", SubDomain::kNone, Role::kContext, 3600)};
  CHECK(correlate(job("COMPLETED"), {}, kb()).sub_domain == SubDomain::kNone);
  CHECK(correlate(job("COMPLETED"), {}, kb()).terminal_state == "success");
  auto t = correlate(job("TIMEOUT"), ctx, kb());
  CHECK(t.terminal_state == "timeout");
  CHECK(t.sub_domain == SubDomain::kNone);
  CHECK(correlate(job("PREEMPTED"), {}, kb()).sub_domain == SubDomain::kNone);
  CHECK(correlate(job("CANCELLED by 0"), {}, kb()).sub_domain == SubDomain::kNone);
  CHECK(correlate(job("FAILED"), {}, kb()).sub_domain == SubDomain::kUnattributed);
  // A node the scheduler lost, with nothing in the logs that says why: no domain is claimed.
  CHECK(correlate(job("NODE_FAIL"), {}, kb()).sub_domain == SubDomain::kUnattributed);
  CHECK(correlate(job("NODE_FAIL"), {}, kb()).terminal_state == "node_fail");
  CHECK(correlate(job("OUT_OF_MEMORY"), {}, kb()).sub_domain == SubDomain::kApplication);
  // A hang on a GPU fault that ran into the time limit is hardware, not the user's problem.
  std::vector<Symptom> hang{sym("xid.79", "n2", SubDomain::kHardware, Role::kRoot, 100, Severity::kCritical),
                            sym("nccl.watchdog_timeout", "n1", SubDomain::kNone, Role::kCascade, 700)};
  auto h = correlate(job("TIMEOUT"), hang, kb());
  CHECK(h.terminal_state == "timeout");
  CHECK(h.sub_domain == SubDomain::kHardware);
  // Collective timeouts with no root: a hang nobody can explain.
  hang.erase(hang.begin());
  CHECK(correlate(job("TIMEOUT"), hang, kb()).sub_domain == SubDomain::kUnattributed);
}

TEST_CASE("context stays in the chain, cascade evidence alone is a low-confidence fallback", "[correlator]") {
  std::vector<Symptom> s{sym("kernel.boot", "n2", SubDomain::kNone, Role::kContext, -1800),
                         sym("xid.95", "n2", SubDomain::kHardware, Role::kRoot, 60, Severity::kCritical)};
  auto d = correlate(job("FAILED"), s, kb());
  REQUIRE(d.chain.size() == 2);
  CHECK(d.chain[0].rule_id == "kernel.boot");
  CHECK(d.chain[0].role == Role::kContext);
  CHECK(d.cause->rule_id == "xid.95");

  Symptom ib = sym("nccl.ib_completion_error", "n1", SubDomain::kNetwork, Role::kCascade, 10);
  ib.fallback_root = true;
  Symptom ib2 = ib;
  ib2.node = "n2";
  auto f = correlate(job("FAILED"), {ib, ib2}, kb());
  CHECK(f.sub_domain == SubDomain::kNetwork);
  CHECK(f.responsible.empty());
  REQUIRE(f.cause);
  CHECK(f.cause->rule_id == "nccl.ib_completion_error");
}

TEST_CASE("the driver's note 'caused by previous Xid' makes a symptom cascade", "[correlator]") {
  Symptom a = sym("xid.79", "n1", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical);
  Symptom b = sym("xid.62", "n2", SubDomain::kHardware, Role::kRoot, 5, Severity::kCritical);
  b.fields["prev_xid"] = "79";
  auto d = correlate(job("FAILED"), {a, b}, kb());
  CHECK(d.cause->rule_id == "xid.79");
  CHECK(nodesOf(d) == std::vector<std::string>{"n1"});
}

TEST_CASE("symptoms outside the job's window or nodes are ignored", "[correlator]") {
  std::vector<Symptom> s{sym("xid.79", "n1", SubDomain::kHardware, Role::kRoot, -7200, Severity::kCritical),
                         sym("xid.79", "other", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical)};
  auto d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kUnattributed);
  // Unless the node fails the job because of it: a lost GPU stays lost until a reboot
  // [causality: gpu-unusable-until-reboot].
  Symptom no_gpu = sym("cuda.no_device", "n1", SubDomain::kSystemSoftware, Role::kCascade, 20);
  no_gpu.fallback_root = true;
  s.push_back(no_gpu);
  d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kHardware);
  CHECK(nodesOf(d) == std::vector<std::string>{"n1"});
  // A reboot in between ended it.
  s.push_back(sym("kernel.boot", "n1", SubDomain::kNone, Role::kContext, -3600, Severity::kInfo));
  d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kSystemSoftware);
}

TEST_CASE("application failure: first failing rank's node, or none when all failed alike", "[correlator]") {
  std::vector<Symptom> s{sym("python.exception", "n2", SubDomain::kApplication, Role::kRoot, 10),
                         sym("python.exception", "n1", SubDomain::kApplication, Role::kRoot, 11)};
  auto d = correlate(job("FAILED", 4), s, kb());
  CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  for (int n = 3; n <= 4; ++n)
    s.push_back(sym("python.exception", "n" + std::to_string(n), SubDomain::kApplication, Role::kRoot, 12));
  d = correlate(job("FAILED", 4), s, kb());
  CHECK(d.sub_domain == SubDomain::kApplication);
  CHECK(d.responsible.empty());
}

TEST_CASE("host names match the job's nodes by short name, single-node jobs own unplaced evidence", "[correlator]") {
  Symptom fqdn = sym("xid.79", "n2.cluster.example", SubDomain::kHardware, Role::kRoot, 10, Severity::kCritical);
  auto d = correlate(job("FAILED"), {fqdn}, kb());
  CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  Symptom unplaced = sym("python.exception", "", SubDomain::kApplication, Role::kRoot, 10);
  d = correlate(job("FAILED", 1), {unplaced}, kb());
  CHECK(nodesOf(d) == std::vector<std::string>{"n1"});
}

TEST_CASE("a peer that went away, alone, names no cause", "[correlator]") {
  std::vector<Symptom> s{sym("nccl.remote_error", "n1", SubDomain::kNetwork, Role::kCascade, 10),
                         sym("xid.45", "n2", SubDomain::kSystemSoftware, Role::kTeardown, 12)};
  auto d = correlate(job("FAILED"), s, kb());
  CHECK(d.sub_domain == SubDomain::kUnattributed);
  CHECK(!d.cause);
  CHECK(d.chain.size() == 2);
}

TEST_CASE("a platform-dependent message is judged with the node's facts", "[correlator][node_facts]") {
  // Fabric Manager finding no NVSwitch: a fault on an HGX baseboard, nothing on a PCIe node.
  auto fm = [](const std::string& node) {
    Symptom s = sym("fm.nv_warn_nothing_to_do", node, SubDomain::kSystemSoftware, Role::kRoot, 5);
    s.fields["requires_node_fact"] = "nvswitch";
    return s;
  };
  auto app = sym("python.exception", "n2", SubDomain::kApplication, Role::kRoot, 30);

  CorrelatorOptions hgx;
  hgx.node_facts["n1"].nvswitch = true;
  auto d = correlate(job("FAILED"), {fm("n1"), app}, kb(), hgx);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "fm.nv_warn_nothing_to_do");
  CHECK(d.sub_domain == SubDomain::kSystemSoftware);
  CHECK(d.cause->fields["node_fact"] == "node has NVSwitches");

  CorrelatorOptions pcie;
  pcie.node_facts["n1"].nvswitch = false;
  d = correlate(job("FAILED"), {fm("n1"), app}, kb(), pcie);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "python.exception");
  CHECK(d.sub_domain == SubDomain::kApplication);
  bool context = false;
  for (const auto& e : d.chain) context |= e.rule_id == "fm.nv_warn_nothing_to_do" && e.role == Role::kContext;
  CHECK(context);

  // Nothing known: it does not outrank a real root, but anchors when it is all there is.
  d = correlate(job("FAILED"), {fm("n1"), app}, kb());
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "python.exception");
  d = correlate(job("FAILED"), {fm("n1")}, kb());
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "fm.nv_warn_nothing_to_do");

  // SXids from the same node show it has NVSwitches, whatever else is (not) known.
  Symptom sxid = sym("sxid.nonfatal", "n1", SubDomain::kNetwork, Role::kContext, 1);
  sxid.category = "nvswitch";
  d = correlate(job("FAILED"), {sxid, fm("n1"), app}, kb(), pcie);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "fm.nv_warn_nothing_to_do");
}

TEST_CASE("the peer an error names is resolved to a node through the nodes' addresses", "[correlator][peer]") {
  auto refused = [](const std::string& node, const std::string& peer) {
    Symptom s = sym("nccl.socket_connect_failed", node, SubDomain::kNetwork, Role::kCascade, 5);
    s.fallback_root = true;
    s.fields["peer"] = peer;
    return s;
  };
  CorrelatorOptions o;
  o.node_facts["n2"].addresses = {"10.148.3.247"};
  o.node_facts["n3"].addresses = {"10.148.3.248"};
  auto d = correlate(job("FAILED"), {refused("n1", "10.148.3.247<56821>"), refused("n4", "10.148.3.247:56821")},
                     kb(), o);
  CHECK(d.sub_domain == SubDomain::kNetwork);
  CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  // Unknown addresses, or no addresses at all: no node is named.
  CHECK(nodesOf(correlate(job("FAILED"), {refused("n1", "10.9.9.9")}, kb(), o)).empty());
  CHECK(nodesOf(correlate(job("FAILED"), {refused("n1", "10.148.3.247")}, kb())).empty());
  // A real root elsewhere still wins over the peer reading.
  auto x = sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 4, Severity::kCritical);
  d = correlate(job("FAILED"), {refused("n1", "10.148.3.247"), x}, kb(), o);
  CHECK(nodesOf(d) == std::vector<std::string>{"n3"});
}

TEST_CASE("Fabric Manager giving up on a node without NVSwitch is no fault either", "[correlator][node_facts]") {
  Symptom warn = sym("fm.nv_warn_nothing_to_do", "n1", SubDomain::kSystemSoftware, Role::kRoot, 5);
  warn.fields["requires_node_fact"] = "nvswitch";
  warn.category = "fabric_manager";
  Symptom failed = sym("fm.service_failed", "n1", SubDomain::kSystemSoftware, Role::kRoot, 6);
  failed.category = "fabric_manager";
  auto app = sym("python.exception", "n2", SubDomain::kApplication, Role::kRoot, 30);
  CorrelatorOptions pcie;
  pcie.node_facts["n1"].nvswitch = false;
  auto d = correlate(job("FAILED"), {warn, failed, app}, kb(), pcie);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "python.exception");
  // Without facts the service failure stays a root, as before.
  d = correlate(job("FAILED"), {warn, failed, app}, kb());
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "fm.service_failed");
}

TEST_CASE("cascade-only evidence all from one node's own logs blames that node, with low confidence",
          "[correlator][one_node]") {
  // A GSP heartbeat timeout line (cascade, fallback) in one node's kernel log and nothing else.
  Symptom gsp = sym("nvrm.gsp_heartbeat_timeout", "n2", SubDomain::kSystemSoftware, Role::kCascade, 5);
  gsp.fallback_root = true;
  auto d = correlate(job("FAILED"), {gsp}, kb());
  CHECK(nodesOf(d) == std::vector<std::string>{"n2"});
  REQUIRE(d.responsible.size() == 1);
  CHECK(d.responsible[0].confidence < 0.5);
  // The same from a rank log (placed through the rank layout) or naming a peer: not the reporter.
  Symptom rank = gsp;
  rank.source_kind = SourceKind::kApplication;
  CHECK(nodesOf(correlate(job("FAILED"), {rank}, kb())).empty());
  Symptom peer = gsp;
  peer.fields["peer"] = "10.0.0.9";
  CHECK(nodesOf(correlate(job("FAILED"), {peer}, kb())).empty());
  // Evidence on two nodes: no node is named.
  Symptom other = gsp;
  other.node = "n3";
  CHECK(nodesOf(correlate(job("FAILED"), {gsp, other}, kb())).empty());
  // A one-node job: its node, whatever the evidence's source.
  rank.node = "n1";
  CHECK(nodesOf(correlate(job("FAILED", 1), {rank}, kb())) == std::vector<std::string>{"n1"});
}

TEST_CASE("a time-limit kill: cascade evidence after the kill is teardown, before it a hang, never a cause",
          "[correlator][timeout]") {
  JobInfo j = job("TIMEOUT");
  auto at = [&](Symptom s, int64_t sec_before_end) {
    s.first_ns = s.last_ns = j.end_ns - sec_before_end * kSec;
    return s;
  };
  Symptom sigkill = sym("torchelastic.worker_sigkill", "n1", SubDomain::kApplication, Role::kCascade, 0);
  sigkill.fallback_root = true;
  Symptom watchdog = sym("nccl.watchdog_timeout", "n2", SubDomain::kApplication, Role::kCascade, 0);
  watchdog.fallback_root = true;
  // Workers killed with -9 right at the limit: the limit, nothing else.
  auto d = correlate(j, {at(sigkill, 0)}, kb());
  CHECK(d.terminal_state == "timeout");
  CHECK(d.sub_domain == SubDomain::kNone);
  CHECK_FALSE(d.cause);
  // Collective timeouts an hour before the limit: a hang whose cause the logs do not show.
  d = correlate(j, {at(watchdog, 3600), at(sigkill, 0)}, kb());
  CHECK(d.sub_domain == SubDomain::kUnattributed);
  CHECK_FALSE(d.cause);
  // A real root during the job, before the limit, still decides.
  d = correlate(j, {at(watchdog, 3400), at(sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 0), 3500)},
                kb());
  CHECK(d.sub_domain == SubDomain::kHardware);
  // The same Xid 100 s before the job started was another job's (or no job's) event: n3 shows
  // nothing of its own during this job, so the Xid is not kept as a lasting fault either.
  d = correlate(j, {at(watchdog, 3400), at(sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 0), 3700)},
                kb());
  CHECK(d.sub_domain == SubDomain::kUnattributed);
}

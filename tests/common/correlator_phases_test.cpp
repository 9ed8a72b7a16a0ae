// Each phase of the correlator on plain values (common/correlator_phases.h), and the property
// that independent roots in different domains on different nodes are ambiguous.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "common/correlator_phases.h"
#include "common/job.h"
#include "common/rule_set.h"

using namespace faultline::common;
using namespace faultline::common::phases;

namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1717236000LL * kSec;

Symptom sym(std::string rule, std::string node, SubDomain d, Role role, double t_sec,
            Severity sev = Severity::kError, std::string category = "") {
  Symptom s;
  s.rule_id = rule;
  s.symptom = rule;
  s.category = std::move(category);
  s.node = std::move(node);
  s.sub_domain = d;
  s.role = role;
  s.severity = sev;
  s.first_ns = s.last_ns = kT0 + static_cast<int64_t>(t_sec * kSec);
  s.time_known = true;
  s.source_kind = SourceKind::kKernel;
  return s;
}

Item item(Symptom s) {
  Item it;
  it.eff = s.role;
  it.s = std::move(s);
  return it;
}

JobInfo job(std::string state = "FAILED", int nodes = 4) {
  JobInfo j;
  j.job_id = "7";
  j.state = std::move(state);
  j.start_ns = kT0;
  j.end_ns = kT0 + 3600 * kSec;
  for (int i = 1; i <= nodes; ++i) j.nodes.push_back("n" + std::to_string(i));
  return j;
}

const std::vector<Relation>& shipped() {
  static const auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules/causality"});
  REQUIRE(loaded.errors.empty());
  return loaded.rules->relations;
}

Relation consequenceOf(std::string id, SymptomMatcher symptom, SymptomMatcher cause, RelationScope scope,
                       int64_t before_s, int64_t after_s) {
  Relation r;
  r.id = std::move(id);
  r.effect = RelationEffect::kConsequence;
  r.symptom = std::move(symptom);
  r.cause = std::move(cause);
  r.scope = scope;
  r.before_ns = before_s * kSec;
  r.after_ns = after_s * kSec;
  return r;
}

std::vector<std::string> nodesOf(const std::vector<ResponsibleNode>& r) {
  std::vector<std::string> v;
  for (const auto& n : r) v.push_back(n.node);
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("scope: window, node names, node-less evidence, other nodes", "[phases][scope]") {
  std::vector<Symptom> s{sym("xid.79", "n1.cluster.local", SubDomain::kHardware, Role::kRoot, 10),
                         sym("xid.79", "elsewhere", SubDomain::kHardware, Role::kRoot, 10),
                         sym("xid.48", "n2", SubDomain::kHardware, Role::kRoot, -900),     // before pre-start
                         sym("kernel.boot", "n2", SubDomain::kNone, Role::kContext, -900),  // context reaches further
                         sym("xid.48", "n3", SubDomain::kHardware, Role::kRoot, 3600 + 600)};  // after post-end
  auto items = scope(job(), s, {}, {});
  REQUIRE(items.size() == 2);
  CHECK(items[0].s.rule_id == "kernel.boot");
  CHECK(items[1].s.node == "n1");  // the FQDN is the job's n1
  // A one-node job owns evidence that names no node.
  Symptom unplaced = sym("python.exception", "", SubDomain::kApplication, Role::kRoot, 5);
  items = scope(job("FAILED", 1), {unplaced}, {}, {});
  REQUIRE(items.size() == 1);
  CHECK(items[0].s.node == "n1");
  // Sorted: timed before untimed, then time, then severity.
  Symptom untimed = sym("cuda.oom", "n2", SubDomain::kApplication, Role::kRoot, 0);
  untimed.time_known = false;
  items = scope(job(), {untimed, sym("a", "n1", SubDomain::kHardware, Role::kRoot, 7),
                        sym("b", "n1", SubDomain::kHardware, Role::kRoot, 7, Severity::kCritical)}, {}, {});
  CHECK(items[0].s.rule_id == "b");
  CHECK(items[2].s.rule_id == "cuda.oom");
}

TEST_CASE("scope: the order is earlier()'s, ties kept in input order, FQDNs placed, whatever the input order",
          "[phases][scope]") {
  // Many ties (same second, severity, node) and names that sort differently from their input
  // order: scope sorts by keys of its own, which must give what one stable sort by earlier() does.
  std::mt19937 rng(14);
  std::vector<Symptom> in;
  const char* rules[] = {"nccl.watchdog_timeout", "c10d.timeout_dump_signal", "b", "a", "xid.79"};
  for (int i = 0; i < 600; ++i) {
    Symptom s = sym(rules[rng() % 5], "n" + std::to_string(1 + rng() % 12) + (rng() % 3 == 0 ? ".cluster" : ""),
                    SubDomain::kNetwork, Role::kCascade, double(rng() % 4), Severity(rng() % 4));
    s.time_known = rng() % 7 != 0;
    s.summary = std::to_string(i);  // identity, to check the order of ties
    in.push_back(std::move(s));
  }
  auto items = scope(job("FAILED", 12), in, {}, {});
  REQUIRE(items.size() == in.size());
  std::vector<Item> want;
  for (auto s : in) {
    s.node = s.node.substr(0, s.node.find('.'));
    want.push_back(item(std::move(s)));
  }
  std::stable_sort(want.begin(), want.end(), earlier);
  for (size_t i = 0; i < items.size(); ++i) {
    INFO(i);
    CHECK(items[i].s.summary == want[i].s.summary);
    CHECK(items[i].s.node == want[i].s.node);
  }
}

TEST_CASE("scope: a platform-dependent message is judged with the node's NVSwitch fact", "[phases][scope]") {
  Symptom fm = sym("fm.nv_warn_nothing_to_do", "n1", SubDomain::kSystemSoftware, Role::kRoot, 5);
  fm.fields["requires_node_fact"] = "nvswitch";
  CorrelatorOptions o;
  o.node_facts["n1"].nvswitch = false;
  CHECK(scope(job(), {fm}, {}, o)[0].eff == Role::kContext);
  o.node_facts["n1"].nvswitch = true;
  CHECK(scope(job(), {fm}, {}, o)[0].eff == Role::kRoot);
  auto unknown = scope(job(), {fm}, {}, {});
  CHECK(unknown[0].eff == Role::kCascade);
  CHECK(unknown[0].s.fallback_root);
  // An SXid on the node proves NVSwitches whatever node.json says.
  o.node_facts["n1"].nvswitch = false;
  Symptom sxid = sym("sxid.nonfatal", "n1", SubDomain::kNetwork, Role::kContext, 1, Severity::kWarning, "nvswitch");
  auto items = scope(job(), {sxid, fm}, {}, o);
  CHECK(items[1].eff == Role::kRoot);
}

TEST_CASE("scope: a message that is a fault only in a job of several nodes is judged by the job's size", "[phases][scope]") {
  Symptom gcs = sym("ray.gcs_no_valid_local_ip", "n1", SubDomain::kSystemSoftware, Role::kRoot, 5);
  gcs.fields["requires_job"] = "several_nodes";
  auto several = scope(job("FAILED", 2), {gcs}, {}, {});
  REQUIRE(several.size() == 1);
  CHECK(several[0].eff == Role::kRoot);
  CHECK(several[0].s.field("job_fact") == "job of 2 nodes");
  auto one = scope(job("FAILED", 1), {gcs}, {}, {});
  CHECK(one[0].eff == Role::kContext);
  CHECK_THAT(one[0].because, Catch::Contains("one-node job"));
  JobInfo unknown = job("FAILED", 0);
  auto u = scope(unknown, {gcs}, {}, {});
  REQUIRE(u.size() == 1);
  CHECK(u[0].eff == Role::kCascade);
  CHECK(u[0].s.fallback_root);
}

TEST_CASE("scope: a fault that persists until reboot counts from before the window", "[phases][scope]") {
  const auto& rel = shipped();
  Symptom lost = sym("xid.79", "n2", SubDomain::kHardware, Role::kRoot, -2400, Severity::kCritical, "gpu");
  Symptom no_gpu = sym("torch.no_cuda_gpus", "n2", SubDomain::kSystemSoftware, Role::kCascade, 4);
  auto items = scope(job(), {lost, no_gpu}, rel, {});
  REQUIRE(items.size() == 2);
  CHECK(items[0].s.rule_id == "xid.79");
  CHECK_THAT(items[0].because, Catch::Contains("[causality: gpu-unusable-until-reboot]"));
  // Without any failure evidence from that node during the job it is not kept.
  CHECK(scope(job(), {lost}, rel, {}).empty());
  // A new boot of the node in between ended it (by boot id, without a boot line).
  lost.boot_id = "b1";
  Symptom later = sym("kernel.nvidia_driver_loaded", "n2", SubDomain::kNone, Role::kContext, -1200, Severity::kInfo);
  later.boot_id = "b2";
  Symptom later_other = later;
  later_other.rule_id = "kernel.something";
  items = scope(job(), {lost, later_other, no_gpu}, rel, {});
  CHECK(std::none_of(items.begin(), items.end(), [](const Item& i) { return i.s.rule_id == "xid.79"; }));
}

TEST_CASE("candidates: a fault from before the job yields to a root during it", "[phases][candidates]") {
  RuleSet rules;
  rules.relations = shipped();
  Symptom lost = sym("xid.79", "n2", SubDomain::kHardware, Role::kRoot, -2400, Severity::kCritical, "gpu");
  Symptom remote = sym("nccl.remote_error", "n2", SubDomain::kNetwork, Role::kCascade, 1805, Severity::kError, "nccl");
  Symptom dbe = sym("xid.48", "n3", SubDomain::kHardware, Role::kRoot, 1800, Severity::kCritical, "gpu_memory");
  auto d = correlate(job(), {lost, remote, dbe}, &rules);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "xid.48");
  CHECK(nodesOf(d.responsible) == std::vector<std::string>{"n3"});
  auto old = std::find_if(d.chain.begin(), d.chain.end(), [](const ChainEntry& e) { return e.rule_id == "xid.79"; });
  REQUIRE(old != d.chain.end());
  CHECK(old->role == Role::kContext);
  CHECK_THAT(old->because, Catch::Contains("[phase: candidates]"));
  // Alone, it is the cause.
  d = correlate(job(), {lost, remote}, &rules);
  REQUIRE(d.cause);
  CHECK(d.cause->rule_id == "xid.79");
}

TEST_CASE("scope: a node with fewer GPUs than its peers gets a synthetic root", "[phases][scope]") {
  CorrelatorOptions o;
  for (const char* n : {"n1", "n2", "n3"}) o.node_facts[n].gpu_count = 8;
  o.node_facts["n4"].gpu_count = 7;
  auto items = scope(job(), {}, {}, o);
  REQUIRE(items.size() == 1);
  CHECK(items[0].s.rule_id == "inventory.gpu_missing");
  CHECK(items[0].s.node == "n4");
  CHECK(items[0].s.sub_domain == SubDomain::kHardware);
  CHECK(items[0].s.first_ns == kT0);
  CHECK(items[0].s.field("gpus") == "7");
  // No common configuration (half the nodes have 4, half 8): nothing is missing.
  CorrelatorOptions mixed;
  mixed.node_facts["n1"].gpu_count = 4;
  mixed.node_facts["n2"].gpu_count = 4;
  mixed.node_facts["n3"].gpu_count = 8;
  CHECK(scope(job("FAILED", 3), {}, {}, mixed).empty());
  // One node known: nothing to compare with.
  CorrelatorOptions one;
  one.node_facts["n1"].gpu_count = 7;
  CHECK(scope(job(), {}, {}, one).empty());
}

TEST_CASE("relations: the first consequence that fits decides, within its scope and window", "[phases][relations]") {
  SymptomMatcher app;
  app.sub_domains = {SubDomain::kApplication};
  app.roles = {Role::kRoot};
  SymptomMatcher fault;
  fault.roles = {Role::kRoot};
  fault.not_sub_domains = {SubDomain::kApplication};
  std::vector<Relation> rel{consequenceOf("app-after-fault", app, fault, RelationScope::kSameNode, 5, 60)};
  std::vector<Item> items{item(sym("xid.48", "n1", SubDomain::kHardware, Role::kRoot, 10)),
                          item(sym("cuda.oom", "n1", SubDomain::kApplication, Role::kRoot, 12)),
                          item(sym("cuda.oom", "n2", SubDomain::kApplication, Role::kRoot, 12)),
                          item(sym("cuda.oom", "n1", SubDomain::kApplication, Role::kRoot, 100)),
                          item(sym("cuda.oom", "n1", SubDomain::kApplication, Role::kRoot, 6))};
  applyRelations(items, rel);
  CHECK(items[0].eff == Role::kRoot);
  CHECK(items[1].eff == Role::kCascade);
  CHECK(items[1].because == "consequence of xid.48 on n1 [causality: app-after-fault]");
  CHECK(items[2].eff == Role::kRoot);  // another node: out of scope
  CHECK(items[3].eff == Role::kRoot);  // 90 s after: out of the window
  CHECK(items[4].eff == Role::kCascade);  // 4 s before: within `before`
  // A relation looking only forward (before 0) breaks a tie at equal times by order.
  SymptomMatcher any_root;
  any_root.roles = {Role::kRoot};
  std::vector<Relation> fwd{consequenceOf("later", any_root, any_root, RelationScope::kSameNode, 0, 60)};
  std::vector<Item> tie{item(sym("a", "n1", SubDomain::kHardware, Role::kRoot, 10)),
                        item(sym("b", "n1", SubDomain::kNetwork, Role::kRoot, 10))};
  applyRelations(tie, fwd);
  CHECK(tie[0].eff == Role::kRoot);
  CHECK(tie[1].eff == Role::kCascade);
}

TEST_CASE("relations: wrappers, peers and job-wide errors are marked", "[phases][relations]") {
  const auto& rel = shipped();
  Symptom wrapper = sym("nccl.system_error", "n1", SubDomain::kSystemSoftware, Role::kCascade, 20, Severity::kError, "nccl");
  wrapper.fallback_root = true;
  Symptom detail = sym("nccl.shm_alloc_failed", "n1", SubDomain::kSystemSoftware, Role::kRoot, 19, Severity::kError, "nccl");
  Symptom ib = sym("nccl.ib_completion_error", "n2", SubDomain::kNetwork, Role::kCascade, 21, Severity::kError, "infiniband");
  ib.fields["peer"] = "10.0.0.1<4000>";
  auto items = scope(job(), {wrapper, detail, ib}, rel, {});
  applyRelations(items, rel);
  CHECK(items[1].wrapper);
  CHECK(items[1].because == "generic wrapper; the detail is nccl.shm_alloc_failed on n1 [causality: nccl-generic-wrapper]");
  CHECK(items[2].peer_field == "peer");
  CHECK(items[2].peer_relation == "transport-error-names-its-peer");
  CHECK(items[0].job_wide_relation == "same-error-on-every-node");
}

TEST_CASE("candidates: roots, else fallback evidence, never a wrapper", "[phases][candidates]") {
  std::vector<Item> items{item(sym("nccl.remote_error", "n1", SubDomain::kNetwork, Role::kCascade, 1)),
                          item(sym("nccl.system_error", "n1", SubDomain::kSystemSoftware, Role::kCascade, 2))};
  items[0].s.fallback_root = items[1].s.fallback_root = true;
  items[1].wrapper = true;
  auto c = candidates(items);
  CHECK(c.fallback);
  CHECK(c.roots == std::vector<size_t>{0});
  CHECK(c.wrappers.empty());
  items[0].s.fallback_root = false;
  c = candidates(items);
  CHECK(c.roots.empty());
  CHECK(c.wrappers == std::vector<size_t>{1});
  items.push_back(item(sym("xid.79", "n2", SubDomain::kHardware, Role::kRoot, 3)));
  c = candidates(items);
  CHECK(!c.fallback);
  CHECK(c.roots == std::vector<size_t>{2});
}

TEST_CASE("scoring: anchor, same incident, competitors, downstream", "[phases][scoring]") {
  std::vector<Item> items{item(sym("cuda.ecc_uncorrectable", "n1", SubDomain::kHardware, Role::kRoot, 10)),
                          item(sym("xid.48", "n1", SubDomain::kHardware, Role::kRoot, 11)),
                          item(sym("kernel.nfs_not_responding", "n2", SubDomain::kInfrastructure, Role::kRoot, 30)),
                          item(sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 40)),
                          item(sym("kernel.soft_lockup", "n4", SubDomain::kSystemSoftware, Role::kRoot, 500))};
  items[0].s.source_kind = SourceKind::kApplication;  // the application's echo of the DBE
  items[0].s.symptom = items[1].s.symptom = "gpu_ecc_dbe";
  Candidates c{{0, 1, 2, 3, 4}, false, {}};
  auto sc = score(items, c, {{"xid.48", 50}, {"cuda.ecc_uncorrectable", 30}}, {});
  CHECK(sc.anchor == 1);  // the driver's report of the same incident beats the echo
  CHECK(sc.same == std::vector<size_t>{0, 3});
  CHECK(sc.competitors == std::vector<size_t>{2});
  CHECK(sc.downstream == std::vector<size_t>{4});  // 489 s later: outside the window
  // A root of another domain at an unknown time on another node is not excluded by any window.
  items[4].s.time_known = false;
  sc = score(items, c, {}, {});
  CHECK(sc.competitors == std::vector<size_t>{2, 4});
  // Fallback evidence: the most specific kind anchors, nothing competes.
  c.fallback = true;
  sc = score(items, c, {{"xid.79", 99}}, {});
  CHECK(sc.anchor == 3);
  CHECK(sc.competitors.empty());
}

TEST_CASE("decision: given the candidates, the outcome", "[phases][decision]") {
  std::vector<Item> items{item(sym("xid.48", "n1", SubDomain::kHardware, Role::kRoot, 10)),
                          item(sym("kernel.nfs_not_responding", "n2", SubDomain::kInfrastructure, Role::kRoot, 30))};
  Candidates c{{0, 1}, false, {}};
  Scored sc;
  sc.anchor = 0;
  sc.competitors = {1};
  auto d = decide(job(), items, c, sc, {});
  CHECK(d.outcome == Outcome::kAmbiguous);
  CHECK(d.sub_domain == SubDomain::kAmbiguous);
  CHECK_THAT(d.explanation, Catch::Contains("[phase: decision]"));
  sc.competitors.clear();
  d = decide(job(), items, c, sc, {});
  CHECK(d.outcome == Outcome::kAttributed);
  CHECK(d.sub_domain == SubDomain::kHardware);
  // A cancelled job with fallback evidence only: no cause.
  c.fallback = true;
  CHECK(decide(job("CANCELLED by 0"), items, c, sc, {}).outcome == Outcome::kNone);
  CHECK(decide(job("TIMEOUT"), items, c, sc, {}).outcome == Outcome::kNone);
  // Nothing but wrappers: unattributed, naming the plausible domains.
  items[1].wrapper = true;
  items[1].wrapper_relation = "nccl-generic-wrapper";
  items[1].plausible = {SubDomain::kSystemSoftware, SubDomain::kNetwork};
  Candidates w{{}, false, {1}};
  d = decide(job(), items, w, std::nullopt, {});
  CHECK(d.outcome == Outcome::kUnattributed);
  CHECK_THAT(d.explanation, Catch::Contains("network, system_software") && Catch::Contains("nccl-generic-wrapper"));
  // More suspect nodes than the threshold: systemic.
  std::vector<Item> many;
  Scored all;
  for (int n = 0; n < 5; ++n) {
    many.push_back(item(sym("kernel.ib_port_down", "n" + std::to_string(n), SubDomain::kNetwork, Role::kRoot, 1)));
    if (n) all.same.push_back(n);
  }
  CorrelatorOptions o;
  o.systemic_threshold = 4;
  CHECK(decide(job("FAILED", 5), many, {{0, 1, 2, 3, 4}, false, {}}, all, o).outcome == Outcome::kSystemic);
}

TEST_CASE("decision: the same error on every node, or naming ranks on several, is the job's", "[phases][decision]") {
  auto exc = [](const std::string& node) {
    Item it = item(sym("python.exception", node, SubDomain::kApplication, Role::kRoot, 5));
    it.job_wide_relation = "same-error-on-every-node";
    return it;
  };
  std::vector<Item> items{exc("n1"), exc("n2"), exc("n3")};
  Scored sc;
  Candidates c{{0, 1, 2}, false, {}};
  CHECK(!decide(job(), items, c, sc, {}).job_wide);  // n4 did not fail that way
  items.push_back(exc("n4"));
  c.roots.push_back(3);
  auto d = decide(job(), items, c, sc, {});
  CHECK(d.job_wide);
  auto b = blame(job(), items, c, sc, d, {});
  CHECK(b.responsible.empty());
  CHECK_THAT(b.explanation, Catch::Contains("[causality: same-error-on-every-node]"));
  // One line naming ranks that live on several nodes (8 per node here).
  JobInfo j = job();
  j.ntasks_per_node = 8;
  deriveRanks(j);
  Item ranks = exc("n1");
  ranks.s.fields["ranks"] = "0-3,12,30";
  d = decide(j, {ranks}, {{0}, false, {}}, Scored{}, {});
  CHECK(d.job_wide);
}

TEST_CASE("blame: peers, one node, ambiguity, application", "[phases][blame]") {
  Item a = item(sym("nccl.ib_completion_error", "n1", SubDomain::kNetwork, Role::kRoot, 5));
  a.s.fields["peer"] = "10.0.0.3<4791>";
  a.peer_field = "peer";
  a.peer_relation = "transport-error-names-its-peer";
  Item b = a;
  b.s.node = "n2";
  std::vector<Item> items{a, b};
  Candidates c{{0, 1}, true, {}};
  Scored sc;
  sc.same = {1};
  Decision d;
  d.outcome = Outcome::kAttributed;
  d.sub_domain = SubDomain::kNetwork;
  CorrelatorOptions o;
  o.node_facts["n3"].addresses = {"10.0.0.3"};
  auto bl = blame(job(), items, c, sc, d, o);
  CHECK(nodesOf(bl.responsible) == std::vector<std::string>{"n3"});
  CHECK_THAT(bl.explanation, Catch::Contains("[causality: transport-error-names-its-peer]"));
  // Named by host name (NCCL prints "gpu-b17<40218>"), or by an EC2 host name that spells it.
  items[0].s.fields["peer"] = items[1].s.fields["peer"] = "n4<40218>";
  CHECK(nodesOf(blame(job(), items, c, sc, d, {}).responsible) == std::vector<std::string>{"n4"});
  JobInfo ec2 = job();
  ec2.nodes = {"ip-10-0-0-1", "ip-10-0-0-3"};
  items[0].s.node = "ip-10-0-0-1";
  items[1].s.node = "ip-10-0-0-1";
  items[0].s.fields["peer"] = items[1].s.fields["peer"] = "10.0.0.3:4791";
  CHECK(nodesOf(blame(ec2, items, c, sc, d, {}).responsible) == std::vector<std::string>{"ip-10-0-0-3"});
  // No peer: all the evidence on one node's own log names it, at low confidence.
  Item local = item(sym("kernel.mlx5_ib_wc_error", "n2", SubDomain::kNetwork, Role::kRoot, 5));
  bl = blame(job(), {local}, {{0}, true, {}}, Scored{}, d, {});
  REQUIRE(bl.responsible.size() == 1);
  CHECK(bl.responsible[0].node == "n2");
  CHECK(bl.responsible[0].confidence == Approx(0.4));
  // From a rank log: placed through the rank layout it names no node; named by the line's own
  // host prefix (NCCL's host:pid:tid) it does.
  local.s.source_kind = SourceKind::kApplication;
  CHECK(blame(job(), {local}, {{0}, true, {}}, Scored{}, d, {}).responsible.empty());
  local.s.fields["nccl_host"] = "n2";
  CHECK(nodesOf(blame(job(), {local}, {{0}, true, {}}, Scored{}, d, {}).responsible) == std::vector<std::string>{"n2"});
  // Ambiguous: one responsible per candidate node, at even confidence.
  std::vector<Item> two{item(sym("xid.48", "n1", SubDomain::kHardware, Role::kRoot, 1)),
                        item(sym("kernel.nfs_not_responding", "n2", SubDomain::kInfrastructure, Role::kRoot, 2))};
  Scored amb;
  amb.competitors = {1};
  Decision ad;
  ad.outcome = Outcome::kAmbiguous;
  bl = blame(job(), two, {{0, 1}, false, {}}, amb, ad, {});
  CHECK(nodesOf(bl.responsible) == std::vector<std::string>{"n1", "n2"});
  CHECK(bl.responsible[0].confidence == Approx(0.5));
}

TEST_CASE("history: a weak verdict on a repeat offender gains confidence and says so", "[phases][history]") {
  Blame b;
  b.responsible = {{"n2", "", 0.4}, {"n3", "", 0.9}};
  b.explanation = "x.";
  CorrelatorOptions o;
  o.node_history["n2"] = {3, 7 * 86400 * kSec, {"41", "40", "39", "38"}};
  o.node_history["n3"] = {5, 7 * 86400 * kSec, {"41"}};
  applyHistory(b, o);
  CHECK(b.responsible[0].confidence == Approx(0.6));
  CHECK(b.responsible[1].confidence == Approx(0.9));  // strong verdicts are left alone
  CHECK_THAT(b.explanation, Catch::Contains("n2 is a repeat offender: named in 3 other failed job(s) in the last 7 day(s) (41, 40, 39)"));
  CHECK_THAT(b.explanation, !Catch::Contains("n3 is"));
  // One earlier failure is not a pattern.
  Blame once;
  once.responsible = {{"n2", "", 0.4}};
  o.node_history["n2"].failures = 1;
  applyHistory(once, o);
  CHECK(once.responsible[0].confidence == Approx(0.4));
}

TEST_CASE("chain: grouped by rule and role, in time order, each saying why", "[phases][chain]") {
  std::vector<Item> items{item(sym("xid.79", "n3", SubDomain::kHardware, Role::kRoot, 10)),
                          item(sym("nccl.remote_error", "n1", SubDomain::kNetwork, Role::kCascade, 12)),
                          item(sym("nccl.remote_error", "n2", SubDomain::kNetwork, Role::kCascade, 13))};
  items[0].because = "the earliest root symptom [phase: scoring]";
  items[1].because = items[2].because = "consequence of xid.79 on n3 [causality: collective-errors-after-a-root]";
  items[1].s.count = 4;
  auto c = chain(items);
  REQUIRE(c.size() == 2);
  CHECK(c[1].count == 5);
  CHECK(c[1].nodes == std::vector<std::string>{"n1", "n2"});
  CHECK(c[1].because == "consequence of xid.79 on n3 [causality: collective-errors-after-a-root]");
  items[1].because.clear();
  CHECK(chain({items[1]})[0].because == "cascade as its rule says [rule: nccl.remote_error]");
}

// Property: any two roots of different domains on different nodes within the causal window —
// same second or not, from any pair of sources, either order, timed or not — give `ambiguous`
// with both candidates, unless a shipped causality relation links them (then it names it).
TEST_CASE("independent roots in different domains on different nodes are ambiguous (generated pairs)",
          "[phases][property]") {
  RuleSet rules;
  rules.relations = shipped();
  const std::vector<std::pair<SubDomain, std::string>> kinds = {
      {SubDomain::kHardware, "gpu_memory"},     {SubDomain::kNetwork, "infiniband"},
      {SubDomain::kSystemSoftware, "driver"},   {SubDomain::kInfrastructure, "storage"},
      {SubDomain::kApplication, "gpu_memory_usage"}, {SubDomain::kApplication, "python"}};
  const std::vector<SourceKind> sources = {SourceKind::kKernel, SourceKind::kJournal, SourceKind::kApplication,
                                           SourceKind::kFabricManager};
  std::mt19937 rng(20261203);
  std::uniform_int_distribution<int> pick_offset(0, 5);
  const double offsets[] = {0, 0, 0.4, 3, 30, 59};  // the same second is the commonest case
  int cases = 0, ambiguous = 0, linked = 0;
  for (size_t a = 0; a < kinds.size(); ++a)
    for (size_t b = 0; b < kinds.size(); ++b) {
      if (kinds[a].first == kinds[b].first) continue;
      for (auto sa : sources)
        for (auto sb : sources)
          for (int untimed = 0; untimed < 3; ++untimed) {
            double dt = offsets[pick_offset(rng)];
            Symptom x = sym("root.a", "n1", kinds[a].first, Role::kRoot, 100, Severity::kError, kinds[a].second);
            Symptom y = sym("root.b", "n2", kinds[b].first, Role::kRoot, 100 + dt, Severity::kCritical, kinds[b].second);
            x.source_kind = sa;
            y.source_kind = sb;
            if (untimed == 1) x.time_known = false;
            if (untimed == 2) y.time_known = false;
            // Cascade around them changes nothing.
            Symptom noise = sym("nccl.remote_error", "n3", SubDomain::kNetwork, Role::kCascade, 101, Severity::kError, "nccl");
            auto d = correlate(job(), {x, y, noise}, &rules);
            ++cases;
            // The one shipped relation that links roots on different nodes: a generic exception
            // (category python) after, or within 5 s before, a fault in another domain.
            auto isExc = [](const Symptom& s) { return s.category == "python"; };
            bool link = (isExc(x) && !isExc(y) && y.sub_domain != SubDomain::kApplication &&
                         (!x.time_known || !y.time_known || x.first_ns + 5 * kSec >= y.first_ns)) ||
                        (isExc(y) && !isExc(x) && x.sub_domain != SubDomain::kApplication);
            INFO(subDomainName(x.sub_domain) << "/" << x.category << " vs " << subDomainName(y.sub_domain) << "/"
                 << y.category << " dt=" << dt << " untimed=" << untimed << " sources " << int(sa) << "," << int(sb)
                 << ": " << d.explanation);
            if (link) {
              ++linked;
              CHECK(d.sub_domain != SubDomain::kAmbiguous);
              bool named = false;
              for (const auto& e : d.chain)
                named |= e.because.find("[causality: exception-after-fault-anywhere]") != std::string::npos;
              CHECK(named);
            } else {
              ++ambiguous;
              CHECK(d.sub_domain == SubDomain::kAmbiguous);
              CHECK(nodesOf(d.responsible) == std::vector<std::string>{"n1", "n2"});
              CHECK(d.candidates.size() == 2);
            }
          }
    }
  CHECK(cases == 28 * 16 * 3);
  CHECK(ambiguous > 0);
  CHECK(linked > 0);
}

// Phases 6 and 7 (blame, history, chain) and the runner of causality examples.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <set>
#include <string_view>
#include <unordered_map>

#include "common/correlator_phases.h"

namespace faultline::common::phases {

namespace {

std::string nameOf(const Symptom& s) { return s.summary.empty() ? s.symptom : s.summary; }

std::string joinNodes(const std::vector<ResponsibleNode>& r) {
  std::string out;
  for (const auto& n : r) out += (out.empty() ? "" : ", ") + n.node;
  return out;
}

// "10.1.2.3<4567>", "10.1.2.3:4567", "[fe80::1]:4567", "gpu-b17<40218>" -> the address or name.
std::string peerAddress(std::string peer) {
  peer = peer.substr(0, peer.find('<'));
  if (!peer.empty() && peer.front() == '[') return peer.substr(1, peer.find(']') - 1);
  if (std::count(peer.begin(), peer.end(), ':') == 1) peer = peer.substr(0, peer.find(':'));
  while (!peer.empty() && std::strchr(",;.)", peer.back())) peer.pop_back();
  return peer;
}

// Host names that spell their address ("ip-10-1-2-3" on EC2) name it too.
std::string addressInHostName(const std::string& node) {
  std::string s = node.substr(0, node.find('.'));
  if (s.rfind("ip-", 0) != 0) return "";
  s = s.substr(3);
  std::replace(s.begin(), s.end(), '-', '.');
  return std::count(s.begin(), s.end(), '.') == 3 ? s : "";
}

// The job's nodes that the peer-naming symptoms name as their far end (through node facts'
// addresses, host names that spell an address, and the job's host names themselves), each with
// the nodes that named it.
std::map<std::string, std::set<std::string>> peerNodes(const std::vector<Item>& items, const std::vector<size_t>& which,
                                const JobInfo& job, const CorrelatorOptions& o) {
  std::map<std::string, std::string> node_of;
  for (const auto& n : job.nodes) {
    node_of[n] = n;
    node_of[n.substr(0, n.find('.'))] = n;
    if (auto a = addressInHostName(n); !a.empty()) node_of[a] = n;
  }
  for (const auto& [node, facts] : o.node_facts)
    for (const auto& a : facts.addresses) node_of[a] = node;
  std::map<std::string, std::set<std::string>> out;
  for (size_t i : which) {
    const Item& it = items[i];
    if (it.peer_field.empty()) continue;
    std::string peer = peerAddress(it.s.field(it.peer_field));
    auto f = node_of.find(peer);
    if (f == node_of.end()) f = node_of.find(peer.substr(0, peer.find('.')));
    if (f != node_of.end() && f->second != it.s.node) out[f->second].insert(it.s.node);
  }
  return out;
}

// A rank log line that names its own host (NCCL's "gpu-a01:12345:12399 [3]" prefix) is placed by
// the line, not by a rank-to-node layout.
bool lineNamesNode(const Symptom& s) {
  for (const char* key : {"nccl_host", "host"}) {
    const std::string& h = s.field(key);
    if (!h.empty() && h.substr(0, h.find('.')) == s.node.substr(0, s.node.find('.'))) return true;
  }
  return false;
}

// The message itself names the node it is about (a rule's node template read it from the line:
// Open MPI's "Local host:", a launcher's "on node X"), or a launcher's report placed it there.
bool placedByLine(const Item& it) {
  if (it.located) return true;
  const std::string shortNode = it.s.node.substr(0, it.s.node.find('.'));
  for (const auto& [key, value] : it.s.fields) {
    if (key == "host" || key == "nccl_host" || value.empty()) continue;
    const bool names_node = key == "node" || (key.size() > 5 && (key.ends_with("_node") || key.ends_with("_host")));
    if (names_node && value.substr(0, value.find('.')) == shortNode) return true;
  }
  return false;
}

// A communication library's report: every member of the collective fails the same set-up or
// transfer, whichever end's part or software is at fault.
bool collectiveReport(const Symptom& s) {
  static constexpr std::array<std::string_view, 12> kCategories{
      "nccl", "nvswitch", "nvlink", "imex", "fabric_manager", "ucx", "efa", "roce", "infiniband", "hca", "mpi", "libfabric"};
  return std::find(kCategories.begin(), kCategories.end(), s.category) != kCategories.end();
}

// A transport's report of a transfer between nodes failing (an IB or RoCE queue pair, EFA, UCX, an
// MPI transport; network, not a node's own limit): a job that prints one has a far end on another
// node.
bool interNodeReport(const Symptom& s) {
  static constexpr std::array<std::string_view, 6> kCategories{"infiniband", "roce", "efa", "ucx", "mpi", "libfabric"};
  return s.sub_domain == SubDomain::kNetwork &&
         std::find(kCategories.begin(), kCategories.end(), s.category) != kCategories.end();
}

Blame fallbackBlame(const JobInfo& job, const std::vector<Item>& items, const Scored& sc, const CorrelatorOptions& o) {
  Blame b;
  const Item& a = items[sc.anchor];
  std::vector<size_t> which{sc.anchor};
  which.insert(which.end(), sc.same.begin(), sc.same.end());
  std::map<std::string, std::set<std::string>> peers = peerNodes(items, which, job, o);
  std::set<std::string> reporters, evidence_nodes;
  for (size_t i : which)
    if (!items[i].s.node.empty()) reporters.insert(items[i].s.node);
  for (const auto& it : items)
    if (!it.s.node.empty() && (it.eff == Role::kRoot || it.eff == Role::kCascade)) evidence_nodes.insert(it.s.node);
  // A far end named by two or more reporters is the end they share; one reporter and the peer it
  // names across a path that did not answer are its two ends, neither shown to be the broken one.
  // A peer that answered (refused, closed, a lost daemon, a failed node) is named by one reporter
  // too; one that did not answer (retry exceeded, unresponsive: rule field far_end=path) needs two.
  const bool path = a.s.field("far_end") == "path";
  std::vector<std::string> shared;
  for (const auto& [peer, by] : peers)
    if (by.size() >= (path ? 2u : 1u)) shared.push_back(peer);
  // Fault evidence (not the teardown of the kill) from one node only, or a one-node job, names
  // that node, unless the evidence itself points elsewhere or reaches the node only through a
  // rank-to-node mapping of a job-wide log.
  const bool local = a.peer_field.empty() && (a.s.source_kind != SourceKind::kApplication || lineNamesNode(a.s));
  const bool one_node = job.nodes.size() == 1 || (local && evidence_nodes.size() == 1 && reporters.size() == 1);
  auto named = std::find_if(which.begin(), which.end(), [&](size_t i) { return !items[i].peer_relation.empty(); });
  if (!shared.empty() && shared.size() <= 2) {
    for (const auto& n : shared) b.responsible.push_back({n, "", 0.5});
    b.explanation = fmt::format("No root symptom was found; {} on {} node(s) names {} as the far end [causality: {}].",
                                a.s.symptom, reporters.size(), joinNodes(b.responsible), items[*named].peer_relation);
  } else if (path && !peers.empty() && shared.empty() && job.nodes.size() > 1) {
    std::set<std::string> ends = reporters;
    for (const auto& [peer, by] : peers) ends.insert(peer);
    b.explanation = fmt::format("No root symptom was found; {} lies between {} and no end shows a fault of its own, "
                                "so no node is named [causality: {}].",
                                a.s.symptom, fmt::join(ends, " and "), items[*named].peer_relation);
  } else if (one_node && !a.s.node.empty() && job.nodes.size() <= 1 && a.s.source_kind == SourceKind::kApplication &&
             interNodeReport(a.s)) {
    b.explanation = fmt::format("No root symptom was found; {} is a transfer between nodes failing, but only {}'s logs "
                                "are known: the far end is not in them, so no node is named [phase: blame].",
                                nameOf(a.s), a.s.node);
  } else if (one_node && !a.s.node.empty()) {
    if (auto unread = unreadNodes(job, items, a.s.node, o); !unread.empty()) {
      b.explanation = fmt::format("No root symptom was found; the evidence ({}) is only on {}, but {} had no logs for "
                                  "the window, so the fault is not localized [phase: blame].",
                                  nameOf(a.s), a.s.node, fmt::join(unread, ", "));
      return b;
    }
    b.responsible.push_back({a.s.node, a.s.device, 0.4});
    b.explanation = fmt::format("No root symptom was found; {} is the most specific evidence and all of it is on {} "
                                "[phase: blame].", nameOf(a.s), a.s.node);
  } else {
    b.explanation = fmt::format("No root symptom was found; {} on {} node(s) points at the {} domain, not at a node "
                                "[phase: blame].", a.s.symptom, reporters.size(), subDomainName(a.s.sub_domain));
  }
  return b;
}

Blame rootBlame(const JobInfo& job, const std::vector<Item>& items, const Scored& sc, bool fallback,
                const CorrelatorOptions& o) {
  Blame b;
  const Symptom& a = items[sc.anchor].s;
  // A communication library's report from the job's own output (an NCCL WARN, an MPI transport
  // error) is the node's own only when the job's other nodes were read: the same report may stand
  // in their missing logs, printed for a cause on either side. A kernel's, the journal's or Fabric
  // Manager's record, a GPU's own hardware error, a report that names one of the node's parts (a
  // port, a GPU) and a message that names the node it is about belong to that node.
  if (a.source_kind == SourceKind::kApplication && a.sub_domain != SubDomain::kApplication &&
      a.sub_domain != SubDomain::kHardware && a.device.empty() && collectiveReport(a) && !placedByLine(items[sc.anchor])) {
    if (auto unread = unreadNodes(job, items, a.node, o); !unread.empty()) {
      b.explanation = fmt::format("{} on {} is the earliest root symptom, but {} had no logs for the window and may "
                                  "show the same, so the fault is not localized [phase: blame].",
                                  nameOf(a), a.node.empty() ? "an unknown node" : a.node, fmt::join(unread, ", "));
      return b;
    }
  }
  if (a.sub_domain == SubDomain::kApplication) {
    // The rank that failed first is responsible; others failing the same way followed it.
    if (!a.node.empty()) b.responsible.push_back({a.node, a.device, fallback ? 0.4 : 0.8});
    b.explanation = fmt::format("The first failure was in the application on {}: {} [phase: blame].",
                                a.node.empty() ? "an unknown node" : a.node, a.summary);
    return b;
  }
  // A service the node depends on (the scheduler, storage) fails on a node without the node
  // being at fault more often than its own parts and software do (docs/taxonomy.md, the
  // calibration table): such a node is likely, not strong.
  const double base = a.sub_domain == SubDomain::kInfrastructure ? 0.6 : 0.9;
  b.responsible.push_back({a.node, a.device, base});
  for (size_t r : sc.same) {
    const Symptom& s = items[r].s;
    auto has = [&](const ResponsibleNode& n) { return n.node == s.node; };
    if (!s.node.empty() && std::none_of(b.responsible.begin(), b.responsible.end(), has))
      b.responsible.push_back({s.node, s.device, std::min(base, 0.7)});
  }
  b.explanation = fmt::format("{} on {} is the earliest root symptom; the rest of the chain follows from it [phase: blame].",
                              nameOf(a), joinNodes(b.responsible));
  return b;
}

// A lasting fault from before the job's start (a persists relation kept it): the job inherited
// it; the event itself belongs to whatever ran on the node when it happened.
void noteInherited(Blame& b, const JobInfo& job, const Item& anchor) {
  if (!anchor.background || !anchor.s.time_known || job.start_ns == 0 || anchor.s.first_ns >= job.start_ns) return;
  const int64_t before_s = (job.start_ns - anchor.s.first_ns) / 1'000'000'000;
  b.explanation += fmt::format(" It happened {} before this job started and lasted into it: an inherited fault, "
                               "not an event of this job [phase: scope].",
                               before_s >= 3600 ? fmt::format("{} h {} min", before_s / 3600, before_s % 3600 / 60)
                               : before_s >= 60 ? fmt::format("{} min", before_s / 60)
                                                : fmt::format("{} s", before_s));
}

}  // namespace

std::vector<std::string> unreadNodes(const JobInfo& job, const std::vector<Item>& items, const std::string& node,
                                     const CorrelatorOptions& o) {
  std::vector<std::string> out;
  if (!o.covered_nodes) return out;
  std::set<std::string> read = *o.covered_nodes;
  for (const auto& it : items) read.insert(it.s.node);
  for (const auto& n : job.nodes)
    if (n != node && !read.count(n)) out.push_back(n);
  return out;
}

Blame blame(const JobInfo& job, const std::vector<Item>& items, const Candidates& c, const Scored& sc,
            const Decision& d, const CorrelatorOptions& o) {
  Blame b;
  const Symptom& a = items[sc.anchor].s;
  if (d.outcome == Outcome::kAmbiguous) {
    // Each candidate names its node, unless it is a service's fault the node only reported (a
    // storage server not answering): that candidate stays, its node is not named.
    auto service = [&](size_t i) { return items[i].elsewhere == RelationEffect::kService && !items[i].elsewhere_relation.empty(); };
    std::set<std::string> seen;
    if (!service(sc.anchor)) {
      seen.insert(a.node);
      b.responsible.push_back({a.node, a.device, 0.5});
    }
    for (size_t r : sc.competitors)
      if (!service(r) && seen.insert(items[r].s.node).second)
        b.responsible.push_back({items[r].s.node, items[r].s.device, 0.5});
  } else if (d.outcome == Outcome::kSystemic) {
  } else if (d.job_wide) {
    // The owner is the anchor's domain: the job's own configuration, data or launch
    // (application), or a setting or service every node shares (the platform's, operations').
    b.explanation = fmt::format("Every node of the job failed the same way: {}. The cause is shared by the whole job "
                                "({}), not a node's, so no node is named [causality: {}].",
                                nameOf(a),
                                a.sub_domain == SubDomain::kApplication ? "its own configuration, data or launch"
                                                                        : "a configuration or service all its nodes share",
                                d.job_wide_relation);
  } else if (const Item& an = items[sc.anchor];
             !an.elsewhere_relation.empty() &&
             (an.elsewhere == RelationEffect::kService || job.nodes.size() != 1 || a.sub_domain != SubDomain::kApplication)) {
    // The reporting node only saw the outage, is one end of a path, or is the first to show a
    // configuration or software its peers share; draining it fixes nothing. In a one-node job the
    // far end of a path or the shared software still lies outside the node (a peer the posted logs
    // do not show, a release every host runs); only the job's own application is the node's.
    const char* where = an.elsewhere == RelationEffect::kService
                            ? "a fault of a service outside the job's nodes, which only reported it"
                            : "a fault between nodes or of a configuration or software they share, and no node is "
                              "shown to be the broken one";
    b.explanation = fmt::format("{} is {}: no node is named [causality: {}].", nameOf(a), where, an.elsewhere_relation);
  } else if (c.fallback && a.sub_domain != SubDomain::kApplication) {
    b = fallbackBlame(job, items, sc, o);
  } else {
    b = rootBlame(job, items, sc, c.fallback, o);
    noteInherited(b, job, items[sc.anchor]);
  }
  b.responsible.erase(std::remove_if(b.responsible.begin(), b.responsible.end(),
                                     [](const ResponsibleNode& r) { return r.node.empty(); }),
                      b.responsible.end());
  return b;
}

void applyHistory(Blame& b, const CorrelatorOptions& o) {
  for (auto& r : b.responsible) {
    auto h = o.node_history.find(r.node);
    if (h == o.node_history.end() || r.confidence >= 0.6 || h->second.failures < o.repeat_offender_failures) continue;
    r.confidence = std::min(0.7, r.confidence + 0.2);
    std::vector<std::string> jobs(h->second.jobs.begin(), h->second.jobs.begin() + std::min<size_t>(3, h->second.jobs.size()));
    b.explanation += fmt::format(" {} is a repeat offender: named in {} other failed job(s) in the last {} day(s) ({}), "
                                 "which raises the confidence [phase: history].",
                                 r.node, h->second.failures, std::max<int64_t>(1, h->second.window_ns / 86'400'000'000'000),
                                 fmt::join(jobs, ", "));
  }
}

std::vector<ChainEntry> chain(const std::vector<Item>& items) {
  struct Group {
    ChainEntry e;
    std::vector<bool> nodes;  // by node id
  };
  std::vector<Group> groups;
  std::unordered_map<std::string_view, std::array<int32_t, 4>> by_rule;  // rule -> group per role
  std::unordered_map<std::string_view, uint32_t> node_ids;
  std::vector<std::string_view> node_names;
  // items are in earlier() order: the first of a group is its earliest.
  for (const Item& it : items) {
    auto [r, new_rule] = by_rule.try_emplace(it.s.rule_id);
    if (new_rule) r->second.fill(-1);
    int32_t& g = r->second.at(static_cast<size_t>(it.eff));
    if (g < 0) {
      g = static_cast<int32_t>(groups.size());
      ChainEntry e{it.s.first_ns, it.s.time_known, it.s.node, it.s.device, it.s.symptom, it.s.rule_id, it.eff,
                   it.s.sub_domain, 0, {}, it.s.first_ns, it.s.last_ns,
                   it.s.evidence.empty() ? "" : it.s.evidence.front(), it.s.summary, it.because};
      if (e.because.empty()) e.because = fmt::format("{} as its rule says [rule: {}]", roleName(it.eff), it.s.rule_id);
      groups.push_back({std::move(e), {}});
    }
    ChainEntry& e = groups[g].e;
    e.count += it.s.count;
    if (it.s.time_known) {
      if (!e.time_known) {
        e.time_known = true;
        e.first_ns = it.s.first_ns;
        e.last_ns = it.s.last_ns;
      }
      e.first_ns = std::min(e.first_ns, it.s.first_ns);
      e.last_ns = std::max(e.last_ns, it.s.last_ns);
    }
    if (!it.s.node.empty()) {
      auto [n, new_node] = node_ids.try_emplace(it.s.node, static_cast<uint32_t>(node_names.size()));
      if (new_node) node_names.push_back(it.s.node);
      auto& seen = groups[g].nodes;
      if (seen.size() <= n->second) seen.resize(node_names.size());
      seen[n->second] = true;
    }
  }
  std::vector<uint32_t> by_name(node_names.size());
  for (uint32_t k = 0; k < by_name.size(); ++k) by_name[k] = k;
  std::sort(by_name.begin(), by_name.end(), [&](uint32_t a, uint32_t b) { return node_names[a] < node_names[b]; });
  std::vector<ChainEntry> out;
  out.reserve(groups.size());
  for (auto& g : groups) {
    for (uint32_t k : by_name)
      if (k < g.nodes.size() && g.nodes[k]) g.e.nodes.emplace_back(node_names[k]);
    out.push_back(std::move(g.e));
  }
  std::sort(out.begin(), out.end(), [](const ChainEntry& a, const ChainEntry& b) {
    if (a.time_known != b.time_known) return a.time_known;
    if (a.time_known && a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
    if (a.role != b.role) return a.role < b.role;
    return a.rule_id < b.rule_id;
  });
  return out;
}

std::map<std::string, std::string> runRelationExample(const Relation& relation, const RelationExample& ex) {
  constexpr int64_t kBase = 1'700'000'000LL * 1'000'000'000;  // example times are offsets from here
  JobInfo job;
  job.job_id = "example";
  job.state = "FAILED";
  job.start_ns = kBase + ex.job_start_offset_ns;
  job.end_ns = kBase + 3600LL * 1'000'000'000;
  std::vector<Symptom> symptoms;
  std::set<std::string> nodes(ex.job_nodes.begin(), ex.job_nodes.end());
  for (const auto& e : ex.symptoms) {
    Symptom s = e.symptom;
    if (s.time_known) s.first_ns = s.last_ns = kBase + s.first_ns;
    s.fields["example_name"] = e.name;
    if (ex.job_nodes.empty() && !s.node.empty()) nodes.insert(s.node);
    symptoms.push_back(std::move(s));
  }
  job.nodes.assign(nodes.begin(), nodes.end());
  std::vector<Relation> one{relation};
  auto items = scope(job, symptoms, one, CorrelatorOptions{});
  applyRelations(items, one);
  std::map<std::string, std::string> out;
  for (const auto& e : ex.symptoms) out[e.name] = "dropped";
  for (const auto& it : items) {
    std::string effect = "none";
    if (it.because.find(fmt::format("[causality: {}]", relation.id)) != std::string::npos ||
        it.wrapper_relation == relation.id || it.peer_relation == relation.id || it.job_wide_relation == relation.id ||
        it.elsewhere_relation == relation.id)
      effect = relationEffectName(relation.effect);
    out[it.s.field("example_name")] = effect;
  }
  return out;
}

std::vector<std::string> checkRelationExamples(const std::vector<Relation>& relations) {
  std::vector<std::string> problems;
  for (const auto& r : relations)
    for (const auto& ex : r.examples) {
      auto got = runRelationExample(r, ex);
      for (const auto& [name, want] : ex.expect)
        if (got[name] != want)
          problems.push_back(fmt::format("{}:{}: relation {}: example symptom '{}' expected {}, got {}", r.file, ex.line,
                                         r.id, name, want, got[name]));
    }
  return problems;
}

}  // namespace faultline::common::phases

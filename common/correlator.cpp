#include "common/correlator.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace faultline::common {

namespace {

struct Item {
  Symptom s;
  Role eff;  // effective role after reasoning about the other symptoms
};

bool earlier(const Item& a, const Item& b) {
  if (a.s.time_known != b.s.time_known) return a.s.time_known;
  if (a.s.time_known && a.s.first_ns != b.s.first_ns) return a.s.first_ns < b.s.first_ns;
  if (a.s.severity != b.s.severity) return a.s.severity > b.s.severity;
  if (a.s.node != b.s.node) return a.s.node < b.s.node;
  return a.s.rule_id < b.s.rule_id;
}

Cause causeOf(const Symptom& s, const RuleSet* rules) {
  Cause c;
  c.rule_id = s.rule_id;
  c.symptom = s.symptom;
  c.category = s.category;
  c.summary = s.summary;
  c.node = s.node;
  c.device = s.device;
  c.time_ns = s.first_ns;
  c.time_known = s.time_known;
  c.evidence = s.evidence.empty() ? "" : s.evidence.front();
  c.sub_domain = s.sub_domain;
  c.fields = s.fields;
  if (rules)
    if (const Rule* r = rules->find(s.rule_id)) c.action = r->action;
  return c;
}

bool inWindow(const Symptom& s, const JobInfo& job, const CorrelatorOptions& o, Role role) {
  if (!s.time_known) return true;
  if (job.start_ns != 0) {
    int64_t pre = role == Role::kContext ? o.context_pre_start_ns : o.pre_start_ns;
    if (s.last_ns < job.start_ns - pre) return false;
  }
  if (job.end_ns != 0 && s.first_ns > job.end_ns + o.post_end_ns) return false;
  return true;
}

std::vector<ChainEntry> buildChain(const std::vector<Item>& items) {
  std::map<std::pair<std::string, Role>, ChainEntry> groups;
  std::map<std::pair<std::string, Role>, std::set<std::string>> nodes;
  std::vector<const Item*> sorted;
  for (const auto& it : items) sorted.push_back(&it);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Item* a, const Item* b) { return earlier(*a, *b); });
  for (const Item* it : sorted) {
    auto key = std::make_pair(it->s.rule_id, it->eff);
    auto [g, inserted] = groups.try_emplace(key);
    ChainEntry& e = g->second;
    if (inserted) {
      e.time_ns = it->s.first_ns;
      e.time_known = it->s.time_known;
      e.node = it->s.node;
      e.device = it->s.device;
      e.symptom = it->s.symptom;
      e.rule_id = it->s.rule_id;
      e.role = it->eff;
      e.sub_domain = it->s.sub_domain;
      e.first_ns = it->s.first_ns;
      e.last_ns = it->s.last_ns;
      e.evidence = it->s.evidence.empty() ? "" : it->s.evidence.front();
      e.summary = it->s.summary;
    }
    e.count += it->s.count;
    if (it->s.time_known) {
      if (!e.time_known) {
        e.time_known = true;
        e.first_ns = it->s.first_ns;
        e.last_ns = it->s.last_ns;
      }
      e.first_ns = std::min(e.first_ns, it->s.first_ns);
      e.last_ns = std::max(e.last_ns, it->s.last_ns);
    }
    if (!it->s.node.empty()) nodes[key].insert(it->s.node);
  }
  std::vector<ChainEntry> chain;
  for (auto& [key, e] : groups) {
    e.nodes.assign(nodes[key].begin(), nodes[key].end());
    chain.push_back(std::move(e));
  }
  std::stable_sort(chain.begin(), chain.end(), [](const ChainEntry& a, const ChainEntry& b) {
    if (a.time_known != b.time_known) return a.time_known;
    if (a.time_known && a.time_ns != b.time_ns) return a.time_ns < b.time_ns;
    if (a.role != b.role) return a.role < b.role;
    return a.rule_id < b.rule_id;
  });
  return chain;
}

std::string joinNodes(const std::vector<ResponsibleNode>& r) {
  std::string out;
  for (const auto& n : r) out += (out.empty() ? "" : ", ") + n.node;
  return out;
}

// A message that is a fault only on nodes with NVSwitches (Fabric Manager finding none to manage):
// a root there, context on a node known to have none, and with nothing known a cascade that may
// anchor only when nothing else does. The judgement is recorded in the symptom's fields.
Role judgeByNvswitch(Symptom& s, Role eff, const CorrelatorOptions& o, const std::set<std::string>& seen) {
  std::optional<bool> has;
  if (auto it = o.node_facts.find(s.node); it != o.node_facts.end()) has = it->second.nvswitch;
  if (seen.count(s.node)) has = true;
  if (!has) {
    s.fields["node_fact"] = "nvswitch unknown";
    s.fallback_root = true;
    return eff == Role::kRoot ? Role::kCascade : eff;
  }
  s.fields["node_fact"] = *has ? "node has NVSwitches" : "node has no NVSwitch";
  return *has ? eff : Role::kContext;
}

// Nodes of the job whose addresses the anchor's (and its kind's) `peer` fields name; the port
// ("10.1.2.3<4567>", "10.1.2.3:4567") is not part of the address.
std::set<std::string> peerNodes(const Item* anchor, const std::vector<Item*>& same, const CorrelatorOptions& o) {
  std::map<std::string, std::string> node_of_address;
  for (const auto& [node, facts] : o.node_facts)
    for (const auto& a : facts.addresses) node_of_address[a] = node;
  std::set<std::string> out;
  if (node_of_address.empty()) return out;
  auto add = [&](const Symptom& s) {
    std::string peer = s.field("peer");
    peer = peer.substr(0, peer.find('<'));
    if (std::count(peer.begin(), peer.end(), ':') == 1) peer = peer.substr(0, peer.find(':'));
    if (auto it = node_of_address.find(peer); it != node_of_address.end() && it->second != s.node)
      out.insert(it->second);
  };
  add(anchor->s);
  for (const Item* r : same) add(r->s);
  return out;
}

}  // namespace

Diagnosis correlate(const JobInfo& job, std::vector<Symptom> symptoms, const RuleSet* rules,
                    const CorrelatorOptions& o) {
  Diagnosis d;
  d.job_id = job.job_id;
  d.terminal_state = terminalStateOf(job.state);
  if (rules) d.ruleset_version = rules->version;

  std::set<std::string> job_nodes(job.nodes.begin(), job.nodes.end());
  // NVSwitch driver or SXid evidence on a node shows it has NVSwitches, whatever node.json says.
  std::set<std::string> nvswitch_seen;
  for (const auto& s : symptoms)
    if (s.category == "nvswitch" || s.rule_id.rfind("sxid.", 0) == 0) nvswitch_seen.insert(s.node);
  std::vector<Item> items;
  for (auto& s : symptoms) {
    Role eff = s.role;
    // The driver says so itself: "(caused by previous Xid 79)".
    if (eff == Role::kRoot && !s.field("prev_xid").empty()) eff = Role::kCascade;
    if (s.field("requires_node_fact") == "nvswitch") eff = judgeByNvswitch(s, eff, o, nvswitch_seen);
    // On a node known to have no NVSwitch, Fabric Manager giving up (service failed, aborted) is
    // the same non-event as the message that made it give up.
    else if (s.category == "fabric_manager" && eff == Role::kRoot && !nvswitch_seen.count(s.node))
      if (auto f = o.node_facts.find(s.node); f != o.node_facts.end() && f->second.nvswitch == false) {
        s.fields["node_fact"] = "node has no NVSwitch";
        eff = Role::kContext;
      }
    if (!inWindow(s, job, o, eff)) continue;
    if (!job_nodes.empty() && !s.node.empty() && !job_nodes.count(s.node)) {
      // Logs name hosts by FQDN or short name as they please: "gpu-a01.cluster" is gpu-a01.
      std::string short_name = s.node.substr(0, s.node.find('.'));
      auto it = std::find_if(job.nodes.begin(), job.nodes.end(), [&](const std::string& n) {
        return n == short_name || n.substr(0, n.find('.')) == short_name;
      });
      if (it == job.nodes.end()) continue;
      s.node = *it;
    }
    // A single-node job: evidence without a node (a rank log without rank prefixes) is its.
    if (s.node.empty() && job.nodes.size() == 1) s.node = job.nodes.front();
    items.push_back({std::move(s), eff});
  }
  std::stable_sort(items.begin(), items.end(), earlier);

  // Ranks die of any fault through an exception: application symptoms after (or, within clock
  // skew, just before) a root in another domain are its consequence.
  const Item* first_nonapp = nullptr;
  for (const auto& it : items)
    if (it.eff == Role::kRoot && it.s.sub_domain != SubDomain::kApplication) {
      first_nonapp = &it;
      break;
    }
  if (first_nonapp) {
    for (auto& it : items) {
      if (it.eff != Role::kRoot || it.s.sub_domain != SubDomain::kApplication) continue;
      bool after = !it.s.time_known || !first_nonapp->s.time_known ||
                   it.s.first_ns + o.clock_skew_ns >= first_nonapp->s.first_ns;
      if (after) it.eff = Role::kCascade;
    }
  }

  std::vector<Item*> roots;
  for (auto& it : items)
    if (it.eff == Role::kRoot) roots.push_back(&it);
  bool fallback = false;
  if (roots.empty()) {
    for (auto& it : items)
      if (it.s.fallback_root && it.s.sub_domain != SubDomain::kNone &&
          (it.eff == Role::kCascade || it.eff == Role::kTeardown))
        roots.push_back(&it);
    fallback = !roots.empty();
  }

  const std::string& ts = d.terminal_state;
  bool attribute = ts != "success" && ts != "preempted";
  // A job stopped from outside (cancelled, or killed at its time limit) with cascade-type evidence
  // only: that evidence is as likely the stop's echo or a hang's symptom as a cause.
  if ((ts == "cancelled" || ts == "timeout") && fallback) attribute = false;

  if (!attribute || roots.empty()) {
    if (ts == "success" || ts == "preempted" || ts == "cancelled") {
      d.sub_domain = SubDomain::kNone;
      d.explanation = ts == "success" ? "The job completed; nothing failed."
                      : ts == "preempted" ? "The scheduler preempted the job; no fault was involved."
                                          : "The job was cancelled and no fault preceded the cancel.";
    } else if (ts == "timeout") {
      // Collective timeouts before the limit mean a hang; what follows the kill at the limit
      // (workers dying with -9, connections closing) is teardown.
      const int64_t kill_ns = job.end_ns ? job.end_ns - o.clock_skew_ns : INT64_MAX;
      bool hang = std::any_of(items.begin(), items.end(), [&](const Item& it) {
        return it.eff == Role::kCascade && (!it.s.time_known || it.s.first_ns < kill_ns);
      });
      d.sub_domain = hang ? SubDomain::kUnattributed : SubDomain::kNone;
      d.explanation = hang ? "The job hit its time limit after collective timeouts, but no root cause was found."
                           : "The job ran until its time limit without any fault evidence.";
    } else if (ts == "node_fail") {
      d.sub_domain = SubDomain::kInfrastructure;
      d.explanation = "Slurm reports a node failure and the nodes' own logs hold no fault: node loss.";
      d.recommended_action = "Check the node's BMC/SEL and console for power or kernel problems.";
    } else if (ts == "out_of_memory") {
      d.sub_domain = SubDomain::kApplication;
      d.explanation = "Slurm reports the job exceeded its memory allocation.";
      d.recommended_action = "Raise the job's memory request or reduce host memory use (data loaders, pinned buffers).";
    } else {
      d.sub_domain = SubDomain::kUnattributed;
      d.explanation = "The job failed but its logs hold no evidence that decides the cause.";
      d.recommended_action = "Collect the rank logs and each node's kernel log and journal for the job's window.";
    }
    for (auto& it : items)
      if (it.eff == Role::kRoot) it.eff = Role::kContext;
    d.chain = buildChain(items);
    return d;
  }

  auto priorityOf = [&](const Item* it) {
    if (rules)
      if (const Rule* r = rules->find(it->s.rule_id)) return r->priority;
    return 0;
  };
  // One incident is often reported several times on a node within a moment (Xid 79 and "GPU
  // has fallen off the bus"; Xid 48 and CUDA's "uncorrectable ECC error"): the most specific
  // report (highest rule priority) represents it.
  // A driver's report beats the application's echo of it; a rule-level cause upstream of it
  // (PCIe AER before Xid 79) keeps its place because it is a different symptom from the kernel.
  Item* anchor = roots.front();
  if (fallback) {
    // Cascade-type evidence only: the most specific kind (highest priority) speaks loudest.
    for (Item* r : roots)
      if (priorityOf(r) > priorityOf(anchor)) anchor = r;
  } else {
    Item* first = anchor;
    for (Item* r : roots) {
      if (r == first || r->s.node != first->s.node || !r->s.time_known || !first->s.time_known) continue;
      if (r->s.first_ns > first->s.first_ns + o.clock_skew_ns) break;
      bool same_incident = r->s.symptom == anchor->s.symptom ||
                           (anchor->s.source_kind == SourceKind::kApplication &&
                            r->s.source_kind != SourceKind::kApplication);
      if (same_incident && priorityOf(r) > priorityOf(anchor)) anchor = r;
    }
  }
  const int64_t t0 = anchor->s.first_ns;
  auto within = [&](const Item* it) {
    if (!anchor->s.time_known || !it->s.time_known) return true;
    return it->s.first_ns <= t0 + o.causal_window_ns;
  };

  std::vector<Item*> same;        // same domain, inside the window
  std::vector<Item*> competitors; // other domain, other node, inside the window
  for (Item* r : roots) {
    if (r == anchor) continue;
    if (!within(r)) {
      r->eff = Role::kCascade;  // later than the causal window: downstream
      continue;
    }
    if (r->s.sub_domain == anchor->s.sub_domain) {
      same.push_back(r);
    } else if (r->s.node != anchor->s.node && r->s.severity >= Severity::kError && !fallback &&
               r->s.time_known && anchor->s.time_known) {
      competitors.push_back(r);
    } else {
      r->eff = Role::kCascade;  // same node, other domain: a consequence of the anchor
    }
  }
  // Only one candidate per other node matters for ambiguity.
  std::vector<Item*> others;
  std::set<std::string> other_nodes;
  for (Item* c : competitors)
    if (other_nodes.insert(c->s.node).second) others.push_back(c);

  auto action = [&](const Item* it) {
    if (rules)
      if (const Rule* r = rules->find(it->s.rule_id)) return r->action;
    return std::string();
  };

  if (!others.empty()) {
    d.sub_domain = SubDomain::kAmbiguous;
    d.candidates.push_back(causeOf(anchor->s, rules));
    d.responsible.push_back({anchor->s.node, anchor->s.device, 0.5});
    std::string actions = action(anchor);
    for (Item* c : others) {
      d.candidates.push_back(causeOf(c->s, rules));
      d.responsible.push_back({c->s.node, c->s.device, 0.5});
      std::string a = action(c);
      if (!a.empty()) actions += (actions.empty() ? "" : " | ") + a;
    }
    d.recommended_action = actions;
    d.explanation = fmt::format(
        "{} independent root causes in different domains within {} s: {}.", d.candidates.size(),
        o.causal_window_ns / 1000000000,
        fmt::join([&] {
          std::vector<std::string> v;
          for (const auto& c : d.candidates)
            v.push_back(fmt::format("{} on {} ({})", c.symptom, c.node, subDomainName(c.sub_domain)));
          return v;
        }(), "; "));
    d.chain = buildChain(items);
    return d;
  }

  d.sub_domain = anchor->s.sub_domain;
  d.cause = causeOf(anchor->s, rules);
  d.recommended_action = action(anchor);

  std::set<std::string> suspect_nodes;
  if (!anchor->s.node.empty()) suspect_nodes.insert(anchor->s.node);
  for (Item* r : same)
    if (!r->s.node.empty()) suspect_nodes.insert(r->s.node);

  if (anchor->s.sub_domain == SubDomain::kApplication) {
    // The rank that failed first is responsible, unless every node failed the same way.
    std::set<std::string> with_rule;
    for (const auto& it : items)
      if (it.s.rule_id == anchor->s.rule_id && !it.s.node.empty()) with_rule.insert(it.s.node);
    bool everywhere = job.nodes.size() > 1 && with_rule.size() >= job.nodes.size();
    if (!everywhere && !anchor->s.node.empty())
      d.responsible.push_back({anchor->s.node, anchor->s.device, fallback ? 0.4 : 0.8});
    for (Item* r : same)
      if (r->s.node != anchor->s.node) r->eff = Role::kCascade;
    d.explanation = everywhere
        ? fmt::format("Every node failed the same way: {}.", anchor->s.summary)
        : fmt::format("The first failure was in the application on {}: {}.",
                      anchor->s.node.empty() ? "an unknown node" : anchor->s.node, anchor->s.summary);
  } else if (suspect_nodes.size() > o.systemic_threshold) {
    d.systemic = true;
    d.explanation = fmt::format("{} nodes show {} root symptoms at once: a systemic problem, not one node.",
                                suspect_nodes.size(), subDomainName(anchor->s.sub_domain));
  } else if (fallback) {
    // Cascade-type evidence on the reporting nodes says the fault was elsewhere or in between:
    // naming the first reporter would be a guess. The peer those errors name is not, when its
    // address is known to be one of the job's nodes.
    std::set<std::string> peers = peerNodes(anchor, same, o);
    // Evidence from one node only (or a one-node job): that node is known even if the kind of
    // evidence is cascade-like — unless the evidence itself points elsewhere (a peer it names) or
    // reaches the node only through a rank-to-node mapping of a job-wide log.
    std::set<std::string> evidence_nodes;
    for (const auto& it : items)
      if (!it.s.node.empty() && it.eff != Role::kContext) evidence_nodes.insert(it.s.node);
    const bool local = anchor->s.field("peer").empty() && anchor->s.source_kind != SourceKind::kApplication;
    const bool one_node = job.nodes.size() == 1 || (local && evidence_nodes.size() == 1 && suspect_nodes.size() == 1);
    if (!peers.empty() && peers.size() <= 2) {
      for (const auto& n : peers) d.responsible.push_back({n, "", 0.5});
      d.explanation = fmt::format("No root symptom was found; {} on {} node(s) names the peer {} as the far end.",
                                  anchor->s.symptom, suspect_nodes.size(), joinNodes(d.responsible));
    } else if (one_node && !anchor->s.node.empty()) {
      d.responsible.push_back({anchor->s.node, anchor->s.device, 0.4});
      d.explanation = fmt::format("No root symptom was found; {} is the most specific evidence and all of it is on {}.",
                                  anchor->s.summary.empty() ? anchor->s.symptom : anchor->s.summary, anchor->s.node);
    } else {
      d.explanation = fmt::format("No root symptom was found; {} on {} node(s) points at the {} domain, not at a node.",
                                  anchor->s.symptom, suspect_nodes.size(), subDomainName(anchor->s.sub_domain));
    }
  } else {
    std::map<std::string, std::string> device_of;
    device_of[anchor->s.node] = anchor->s.device;
    for (Item* r : same) device_of.emplace(r->s.node, r->s.device);
    d.responsible.push_back({anchor->s.node, anchor->s.device, 0.9});
    for (const auto& n : suspect_nodes)
      if (n != anchor->s.node) d.responsible.push_back({n, device_of[n], 0.7});
    d.explanation = fmt::format("{} on {} is the earliest root symptom; the rest of the chain follows from it.",
                                anchor->s.summary.empty() ? anchor->s.symptom : anchor->s.summary,
                                joinNodes(d.responsible));
  }
  d.responsible.erase(std::remove_if(d.responsible.begin(), d.responsible.end(),
                                     [](const ResponsibleNode& r) { return r.node.empty(); }),
                      d.responsible.end());
  if (fallback) anchor->eff = Role::kRoot;
  d.chain = buildChain(items);
  return d;
}

}  // namespace faultline::common

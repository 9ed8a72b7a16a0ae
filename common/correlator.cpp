#include "common/correlator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "common/correlator_phases.h"

namespace faultline::common {

namespace {

using phases::Item;

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
  const Rule* r = rules ? rules->find(s.rule_id) : nullptr;
  c.action = r ? r->action : s.field("action");  // synthetic symptoms carry their own
  return c;
}

// What the causality relations did, for the explanation: "ncclRemoteError on 37 nodes is a
// consequence of xid.79 on gpu-b17 [causality: ID]", at most three.
std::string relationSummary(const std::vector<Item>& items) {
  struct Group {
    std::string_view because;
    bool relation = false;  // names a causality relation
    const std::string* symptom = nullptr;
    std::vector<bool> nodes;  // by node id
    size_t node_count = 0;
  };
  std::vector<Group> groups;
  std::unordered_map<std::string_view, uint32_t> by_because, node_ids;
  for (const auto& it : items) {
    if (it.eff == Role::kRoot) continue;
    auto [g, new_group] = by_because.try_emplace(it.because, static_cast<uint32_t>(groups.size()));
    if (new_group) groups.push_back({it.because, it.because.find("[causality:") != std::string::npos, &it.s.symptom, {}, 0});
    Group& group = groups[g->second];
    if (!group.relation) continue;
    const uint32_t node = node_ids.try_emplace(it.s.node, static_cast<uint32_t>(node_ids.size())).first->second;
    if (group.nodes.size() <= node) group.nodes.resize(node_ids.size());
    if (!group.nodes[node]) {
      group.nodes[node] = true;
      ++group.node_count;
    }
  }
  std::vector<const Group*> named;
  for (const auto& g : groups)
    if (g.relation) named.push_back(&g);
  std::sort(named.begin(), named.end(), [](const Group* a, const Group* b) { return a->because < b->because; });
  std::vector<std::string> parts;
  for (const Group* g : named) {
    if (parts.size() == 3) {
      parts.push_back(fmt::format("{} more", named.size() - 3));
      break;
    }
    parts.push_back(fmt::format("{} on {} node(s) is a {}", *g->symptom, g->node_count, g->because));
  }
  return parts.empty() ? "" : fmt::format(" {}.", fmt::join(parts, "; "));
}

// No cause: roots that stand are context of a job whose failure they do not explain.
void demoteRoots(std::vector<Item>& items, const std::string& because) {
  for (auto& it : items)
    if (it.eff == Role::kRoot) {
      it.eff = Role::kContext;
      it.because = because;
    }
}

std::map<std::string, int> priorities(const std::vector<Item>& items, const RuleSet* rules) {
  std::map<std::string, int> out;
  if (!rules) return out;
  std::unordered_set<std::string_view> seen;
  for (const auto& it : items)
    if (seen.insert(it.s.rule_id).second)
      if (const Rule* r = rules->find(it.s.rule_id)) out[it.s.rule_id] = r->priority;
  return out;
}

// Only wrappers failed the job: the domain is not known, and neither is a node to drain. When they
// are all on one node (from its own logs, or the job has one node) the explanation says where, as
// a place to look, not as a verdict: an unattributed verdict names no node.
void blameWrappers(Diagnosis& d, const JobInfo& job, const std::vector<Item>& items, const phases::Candidates& c,
                   const RuleSet* rules, const CorrelatorOptions& o) {
  std::set<std::string> nodes;
  for (size_t i : c.wrappers) nodes.insert(items[i].s.node);
  const Symptom& first = items[c.wrappers.front()].s;
  bool own_log = job.nodes.size() == 1 || first.source_kind != SourceKind::kApplication;
  if (nodes.size() == 1 && !nodes.begin()->empty() && own_log) {
    if (auto unread = phases::unreadNodes(job, items, *nodes.begin(), o); !unread.empty())
      d.explanation += fmt::format(" The wrappers are only on {}, but {} had no logs for the window.", *nodes.begin(),
                                   fmt::join(unread, ", "));
    else
      d.explanation += fmt::format(" The wrappers are all on {}: look there first; without a cause no node is named.",
                                   *nodes.begin());
  }
  if (const Rule* r = rules ? rules->find(first.rule_id) : nullptr) d.recommended_action = r->action;
}

// Ambiguous: the anchor and one competitor per other node, and all their actions.
void addCandidates(Diagnosis& d, const std::vector<Item>& items, const phases::Scored& sc, const RuleSet* rules) {
  std::vector<size_t> which{sc.anchor};
  which.insert(which.end(), sc.competitors.begin(), sc.competitors.end());
  std::set<std::string> seen;
  std::vector<std::string> actions;
  for (size_t i : which) {
    if (!seen.insert(items[i].s.node).second) continue;
    d.candidates.push_back(causeOf(items[i].s, rules));
    if (!d.candidates.back().action.empty()) actions.push_back(d.candidates.back().action);
  }
  d.recommended_action = fmt::format("{}", fmt::join(actions, " | "));
}

// The verdict's confidence: its most trusted node's when it names one; otherwise what the kind of
// evidence supports. A root decides a domain without naming a node (a job-wide error, a storage
// outage); fallback evidence is a lead; independent candidates are a lead; a systemic fault is
// likely.
double verdictConfidence(const Diagnosis& d, const phases::Candidates& c, const phases::Decision& decision) {
  if (decision.outcome == phases::Outcome::kAmbiguous) return 0.3;
  if (decision.outcome == phases::Outcome::kSystemic) return 0.6;
  double best = 0;
  for (const auto& r : d.responsible) best = std::max(best, r.confidence);
  if (best > 0) return best;
  return c.fallback ? 0.4 : 0.8;
}

}  // namespace

Symptom copyForCorrelation(const Symptom& s) {
  // A whole copy, then the cut: the store's cache makes one per symptom it writes, and spelling
  // the members out instead would miss the next one added to Symptom.
  Symptom out = s;
  if (out.evidence.size() > 1) out.evidence.resize(1);
  return out;
}

namespace {

// A root that names no device (a PCIe root port's fatal AER report whose endpoint record was not
// logged) takes the device that a report of the same incident names: a root of its domain on the
// same node within the clock skew (the driver losing the GPU below that port).
void deviceFromSameIncident(std::vector<phases::Item>& items, const phases::Scored& sc, const CorrelatorOptions& o) {
  Symptom& a = items[sc.anchor].s;
  if (!a.device.empty() || !a.time_known) return;
  for (size_t i : sc.same) {
    const Symptom& s = items[i].s;
    if (s.node == a.node && !s.device.empty() && s.time_known && s.sub_domain == a.sub_domain &&
        std::llabs(s.first_ns - a.first_ns) <= o.clock_skew_ns) {
      a.device = s.device;
      return;
    }
  }
}

}  // namespace

Diagnosis correlate(const JobInfo& job, std::vector<Symptom> symptoms, const RuleSet* rules,
                    const CorrelatorOptions& o) {
  static const std::vector<Relation> kNoRelations;
  const auto& relations = rules ? rules->relations : kNoRelations;
  Diagnosis d;
  d.job_id = job.job_id;
  d.terminal_state = terminalStateOf(job.state);
  if (rules) d.ruleset_version = rules->version;

  auto items = phases::scope(job, std::move(symptoms), relations, o);
  phases::estimateOnsets(items, rules);
  phases::applyRelations(items, relations);
  const auto cands = phases::candidates(items);
  std::optional<phases::Scored> scored;
  if (!cands.roots.empty()) scored = phases::score(items, cands, priorities(items, rules), o);
  const auto decision = phases::decide(job, items, cands, scored, o);
  d.sub_domain = decision.sub_domain;
  d.systemic = decision.outcome == phases::Outcome::kSystemic;
  d.explanation = decision.explanation;
  d.recommended_action = decision.action;

  const bool has_cause = scored && (decision.outcome == phases::Outcome::kAttributed ||
                                    decision.outcome == phases::Outcome::kAmbiguous ||
                                    decision.outcome == phases::Outcome::kSystemic);
  if (!has_cause) {
    if (!cands.wrappers.empty() && decision.outcome == phases::Outcome::kUnattributed)
      blameWrappers(d, job, items, cands, rules, o);
    demoteRoots(items, fmt::format("no cause attributed ({}) [phase: decision]", phases::outcomeName(decision.outcome)));
    d.chain = phases::chain(items);
    return d;
  }
  phases::markScored(items, cands, *scored);
  deviceFromSameIncident(items, *scored, o);
  auto b = phases::blame(job, items, cands, *scored, decision, o);
  phases::applyHistory(b, o);
  d.responsible = std::move(b.responsible);
  d.confidence = verdictConfidence(d, cands, decision);
  if (decision.outcome == phases::Outcome::kAmbiguous) {
    addCandidates(d, items, *scored, rules);
  } else {
    d.cause = causeOf(items[scored->anchor].s, rules);
    d.recommended_action = d.cause->action;
    if (!b.explanation.empty()) d.explanation = b.explanation + (d.explanation.empty() ? "" : " " + d.explanation);
  }
  d.explanation += relationSummary(items);
  d.chain = phases::chain(items);
  return d;
}

}  // namespace faultline::common

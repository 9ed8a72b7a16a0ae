// The correlator's phases. correlate() (common/correlator.h) is their composition:
//
//   scope  ->  relations  ->  candidates  ->  scoring  ->  decision  ->  blame  ->  chain
//
// scope:      which symptoms belong to the job (window, node names, untimed evidence, node facts,
//             faults that persist from before the start, GPUs missing from the inventory);
// relations:  the causal knowledge of rules/causality marks consequences, wrappers, peers and
//             job-wide errors;
// candidates: the roots left (or, with none, the most specific fallback evidence);
// scoring:    the anchor among them, and how each other candidate stands to it;
// decision:   attributed / ambiguous / systemic / unattributed / none, with the domain;
// blame:      the responsible nodes and devices, with confidences;
// chain:      the symptoms grouped for the report, each with the reason for its role.
//
// Every phase is a pure function of plain values (no clock, no I/O), so a test can state "given
// these candidates the decision is ambiguous" without building a job. Items are indices into the
// vector scope() returns; later phases never reorder it.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/causality.h"
#include "common/correlator.h"

namespace faultline::common::phases {

struct Item {
  Symptom s;
  Role eff = Role::kRoot;    // the role reasoning gave it
  std::string because;       // why it has that role: "... [causality: ID]" / "[phase: NAME]"
  std::optional<bool> nvswitch;  // the node's NVSwitch fact (RelationContext)
  // Marks of the relations phase.
  bool wrapper = false;
  std::vector<SubDomain> plausible;  // a wrapper's possible domains
  std::string wrapper_relation;
  std::string peer_field;            // the field naming the far end ("" = none)
  std::string peer_relation;
  std::string job_wide_relation;     // set when the symptom is job-wide when on every node
  // Set by a `service` or `between` relation: the fault lies outside the node that reported it (a
  // service it uses, the path to a peer), so a verdict it anchors names no node.
  std::string elsewhere_relation;
  RelationEffect elsewhere = RelationEffect::kService;
  // A fault from before the job (kept by a `persists` relation, or a GPU missing from the
  // inventory): the cause only when nothing during the job is.
  bool background = false;
  // How long before its stamp the condition began (the rule's detection delay): scoring orders
  // roots by onset = first_ns - delay_ns.
  int64_t delay_ns = 0;
  // Placed on its node by what a line says (a `locates` relation's report of where it failed).
  bool located = false;
};

// Total order: timed before untimed, then time, severity (higher first), node, rule.
bool earlier(const Item& a, const Item& b);

// Phase 1. Symptoms outside the job (other nodes, outside the window) are dropped; node names are
// matched to the job's (FQDN or short); a one-node job owns node-less evidence; faults that a
// `persists` relation keeps and no reboot ended count however early; a node with fewer GPUs
// than its peers gets a synthetic `inventory.gpu_missing` root at the job start. Sorted by
// earlier().
std::vector<Item> scope(const JobInfo& job, std::vector<Symptom> symptoms, const std::vector<Relation>& relations,
                        const CorrelatorOptions& options);

// Phase 2. Applies the relations in order to each item in time order: the first consequence or
// context relation that fits decides its role; wrapper, peer and job-wide relations mark it.
void applyRelations(std::vector<Item>& items, const std::vector<Relation>& relations);

// Phase 1b (before the relations, which respect onsets too). Each item's detection delay from its
// rule (rules may be null: none).
void estimateOnsets(std::vector<Item>& items, const RuleSet* rules);

struct Candidates {
  std::vector<size_t> roots;     // items that may be the cause
  bool fallback = false;         // no root anywhere: the roots are fallback evidence
  std::vector<size_t> wrappers;  // with no candidate at all: the wrappers that failed the job
  std::vector<size_t> set_aside; // background roots not considered: a root during the job exists
};

// Phase 3. Background roots (from before the job) are candidates only when no root during the
// job is left.
Candidates candidates(const std::vector<Item>& items);

struct Scored {
  size_t anchor = 0;
  std::vector<size_t> same;         // same domain, inside the causal window
  std::vector<size_t> competitors;  // other domain, other node, inside the window: one per node
  std::vector<size_t> downstream;   // later than the window, or the anchor's node in another domain
};

// Phase 4. `priority` gives a rule's priority (0 when unknown). The root with the earliest onset
// (stamp minus detection delay; ties keep time order) anchors; on its
// node a more specific report of the same incident (higher priority, within clock skew) replaces
// it. With fallback evidence only, the most specific kind anchors.
Scored score(const std::vector<Item>& items, const Candidates& c, const std::map<std::string, int>& priority,
             const CorrelatorOptions& options);

// Phase 4, its effect on the items: downstream roots become cascade, the anchor of fallback
// evidence becomes the root, background roots set aside become context, and each says why.
void markScored(std::vector<Item>& items, const Candidates& c, const Scored& scored);

enum class Outcome { kAttributed, kAmbiguous, kSystemic, kUnattributed, kNone };
std::string_view outcomeName(Outcome o);

struct Decision {
  Outcome outcome = Outcome::kNone;
  SubDomain sub_domain = SubDomain::kNone;
  std::string explanation;
  std::string action;        // for verdicts without a cause rule (node failure, OOM ...)
  bool job_wide = false;     // attributed to the job itself: no node is blamed
  std::string job_wide_relation;
};

// Phase 5. `scored` is absent when there is no candidate.
Decision decide(const JobInfo& job, const std::vector<Item>& items, const Candidates& c,
                const std::optional<Scored>& scored, const CorrelatorOptions& options);

struct Blame {
  std::vector<ResponsibleNode> responsible;
  std::string explanation;  // the sentence that says why these nodes (or none)
};

// The job's nodes other than `node` whose logs were not read for the window (options'
// covered_nodes; a node with any item counts as read), in name order: while any is left,
// evidence on `node` alone does not localize the fault there.
std::vector<std::string> unreadNodes(const JobInfo& job, const std::vector<Item>& items, const std::string& node,
                                     const CorrelatorOptions& options);

// Phase 6.
Blame blame(const JobInfo& job, const std::vector<Item>& items, const Candidates& c, const Scored& scored,
            const Decision& decision, const CorrelatorOptions& options);

// Phase 6b (live only): a weak verdict on a repeat offender gains confidence and says so.
void applyHistory(Blame& b, const CorrelatorOptions& options);

// Phase 7. Symptoms grouped by (rule, role), in time order, each with its `because`.
std::vector<ChainEntry> chain(const std::vector<Item>& items);

// Runs one relation's example through scope + relations with only that relation loaded;
// returns the effect each named symptom got ("consequence", "context", "wrapper", "peer",
// "job_wide", "persists", "none"; "dropped" when scope removed it).
std::map<std::string, std::string> runRelationExample(const Relation& relation, const RelationExample& example);

// Every relation's examples: problems as "file:line: relation ID: why".
std::vector<std::string> checkRelationExamples(const std::vector<Relation>& relations);

}  // namespace faultline::common::phases

// Causal knowledge as data: the relations of rules/causality/*.yaml (docs/rules.md, "Causality").
//
// A relation says how one kind of symptom stands to another: "an application exception after a
// fault in another domain is its consequence", "a generic NCCL wrapper points to the detail
// beside it", "an IB completion error names its far end in field `peer`". The correlator's
// phases (common/correlator_phases.h) consult them; each relation has an id that the verdict
// names (`chain[].because`, the explanation), so an operator who disagrees with a verdict can see
// which piece of knowledge to change.
//
// Loading is part of loadRuleSet (a file whose top-level key is `relations`); matching is pure.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/symptom.h"

namespace YAML {
class Node;
}

namespace faultline::common {

// Selects symptoms. Every list that is non-empty must contain the symptom's value (an id ending
// in '*' is a prefix); an empty list accepts anything.
struct SymptomMatcher {
  std::vector<std::string> rules;
  std::vector<std::string> not_rules;
  std::vector<std::string> categories;
  std::vector<SubDomain> sub_domains;
  std::vector<SubDomain> not_sub_domains;
  std::vector<Role> roles;  // the effective role at the moment the relation is applied
  std::vector<SourceKind> sources;
  std::optional<Severity> min_severity;
  // field -> "present" | "absent" | a value the field must equal.
  std::map<std::string, std::string> fields;
  // Node facts: "nvswitch" -> "true" | "false" | "unknown".
  std::map<std::string, std::string> node_facts;
  bool fallback_only = false;  // only symptoms whose rule may anchor as a fallback

  bool empty() const;
};

enum class RelationEffect {
  kConsequence,  // the symptom is downstream of the cause: cascade
  kContext,      // the symptom is no fault at all here: context
  kWrapper,      // a generic wrapper: never decides a domain; points to the detail (the cause side)
  kPeer,         // the symptom names its far end (field `peer_field`): the peer is the suspect
  kJobWide,      // on every node of the job (or naming several ranks): the job's, not a node's
  kPersists,     // a fault that lasts until the node reboots: counts however long before the job
  kService,      // the fault lies in a service outside the job's nodes (a storage server, a shared
                 // file system's quota, the scheduler's controller): a verdict it anchors names no node
  kBetween,      // the fault lies between the node and a peer (a connection neither end is shown to
                 // break), or in a configuration or software every node of the job shares (a node
                 // pool's NIC layout, a framework defect): in a job of several nodes a verdict it
                 // anchors names no node
  kLocates,      // the symptom carries no node (a daemon's stderr relayed without its host); the
                 // cause, a report that names where it failed, places it when it names one node
};

enum class RelationScope { kSameDevice, kSameNode, kOtherNode, kAnyNode };

struct RelationExample {
  struct Entry {
    std::string name;  // how the expectation refers to it
    Symptom symptom;
  };
  std::vector<Entry> symptoms;
  std::vector<std::string> job_nodes;  // empty: the nodes the symptoms name
  int64_t job_start_offset_ns = 0;     // job start relative to t=0 of the example
  // name -> expected effect: "consequence", "context", "wrapper", "peer", "job_wide", "persists", "service", "between",
  // "locates" or "none" (the relation leaves it alone).
  std::map<std::string, std::string> expect;
  int line = 0;
};

struct Relation {
  std::string id;
  std::string since;
  std::string file;
  int line = 0;
  std::string reason;
  RelationEffect effect = RelationEffect::kConsequence;
  SymptomMatcher symptom;              // who is affected
  std::optional<SymptomMatcher> cause; // consequence/context/wrapper: what it follows; none = always
  RelationScope scope = RelationScope::kAnyNode;
  // Whether the cause must be in the same / another sub_domain than the symptom ("" = any).
  std::string cause_domain;
  // The symptom may come this long before the cause ...
  int64_t before_ns = 0;
  // ... or this long after it (INT64_MAX: any time after).
  int64_t after_ns = INT64_MAX;
  // Pairs "symptom_field=cause_field" that must be equal (e.g. "prev_xid=xid").
  std::vector<std::pair<std::string, std::string>> same_fields;
  std::string peer_field = "peer";        // kPeer
  std::vector<SubDomain> plausible;       // kWrapper: the domains the wrapper could stand for
  std::optional<SymptomMatcher> until;    // kPersists: what ends the fault (a reboot)
  std::vector<RelationExample> examples;
};

std::string_view relationEffectName(RelationEffect e);

// What a matcher sees of a symptom besides the symptom itself.
struct RelationContext {
  Role role = Role::kRoot;                // its effective role now
  std::optional<bool> nvswitch;           // the node's NVSwitch fact, when known
};

bool matches(const SymptomMatcher& m, const Symptom& s, const RelationContext& ctx);
// matches() in two parts: what the symptom's kind decides (rule, category, sub_domain, source,
// severity, fallback flag: alike for every symptom of one kind, so a caller may decide it once
// per kind) and what its state decides (its role now, its fields, its node's facts).
bool matchesKind(const SymptomMatcher& m, const Symptom& s);
bool matchesState(const SymptomMatcher& m, const Symptom& s, const RelationContext& ctx);

// Whether `cause` (effective role in cause_ctx) stands to `s` as the relation's cause: matcher,
// scope, time window (untimed symptoms are inside any window) and same_fields. `cause_first`
// says whether the cause comes first in the correlator's order (breaks ties at equal times for
// relations that only look forward, before_ns == 0).
bool causeFits(const Relation& r, const Symptom& s, const Symptom& cause, const RelationContext& cause_ctx,
               bool cause_first);
// causeFits() without the cause matcher: scope, cause domain, time window, same_fields.
bool causePlaced(const Relation& r, const Symptom& s, const Symptom& cause, bool cause_first);

// Parses the relations of one file (a mapping with `relations:`), appending problems as
// "file:line: why". Ids must be unique across files: the caller checks.
void loadRelations(const std::string& file, const YAML::Node& doc, std::vector<Relation>& out,
                   std::vector<std::string>& problems);

}  // namespace faultline::common

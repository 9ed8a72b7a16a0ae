// The correlator: symptoms of all of a job's nodes -> one Diagnosis.
//
// Pure and deterministic: reads no clock, file or environment; time windows use the symptoms'
// own timestamps. The same function runs in the aggregator and in `faultline attribute`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/diagnosis.h"
#include "common/job.h"
#include "common/rule_set.h"
#include "common/symptom.h"

namespace faultline::common {

// What is known of a node's hardware (node.json, inventory). Some messages mean a fault on one
// platform and nothing on another: a rule says so with the field `requires_node_fact`.
struct NodeFacts {
  // Whether the node has NVSwitches of its own (HGX/DGX baseboards); nullopt when unknown.
  std::optional<bool> nvswitch;
  // The node's network addresses (node.json "ip" / "addresses"), to resolve the peer an error
  // names ("Connect to 10.1.2.3<4567> failed") to a node.
  std::vector<std::string> addresses;
  // GPUs in the node's inventory (node.json "gpus", the agent's nvidia-smi list); nullopt when
  // unknown. A node of a job with fewer GPUs than its peers has lost one before the job started.
  std::optional<int> gpu_count;
};

// A node's recent record in the fleet (live only: the aggregator fills it from stored verdicts;
// `faultline attribute` stays log-only). It can raise the confidence of an otherwise weak
// verdict that blames the node, and is then named in the explanation.
struct NodeHistory {
  int failures = 0;               // other failed jobs whose verdict named this node
  int64_t window_ns = 0;          // over this long before the job's end
  std::vector<std::string> jobs;  // some of those jobs' ids (evidence), newest first
};

struct CorrelatorOptions {
  // Roots in other domains on other nodes within this window of the anchor make the verdict
  // ambiguous.
  int64_t causal_window_ns = 60'000'000'000;
  // An application symptom that follows (or precedes by no more than this) a non-application
  // root is treated as its consequence: ranks die of any fault through an exception.
  int64_t clock_skew_ns = 5'000'000'000;
  // A symptom belongs to the job that was running on its node when it happened: only the clock
  // skew between a node and the scheduler (and the teardown after the end) widens the job's
  // window. A fault from before the start that lasts (a GPU lost until reset: a `persists`
  // relation) is kept as inherited background evidence however early; anything else from before
  // the start was another job's (or no job's) evidence.
  int64_t pre_start_ns = 30'000'000'000;
  // Context symptoms (reboots, driver loads) are kept from this long before the start: they
  // explain the state the job started in, they are no one's fault.
  int64_t context_pre_start_ns = 7200'000'000'000;
  int64_t post_end_ns = 30'000'000'000;
  // More suspect nodes than this -> systemic verdict without blaming a node.
  size_t systemic_threshold = 16;
  // Per node (by name); nodes not listed are unknown.
  std::map<std::string, NodeFacts> node_facts;
  // Nodes whose own logs were read for the job's window (a bundle's node folder, an agent whose
  // sources answered). Evidence that only one node shows localizes the fault there only when the
  // job's other nodes were read and are clean of it; a node with any symptom in the job counts as
  // read. nullopt: the caller did not say (unit tests, relation examples): every node counts.
  std::optional<std::set<std::string>> covered_nodes;
  // Per node (by name), live only; empty offline.
  std::map<std::string, NodeHistory> node_history;
  // A node with at least this many recent failures is a repeat offender.
  int repeat_offender_failures = 2;
};

// `rules` (may be null) supplies the recommended action of the cause's rule. Of a symptom's
// evidence it reads the first line only (the one a cause or chain entry quotes).
Diagnosis correlate(const JobInfo& job, std::vector<Symptom> symptoms, const RuleSet* rules,
                    const CorrelatorOptions& options = {});

// `s` as correlate() reads it: every member, the evidence cut to its first line. The live
// verdict's window read hands out such copies (a 10,000-node job's ~200k symptoms; the other
// evidence lines were most of their bytes).
Symptom copyForCorrelation(const Symptom& s);

}  // namespace faultline::common

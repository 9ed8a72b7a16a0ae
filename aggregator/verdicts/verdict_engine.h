// Per-job verdicts over every node's stored symptoms, revised as evidence arrives.
//
// Life of a verdict (docs/aggregator.md):
//   job ends in a failure state -> revision 1, provisional ("job_end"), at once;
//   settle time after the end was recorded -> a new revision ("settle");
//   symptoms for the job's window arrive after a revision -> a new revision ("late_symptoms");
//   template sightings (error lines no rule matched) for the window arrive after a revision and
//   change the verdict -> a new revision ("late_templates");
//   a node's log begins to count for coverage (its first heartbeat, a log's first records) within
//   the final timeout after the job's end and the verdict says otherwise than before (beyond
//   its coverage entries) -> a new revision ("late_coverage");
//   the job's output file is uploaded (`faultline job output`) -> a new revision ("job_output");
//   a changed job state (sacct refines FAILED -> NODE_FAIL) -> a new revision ("job_update");
//   metric evidence arrives from --prometheus (asked at the first verdict and at settle) and
//   changes the verdict -> a new revision ("metrics");
//   every node's agent has reported past end + margin with an empty spool -> final ("reported");
//   final_timeout after the end with nodes still silent -> final on partial evidence ("timeout"),
//   with the silent nodes in `missing_nodes` and in the diagnosis' coverage.
// Late symptoms after a final verdict still revise it (it stays final).
//
// The verdict itself is common::correlate — the same code as `faultline attribute`. The engine
// reads time only from the injected Clock, so tests move time by hand and never sleep.
// Threading: not thread-safe; call from one thread (the aggregator's io_context). Blocking: each
// call runs a few short store transactions.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>

#include "aggregator/clock.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/store/store.h"
#include "common/correlator.h"
#include "common/domain_classifier.h"
#include "common/rule_set.h"

namespace faultline::aggregator {

struct VerdictOptions {
  int64_t settle_ns = 120 * kSecondNs;
  // Symptoms up to this long after a job's end belong to its window (and this long before its
  // start, for mapping; the correlator reaches further back for context on its own).
  // The job's window [start - margin, end + margin]: clock skew and teardown only (a symptom
  // belongs to the job running on its node when it happened). Also how far past the end the
  // agents' heartbeats must reach before a verdict is final.
  int64_t window_margin_ns = 30 * kSecondNs;
  // A node whose agent has not sent a heartbeat for this long has no live agent.
  int64_t agent_timeout_ns = 90 * kSecondNs;
  // Stop waiting for silent nodes after this long: the verdict becomes final on partial evidence.
  int64_t final_timeout_ns = 3600 * kSecondNs;
  // Node history: other failed jobs that ended this long before a job's end and whose latest
  // verdict blamed one of its nodes (common::NodeHistory; a repeat offender's weak verdict gains
  // confidence), and how many of their ids the explanation may name.
  int64_t node_history_window_ns = 7 * 86400 * kSecondNs;
  size_t node_history_jobs = 5;
  // Issue 30: the error lines no rule matched (live_unrecognized.h). Baselines: the same
  // workload's successful jobs that ended this long before a job's end, the newest this many.
  int64_t baseline_window_ns = 7 * 86400 * kSecondNs;
  size_t baseline_jobs = 5;
  // The domain classifier (common/domain_classifier.h) whose lead an unattributed verdict's
  // explanation gains from its unmatched error lines, as `faultline attribute` does; null: none.
  // Never changes the verdict. Must outlive the engine.
  const common::DomainClassifier* domain_model = nullptr;
  // node_facts and node_history given here are completed per job from the store (addresses and
  // GPU count from the agents' inventories; history from stored verdicts).
  common::CorrelatorOptions correlator;
};

class VerdictEngine {
 public:
  // `store`, `clock` and `metrics` (may be null) must outlive the engine. `rules` (may be null)
  // supplies recommended actions.
  VerdictEngine(Store& store, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
                VerdictOptions options, Metrics* metrics = nullptr);

  // Provisional verdict for a job whose end was just recorded, if it failed and has none yet.
  std::optional<VerdictRow> onJobEnded(const std::string& job_id);
  // A job output was stored: the job's verdict now (its first, or a "job_output" revision),
  // if the job ended in a failure state; the latest one unchanged when the upload added nothing.
  std::optional<VerdictRow> onJobOutput(const std::string& job_id);
  // Everything due now: first verdicts, settle/late/final revisions. Returns revisions written.
  size_t tick();
  // The verdict `job` would get now (not stored).
  VerdictRow evaluate(const JobRow& job, const std::string& reason);
  // What `job` is judged with: options().correlator plus what the store knows of the job's nodes —
  // addresses and GPU count from their latest inventories (GPU count only from a list read
  // without error), and each node's record in other failed jobs' verdicts (node_history).
  common::CorrelatorOptions correlatorOptions(const JobRow& job);

  const VerdictOptions& options() const { return options_; }

  // Metric evidence (aggregator/evidence/prometheus.h): `request` is asked for a job's metric
  // symptoms when its first verdict is stored and again at its settle revision (the exporters
  // have scraped the end by then). It must not block: the aggregator hands it to a worker thread,
  // whose answer comes back through onMetricEvidence on this engine's thread.
  void setMetricRequest(std::function<void(const common::JobInfo&)> request) { metric_request_ = std::move(request); }
  // A job's metric evidence arrived: kept (replacing the job's last), part of every later
  // evaluation of the job, and the verdict revised ("metrics") when that changes what it says.
  std::optional<VerdictRow> onMetricEvidence(const std::string& job_id, std::vector<common::Symptom> symptoms,
                                             std::vector<common::CoverageEntry> coverage);

 private:
  std::optional<VerdictRow> store(VerdictRow v);
  // `next` says something the job's latest stored verdict does not (or there is none); with
  // `beyond_coverage`, something besides its coverage entries.
  bool changedFromStored(const std::string& job_id, const VerdictRow& next, bool beyond_coverage = false);
  // Nodes of `job` whose agent has not yet reported past end + margin (the store asked for how far
  // each reported, nothing else of its row: the tick asks this of every open verdict).
  std::vector<std::string> unreportedNodes(const JobRow& job);
  // The same from how far each node reported (a node missing from `reported` never did).
  std::vector<std::string> unreportedNodes(const JobRow& job, const std::map<std::string, int64_t>& reported);

  // What a tick found stored since the last one, by the jobs it concerns.
  struct TickNews {
    std::map<std::string, int64_t> late;         // job -> newest symptom id in its window (max: an output)
    std::map<std::string, int64_t> fresh_nodes;  // node -> newest symptom id stored
    std::set<std::string> sighted;               // jobs with new unmatched-template sightings
    std::set<std::string> recounted;             // jobs ended on a node whose sources began to count
  };
  std::vector<std::string> jobsReaching(const std::string& node, int64_t first_ns, int64_t last_ns);
  void readLateSymptoms(TickNews& news);
  void readLateOutputs(TickNews& news);
  void readSightings(TickNews& news);
  void readRecounts(TickNews& news);
  std::map<std::string, VerdictHead> headsToReview(const TickNews& news);
  bool mayBeDue(const JobRow& job, const VerdictHead& v, const TickNews& news, int64_t now);
  std::string revisionReason(const JobRow& job, const VerdictHead& v, const VerdictRow& next, const TickNews& news,
                             int64_t now);

  // The settled symptom id before the latest evaluation of `job_id` read its window: every
  // symptom at or below it was in that read (or outside the window). -1: not judged by this
  // process since it started (or since the map was last emptied).
  int64_t readUpTo(const std::string& job_id) const;

  Store& store_;
  const Clock& clock_;
  std::shared_ptr<const common::RuleSet> rules_;
  VerdictOptions options_;
  Metrics* metrics_;
  // readUpTo's memory, by job. Bounded: emptied when it reaches kMaxReadUpTo jobs (which costs
  // at most one evaluation more per job with symptoms arriving).
  static constexpr size_t kMaxReadUpTo = 4096;
  std::unordered_map<std::string, int64_t> read_up_to_;
  struct MetricEvidence {
    std::vector<common::Symptom> symptoms;
    std::vector<common::CoverageEntry> coverage;
  };
  std::function<void(const common::JobInfo&)> metric_request_;
  // By job; bounded like read_up_to_ (a job whose evidence was dropped is judged on its logs).
  std::unordered_map<std::string, MetricEvidence> metric_evidence_;
};

}  // namespace faultline::aggregator

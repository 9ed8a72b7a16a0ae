// Issue 30 live: a job's failure-indicating lines no rule matched, and the node that diverges,
// from the unmatched templates its nodes' agents shipped (aggregator/store/template_store.h) —
// judged by the same code as `faultline attribute` judges a bundle's (common/unrecognized.h):
// the same lexicon, the same spatial / cross-job / temporal tests, ranking and limits, the same
// divergent-node rules (a lead only where the rules decided nothing, never when another node lacks
// coverage).
//
// What differs from a bundle, by nature:
//   - the job's window is its nodes' sightings stamped in [start - margin, end + margin] (the
//     symptoms' margins; an unstamped line by when its agent read it);
//   - each agent mined its own lines; mergeSightings() merges the nodes' templates as one miner
//     over all of them would (each template's text joins a fresh miner, in node then time order),
//     so a template two nodes generalized apart is still one;
//   - an unstamped template is "new at the end" when its agent first read it inside the temporal
//     window (offline: when it is first seen in its file's last lines);
//   - cross-job: the baseline is the same workload's earlier successful jobs in the store (same
//     name, user and partition in the job rows, same site; Store::workloadBaselines), their nodes'
//     templates in their own windows; none found, no cross-job test (as offline without
//     --baseline).
// Blocking (a few store reads); the verdict engine's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "aggregator/store/store.h"
#include "common/diagnosis.h"
#include "common/unrecognized.h"

namespace faultline::aggregator {

struct LiveUnrecognizedOptions {
  int64_t margin_ns = 30 * kSecondNs;                 // the job window's margins
  int64_t baseline_window_ns = 7 * 86400 * kSecondNs;  // baseline runs ended at most this long before
  size_t baseline_jobs = 5;                            // the newest this many of them
  size_t max_rows = 100000;                            // per window read (templates x nodes)
};

// The sightings of one window (Store::unmatchedForWindow rows, in their (node, time) order)
// merged into templates: text the merged template's, lines summed, nodes with their lines, kinds,
// the earliest stamped line's time; first_line / first_node the first row's (rows come in a bundle's
// reading order: node by node). An agent's unstamped template is `early` when its first read time
// is before `early_before_ns`; a job output's when its row says so.
std::vector<common::TemplateSighting> mergeSightings(const std::vector<UnmatchedSighting>& rows,
                                                     int64_t early_before_ns);

// Which of `answered` nodes have logs of which kind: a source in `coverage` (the verdict's, one
// entry per node and source) with records, status ok or partial, by its format's kind; the journal
// also carries the kernel's messages.
std::map<common::SourceKind, std::set<std::string>> coveredByKind(const std::vector<common::CoverageEntry>& coverage,
                                                                  const std::set<std::string>& answered);

// Fills verdict->unrecognized and verdict->divergent_node (with its lead in the explanation) for
// `job`, whose verdict has been correlated and its coverage set. `answered`: the nodes whose
// agents answered for the window; `last_symptom_ns`: the latest stamped symptom the verdict read
// (0: none) — with the templates' latest stamped line, where the logs stop.
void addLiveUnrecognized(Store& store, const JobRow& job, const std::set<std::string>& answered,
                         int64_t last_symptom_ns, const std::vector<common::TemplateSighting>& output_templates,
                         const LiveUnrecognizedOptions& options, common::Diagnosis* verdict);

// A job output's templates (JobOutput::unmatched, as `faultline job output` mined the file) as
// rows for mergeSightings: one per node that printed it (the first line's node first), with the
// template's first line and time and its position-based `early`.
std::vector<UnmatchedSighting> outputRows(const std::vector<common::TemplateSighting>& templates);

}  // namespace faultline::aggregator

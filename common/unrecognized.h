// Evidence without rules (issue 30): the failure-indicating lines no rule matched, and the node
// whose logs diverge from its peers'.
//
// UnmatchedLines collects a job's records that no rule matched: each of their lines that carries
// the error lexicon (common/error_lexicon.h) joins a log template (common/template_miner.h), with
// the nodes that printed it, its first line and its earliest time. findFailureIndicating() then
// keeps the templates that are unusual for the job (see UnusualContext) and ranks them;
// divergentNode() names the node that holds the most of them alone.
//
// Pure and deterministic: the same records in the same order give the same templates and the
// same lists. Reads no clock, file or environment. Not thread-safe (one collector per job).
// Bounded: the miner's max_templates, max_nodes node names per template, first lines cut at
// max_line_bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/diagnosis.h"
#include "common/error_lexicon.h"
#include "common/log_record.h"
#include "common/template_miner.h"

namespace faultline::common {

// Calls fn(line) for each line of `text` ('\n'-separated, leading blanks cut) that carries the
// error lexicon, as `memo` says: a joined record (a traceback) is judged line by line, since its
// cause is usually one of them. What both collectors (UnmatchedLines offline, the agent's
// agent/unmatched_templates.h live) take from a record no rule matched.
template <typename Fn>
void forEachErrorLine(std::string_view text, ErrorLineMemo& memo, Fn&& fn) {
  while (!text.empty()) {
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (!line.empty() && memo(line)) fn(line);
  }
}

// One template of a job's unmatched error lines, as collected.
struct TemplateSighting {
  std::string text;        // the template's final text
  uint64_t count = 0;      // lines that joined it
  std::string first_line;  // the first line that joined it
  std::vector<std::string> examples;  // up to max_examples distinct lines, first ones first
  std::string first_node;
  bool time_known = false;
  int64_t first_ns = 0;    // its earliest timed line
  std::map<std::string, uint64_t> nodes;  // node -> lines ("" for lines whose node is unknown)
  bool nodes_truncated = false;           // more nodes printed it than max_nodes
  std::set<SourceKind> kinds;             // the kinds of source it was read from
  // It was seen before the last `tail_lines` lines of some file it was in (for untimed lines:
  // not new at the end).
  bool early = false;
};

struct UnmatchedLinesOptions {
  TemplateMinerOptions miner = [] {
    TemplateMinerOptions o;
    o.max_templates = 2048;
    return o;
  }();
  size_t max_nodes = 256;       // node names kept per template
  size_t tail_lines = 200;      // a file's last lines: where a line is "new at the end"
  size_t max_line_bytes = 512;  // first lines and examples cut here
  size_t max_examples = 3;      // distinct lines kept per template
};

class UnmatchedLines {
 public:
  using Options = UnmatchedLinesOptions;
  explicit UnmatchedLines(Options options = {});

  // A new source (file) of this kind starts; positions count from its start.
  void beginSource(SourceKind kind);
  // A record of the current source that no rule matched, read from `node` ("" when unknown):
  // each of its lines ('\n'-separated) that carries the error lexicon joins a template.
  void add(const LogRecord& record, std::string_view node);
  // The current source ended after physical line `last_line`.
  void endSource(uint64_t last_line);

  // The live templates in the order they were created.
  std::vector<TemplateSighting> templates() const;
  uint64_t lines() const { return miner_.records(); }
  const TemplateMiner& miner() const { return miner_; }

 private:
  struct Side {
    TemplateSighting seen;
    uint64_t source = 0;  // the source of the latest sighting (to find a file's first per template)
  };
  ErrorLineMemo error_line_;
  Options options_;
  TemplateMiner miner_;
  std::map<TemplateId, Side> side_;
  std::map<TemplateId, uint64_t> first_in_source_;  // template -> its first line in this source
  SourceKind kind_ = SourceKind::kApplication;
  uint64_t source_ = 0;
};

// What "unusual" is judged against.
struct UnusualContext {
  // The job's nodes (short names as in the bundle) that have logs of each kind of source (a file
  // of that kind with records). Spatial comparison is between nodes with the same kind of logs.
  std::map<SourceKind, std::set<std::string>> covered;
  // The job's end (UTC ns) when known, else 0: the temporal window ends there.
  int64_t end_ns = 0;
  int64_t start_ns = 0;  // when known, else 0 (sizes the window)
  // The latest timed line read (any line the parsers handed on), else 0: when the logs stop
  // before the job's end (a hang killed at its time limit), the window ends there instead.
  int64_t last_line_ns = 0;
  // Template texts of the same workload's good runs (cross-job), mined with the same options;
  // empty when no baseline was given.
  std::vector<std::string> baseline;
  bool has_baseline = false;
  size_t max_lines = 20;  // the list is cut here
};

// The failure-indicating templates: carrying the error lexicon (all of UnmatchedLines' do), not
// seen in the baseline, and unusual by at least one of:
//   spatial   - printed by some but not all of the nodes with logs of its kind (needs two or more
//               such nodes; a template whose node list overflowed is not spatial);
//   cross-job - a baseline was given and no baseline template has its text (a "<*>" on either
//               side matches any token);
//   temporal  - first seen in the window before the failure: a quarter of the job's length, at
//               least 30 s and at most 5 min (5 min when the start is unknown), ending at the
//               job's end or, when the logs stop earlier, at the last timed line read (else the
//               latest line of the templates); an untimed template: never seen before the last
//               lines of its files.
// Ranked: score (spatial 2, cross-job 2, temporal 1) descending, then fewer nodes, then earliest
// (untimed last), then fewer lines, then text. At most max_lines.
std::vector<UnrecognizedLine> findFailureIndicating(const std::vector<TemplateSighting>& templates,
                                                    const UnusualContext& context);

// The temporal window's length for a job of [start_ns, end_ns] (0: unknown): a quarter of the
// job, at least 30 s and at most 5 min; 5 min when either end is unknown.
int64_t temporalWindowNs(int64_t start_ns, int64_t end_ns);

// Whether template `a` and `b` have the same text but for variables ("<*>" matches any token).
bool sameTemplate(std::string_view a, std::string_view b);

// Issue 30 part 3. The node whose spatial failure-indicating lines no other node printed:
// every template whose why starts with "spatial" gives each of its nodes 1/|nodes|; the highest
// total wins, a tie goes to the node with the earliest such line, a tie there names none. Only
// when the rules decided nothing (unattributed, or ambiguous without a responsible node: a cause
// that names no node on purpose, job-wide, a service, between nodes, gets no lead), the job has
// two or more nodes and, for each counted
// template, every job node has logs of a kind its nodes were compared in; nullopt otherwise.
// Confidence kDivergentNodeConfidence: the lead band, below any rule-based node's.
inline constexpr double kDivergentNodeConfidence = 0.25;
std::optional<DivergentNode> divergentNode(const std::vector<UnrecognizedLine>& lines,
                                           const std::vector<std::string>& job_nodes,
                                           const UnusualContext& context, const Diagnosis& verdict);

// What a verdict takes from the above (offline `attribute` and the live aggregator alike): `lines`
// as verdict->unrecognized, the divergent node (divergentNode) and, when there is one, its lead
// sentence appended to the explanation ("A lead, not a verdict: ...").
void attachUnrecognized(Diagnosis* verdict, std::vector<UnrecognizedLine> lines,
                        const std::vector<std::string>& job_nodes, const UnusualContext& context);

}  // namespace faultline::common

// The agent's half of issue 30 (evidence without rules): the error lines of its node that no rule
// matched, grouped into log templates by a bounded miner (common/template_miner.h) and shipped as
// template sightings on the batch path (common/wire.h UnmatchedTemplate) — template text, lines
// since the last batch, the first of them (cut), its time, the kind of source — never every line.
// The aggregator judges them per job (aggregator/verdicts/live_unrecognized.h).
//
// A record reaches add() when no rule matched it; each of its lines that carries the error
// lexicon (common/error_lexicon.h, common/unrecognized.h forEachErrorLine: the same test as
// offline) joins a template. take() hands out what was seen since the last take, at most
// max_per_batch templates: the templates new in this interval first, then those with the fewest
// lines in all (a template printed all along says less), then the earliest; the rest are counted
// (left_out) and forgotten.
//
// Bounded memory: the miner holds at most max_templates templates (least recently seen singleton
// evicted first), the pending table at most 2 * max_templates entries (beyond: counted as left
// out), first lines cut at max_line_bytes, the lexicon memo max_memo shapes. memoryBytes() says
// what is held; with the defaults it stays under kMaxMemoryBytes (tests/agent feeds 100,000
// distinct error lines to check).
//
// Deterministic: the same records in the same order give the same sightings. Reads no clock
// (callers pass each record's time). Not thread-safe: the agent's io_context thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error_lexicon.h"
#include "common/log_record.h"
#include "common/template_miner.h"
#include "common/wire.h"

namespace faultline::agent {

struct UnmatchedTemplatesOptions {
  size_t max_templates = 256;   // the miner's bound
  size_t max_per_batch = 32;    // sightings per take()
  size_t max_line_bytes = 256;  // first lines cut here (and the miner's examples)
  size_t max_memo = 512;        // line shapes the lexicon memo keeps
};

struct UnmatchedTemplatesStats {
  uint64_t lines = 0;              // error lines that joined a template
  uint64_t shipped = 0;            // sightings handed out by take()
  uint64_t left_out = 0;           // sightings over max_per_batch
  uint64_t lines_left_out = 0;     // their lines, and lines the full pending table turned away
};

class UnmatchedTemplates {
 public:
  using Options = UnmatchedTemplatesOptions;
  // What the defaults hold at most (checked by tests/agent/unmatched_templates_test.cpp).
  static constexpr size_t kMaxMemoryBytes = size_t{1} << 20;

  explicit UnmatchedTemplates(Options options = {});

  // A record no rule matched, read from a source of `kind`. Its time: record.time_ns when
  // record.time_known, else `read_ns` (when the agent read it).
  void add(const common::LogRecord& record, common::SourceKind kind, int64_t read_ns);

  // The sightings since the last take (at most max_per_batch, in the order above); what did not
  // fit is added to *left_out / *lines_left_out (either may be null) and to stats().
  std::vector<common::UnmatchedTemplate> take(uint64_t* left_out, uint64_t* lines_left_out);
  // Sightings take() gave that could not be stored (a failed spool commit): counted again with
  // what comes next, as if never taken.
  void putBack(const std::vector<common::UnmatchedTemplate>& sightings);

  size_t pending() const { return pending_.size(); }
  const common::TemplateMiner& miner() const { return miner_; }
  const UnmatchedTemplatesStats& stats() const { return stats_; }
  // Approximate heap bytes held: the miner, the pending table, the lexicon memo.
  size_t memoryBytes() const;

 private:
  struct Pending {
    uint64_t count = 0;
    std::string first_line;
    int64_t first_ns = 0;
    bool time_known = false;
  };
  using Key = std::pair<common::TemplateId, common::SourceKind>;
  void note(Pending& p, std::string_view line, int64_t ns, bool time_known);

  Options options_;
  common::TemplateMiner miner_;
  common::ErrorLineMemo error_line_;
  std::map<Key, Pending> pending_;
  size_t pending_bytes_ = 0;
  std::vector<common::UnmatchedTemplate> returned_;  // put back: handed out first by the next take
  uint64_t overflow_lines_ = 0;  // lines the full pending table turned away since the last take
  uint64_t taken_at_ = 0;  // miner records() at the last take: templates first seen after are new
  UnmatchedTemplatesStats stats_;
};

}  // namespace faultline::agent

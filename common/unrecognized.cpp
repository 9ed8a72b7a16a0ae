#include "common/unrecognized.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/error_lexicon.h"
#include "common/job.h"
#include "common/template_mask.h"

namespace faultline::common {

UnmatchedLines::UnmatchedLines(Options options) : options_(options), miner_(options.miner) {}

void UnmatchedLines::beginSource(SourceKind kind) {
  kind_ = kind;
  ++source_;
  first_in_source_.clear();
}

void UnmatchedLines::add(const LogRecord& record, std::string_view node) {
  forEachErrorLine(record.text, error_line_, [&](std::string_view line) {
    const TemplateId id = miner_.add(line);
    auto [it, fresh] = side_.try_emplace(id);
    TemplateSighting& t = it->second.seen;
    if (fresh) {
      t.first_line.assign(line.substr(0, options_.max_line_bytes));
      t.first_node.assign(node);
    }
    ++t.count;
    if (t.examples.size() < options_.max_examples) {
      std::string_view cut = line.substr(0, options_.max_line_bytes);
      if (std::find(t.examples.begin(), t.examples.end(), cut) == t.examples.end()) t.examples.emplace_back(cut);
    }
    if (record.time_known && (!t.time_known || record.time_ns < t.first_ns)) {
      t.time_known = true;
      t.first_ns = record.time_ns;
    }
    auto n = t.nodes.find(std::string(node));
    if (n != t.nodes.end()) ++n->second;
    else if (t.nodes.size() < options_.max_nodes) t.nodes.emplace(std::string(node), 1);
    else t.nodes_truncated = true;
    t.kinds.insert(kind_);
    first_in_source_.try_emplace(id, record.line);
  });
  // Evicted templates leave the side table too, so it stays as bounded as the miner.
  if (side_.size() > 2 * options_.miner.max_templates) {
    for (auto it = side_.begin(); it != side_.end();)
      it = miner_.find(it->first) ? std::next(it) : side_.erase(it);
  }
}

void UnmatchedLines::endSource(uint64_t last_line) {
  for (const auto& [id, line] : first_in_source_) {
    auto it = side_.find(id);
    if (it != side_.end() && line + options_.tail_lines <= last_line) it->second.seen.early = true;
  }
  first_in_source_.clear();
}

std::vector<TemplateSighting> UnmatchedLines::templates() const {
  std::vector<TemplateSighting> out;
  for (TemplateId id : miner_.ids()) {
    auto it = side_.find(id);
    if (it == side_.end()) continue;
    TemplateSighting t = it->second.seen;
    t.text = miner_.get(id).text;
    out.push_back(std::move(t));
  }
  return out;
}

namespace {

std::string_view kindWord(SourceKind k) {
  switch (k) {
    case SourceKind::kKernel: return "kernel";
    case SourceKind::kJournal: return "journal";
    case SourceKind::kFabricManager: return "Fabric Manager";
    case SourceKind::kApplication: return "application";
    case SourceKind::kMetric: return "metric";
  }
  return "";
}

std::string seconds(int64_t ns) { return fmt::format("{} s", ns / 1'000'000'000); }

// The nodes of `t` among `covered` (named nodes only), when they are some but not all of them.
bool spatiallyUnusual(const TemplateSighting& t, const std::set<std::string>& covered, size_t* on) {
  if (t.nodes_truncated || covered.size() < 2) return false;
  size_t in = 0;
  for (const auto& [node, count] : t.nodes)
    if (covered.count(node)) ++in;
  *on = in;
  return in > 0 && in < covered.size();
}

struct Ranked {
  UnrecognizedLine line;
  int score = 0;
};

}  // namespace

bool sameTemplate(std::string_view a, std::string_view b) {
  auto ta = templateTokens(a), tb = templateTokens(b);
  if (ta.size() != tb.size()) return false;
  for (size_t i = 0; i < ta.size(); ++i)
    if (ta[i] != tb[i] && ta[i] != "<*>" && tb[i] != "<*>") return false;
  return true;
}

int64_t temporalWindowNs(int64_t start_ns, int64_t end_ns) {
  if (start_ns > 0 && end_ns > start_ns)
    return std::clamp<int64_t>((end_ns - start_ns) / 4, 30'000'000'000, 300'000'000'000);
  return 300'000'000'000;
}

std::vector<UnrecognizedLine> findFailureIndicating(const std::vector<TemplateSighting>& templates,
                                                    const UnusualContext& ctx) {
  // The temporal window's end: the job's, or where its logs stop when that is earlier (a hang
  // killed at its time limit), else the latest timed line.
  int64_t end = ctx.end_ns;
  bool job_end = end != 0;
  if (ctx.last_line_ns > 0 && (end == 0 || ctx.last_line_ns < end)) {
    end = ctx.last_line_ns;
    job_end = false;
  }
  if (end == 0)
    for (const auto& t : templates)
      if (t.time_known) end = std::max(end, t.first_ns);
  const int64_t window = temporalWindowNs(ctx.start_ns, ctx.end_ns);

  std::vector<Ranked> ranked;
  for (const auto& t : templates) {
    if (ctx.has_baseline &&
        std::any_of(ctx.baseline.begin(), ctx.baseline.end(), [&](const std::string& b) { return sameTemplate(t.text, b); }))
      continue;  // the good run printed it too
    Ranked r;
    auto& u = r.line;
    for (SourceKind k : t.kinds) {
      auto cov = ctx.covered.find(k);
      size_t on = 0;
      if (cov == ctx.covered.end() || !spatiallyUnusual(t, cov->second, &on)) continue;
      std::string names;
      for (const auto& [node, count] : t.nodes)
        if (cov->second.count(node)) names += (names.empty() ? "" : ", ") + node;
      u.why.push_back(fmt::format("spatial: printed by {} of the {} nodes with {} logs ({})", on, cov->second.size(),
                                  kindWord(k), names));
      r.score += 2;
      break;
    }
    if (ctx.has_baseline) {
      u.why.push_back("cross-job: not in the baseline runs' logs");
      r.score += 2;
    }
    if (t.time_known && end > 0 && t.first_ns >= end - window) {
      u.why.push_back(fmt::format("temporal: first seen {} before the {}", seconds(end - t.first_ns),
                                  job_end ? "job's end" : "last line"));
      r.score += 1;
    } else if (!t.time_known && !t.early) {
      u.why.push_back("temporal: new in the last lines of its log");
      r.score += 1;
    }
    if (r.score == 0) continue;
    u.template_text = t.text;
    u.count = t.count;
    for (const auto& [node, count] : t.nodes)
      if (!node.empty()) u.nodes.push_back(node);
    u.first_line = t.first_line;
    u.first_node = t.first_node;
    u.time_known = t.time_known;
    u.first_ns = t.first_ns;
    ranked.push_back(std::move(r));
  }
  std::sort(ranked.begin(), ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.line.nodes.size() != b.line.nodes.size()) return a.line.nodes.size() < b.line.nodes.size();
    if (a.line.time_known != b.line.time_known) return a.line.time_known;
    if (a.line.time_known && a.line.first_ns != b.line.first_ns) return a.line.first_ns < b.line.first_ns;
    if (a.line.count != b.line.count) return a.line.count < b.line.count;
    return a.line.template_text < b.line.template_text;
  });
  std::vector<UnrecognizedLine> out;
  for (auto& r : ranked) {
    if (out.size() >= ctx.max_lines) break;
    out.push_back(std::move(r.line));
  }
  return out;
}

std::optional<DivergentNode> divergentNode(const std::vector<UnrecognizedLine>& lines,
                                           const std::vector<std::string>& job_nodes, const UnusualContext& ctx,
                                           const Diagnosis& verdict) {
  // Only where the rules decided nothing: a cause that names no node was placed there on purpose
  // (shared by the whole job, a service, a fault between nodes), and a lead would contradict it.
  const bool undecided = verdict.sub_domain == SubDomain::kUnattributed || verdict.sub_domain == SubDomain::kAmbiguous;
  if (!undecided || !verdict.responsible.empty() || verdict.systemic || job_nodes.size() < 2) return std::nullopt;
  // Kinds of logs every node of the job has: only those can say what the others did not print.
  std::vector<const std::set<std::string>*> full;
  for (const auto& [kind, nodes] : ctx.covered)
    if (std::all_of(job_nodes.begin(), job_nodes.end(), [&](const std::string& n) { return nodes.count(n) > 0; }))
      full.push_back(&nodes);
  if (full.empty()) return std::nullopt;
  struct Score {
    double score = 0;
    bool time_known = false;
    int64_t first_ns = 0;
    std::string example;
  };
  std::map<std::string, Score> scores;
  for (const auto& u : lines) {
    if (u.why.empty() || u.why.front().rfind("spatial", 0) != 0 || u.nodes.empty()) continue;
    const bool compared = std::any_of(full.begin(), full.end(), [&](const std::set<std::string>* nodes) {
      return u.nodes.size() < nodes->size() &&
             std::all_of(u.nodes.begin(), u.nodes.end(), [&](const std::string& n) { return nodes->count(n) > 0; });
    });
    if (!compared) continue;
    for (const auto& n : u.nodes) {
      Score& s = scores[n];
      s.score += 1.0 / static_cast<double>(u.nodes.size());
      if (u.time_known && (!s.time_known || u.first_ns < s.first_ns)) {
        s.time_known = true;
        s.first_ns = u.first_ns;
        s.example = u.first_line;
      }
      if (s.example.empty()) s.example = u.first_line;
    }
  }
  const std::pair<const std::string, Score>* best = nullptr;
  bool tied = false;
  for (const auto& entry : scores) {
    if (!best) {
      best = &entry;
      continue;
    }
    const Score &a = entry.second, &b = best->second;
    constexpr double kEps = 1e-9;
    int cmp = a.score > b.score + kEps ? 1 : a.score + kEps < b.score ? -1 : 0;
    if (cmp == 0 && a.time_known != b.time_known) cmp = a.time_known ? 1 : -1;
    if (cmp == 0 && a.time_known && a.first_ns != b.first_ns) cmp = a.first_ns < b.first_ns ? 1 : -1;
    if (cmp > 0) {
      best = &entry;
      tied = false;
    } else if (cmp == 0) {
      tied = true;
    }
  }
  if (!best || tied) return std::nullopt;
  DivergentNode d;
  d.node = best->first;
  d.confidence = kDivergentNodeConfidence;
  std::string example = best->second.example.substr(0, 160);
  d.why = fmt::format("the logs of {} hold error lines no other node printed{}: \"{}\"", d.node,
                      best->second.time_known ? " (first at " + formatTimeNs(best->second.first_ns) + ")" : "",
                      example);
  return d;
}

void attachUnrecognized(Diagnosis* d, std::vector<UnrecognizedLine> lines, const std::vector<std::string>& job_nodes,
                        const UnusualContext& context) {
  d->unrecognized = std::move(lines);
  d->divergent_node = divergentNode(d->unrecognized, job_nodes, context, *d);
  if (d->divergent_node)
    d->explanation += (d->explanation.empty() ? "" : " ") + std::string("A lead, not a verdict: ") +
                      d->divergent_node->why + ".";
}

}  // namespace faultline::common

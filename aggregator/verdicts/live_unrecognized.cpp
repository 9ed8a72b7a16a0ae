#include "aggregator/verdicts/live_unrecognized.h"

#include <algorithm>

#include "common/template_miner.h"

namespace faultline::aggregator {

namespace {

std::optional<common::LogFormat> formatNamed(std::string_view name) {
  for (int f = static_cast<int>(common::LogFormat::kUnknown); f <= static_cast<int>(common::LogFormat::kApplication);
       ++f)
    if (common::formatName(static_cast<common::LogFormat>(f)) == name) return static_cast<common::LogFormat>(f);
  return std::nullopt;
}

// The job's window [start - margin, end + margin]; a job without a known start from a day
// before its end, as its symptoms are read.
std::pair<int64_t, int64_t> windowOf(const JobRow& job, int64_t margin_ns) {
  const int64_t start = job.info.start_ns ? job.info.start_ns : job.info.end_ns - 86400 * kSecondNs;
  return {start - margin_ns, job.info.end_ns + margin_ns};
}

}  // namespace

std::vector<common::TemplateSighting> mergeSightings(const std::vector<UnmatchedSighting>& rows,
                                                     int64_t early_before_ns) {
  // The merged templates' texts settle only when every row has joined: sightings by id first.
  common::TemplateMinerOptions mo;
  mo.max_templates = std::max<size_t>(rows.size(), 1);  // one window's: nothing evicted
  common::TemplateMiner miner(mo);
  std::map<common::TemplateId, common::TemplateSighting> by_id;
  std::vector<common::TemplateId> order;
  for (const auto& r : rows) {
    const common::TemplateId id = miner.addTemplate(r.t.text);
    auto [it, fresh] = by_id.try_emplace(id);
    common::TemplateSighting& t = it->second;
    if (fresh) {
      order.push_back(id);
      t.first_line = r.t.first_line;
      t.first_node = r.node;
    }
    t.count += r.t.count;
    t.nodes[r.node] += r.t.count;
    t.kinds.insert(r.t.kind);
    if (r.t.time_known) {
      if (!t.time_known || r.t.first_ns < t.first_ns) t.first_ns = r.t.first_ns;
      t.time_known = true;
    } else if (r.early ? *r.early : r.t.first_ns < early_before_ns) {
      t.early = true;  // read before the temporal window (or its file's last lines): not new at the end
    }
    if (t.examples.empty()) t.examples.push_back(r.t.first_line);
  }
  std::sort(order.begin(), order.end());  // creation order, as UnmatchedLines::templates()
  std::vector<common::TemplateSighting> out;
  out.reserve(order.size());
  for (auto id : order) {
    common::TemplateSighting t = std::move(by_id[id]);
    t.text = miner.get(id).text;
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<UnmatchedSighting> outputRows(const std::vector<common::TemplateSighting>& templates) {
  std::vector<UnmatchedSighting> rows;
  for (const auto& t : templates) {
    const common::SourceKind kind = t.kinds.empty() ? common::SourceKind::kApplication : *t.kinds.begin();
    auto row = [&](const std::string& node, uint64_t count) {
      UnmatchedSighting r;
      r.node = node;
      r.t = {t.text, count, t.first_line, t.time_known ? t.first_ns : 0, t.time_known, kind};
      r.last_ns = r.t.first_ns;
      r.early = t.early;
      rows.push_back(std::move(r));
    };
    auto first = t.nodes.find(t.first_node);
    if (first != t.nodes.end()) row(first->first, first->second);
    for (const auto& [node, count] : t.nodes)
      if (node != t.first_node) row(node, count);
  }
  return rows;
}

std::map<common::SourceKind, std::set<std::string>> coveredByKind(const std::vector<common::CoverageEntry>& coverage,
                                                                  const std::set<std::string>& answered) {
  std::map<common::SourceKind, std::set<std::string>> out;
  for (const auto& c : coverage) {
    if (c.node.empty() || !answered.count(c.node) || c.records == 0 || (c.status != "ok" && c.status != "partial"))
      continue;
    const auto format = formatNamed(c.format);
    if (!format || *format == common::LogFormat::kUnknown) continue;
    out[common::sourceKindOf(*format)].insert(c.node);
    if (*format == common::LogFormat::kJournalBinary) out[common::SourceKind::kKernel].insert(c.node);
  }
  return out;
}

void addLiveUnrecognized(Store& store, const JobRow& job, const std::set<std::string>& answered,
                         int64_t last_symptom_ns, const std::vector<common::TemplateSighting>& output_templates,
                         const LiveUnrecognizedOptions& o, common::Diagnosis* verdict) {
  common::UnusualContext ctx;
  ctx.covered = coveredByKind(verdict->coverage, answered);
  ctx.start_ns = job.info.start_ns;
  ctx.end_ns = job.info.end_ns;
  const auto [from, to] = windowOf(job, o.margin_ns);
  auto rows = store.unmatchedForWindow(job.info.nodes, from, to, o.max_rows);
  // Where the logs stop, when before the end (a hang killed at its time limit): the latest
  // stamped line shipped, symptom or template, as offline takes the latest line read.
  // The job's own output after its nodes' logs, as a bundle's job-wide files are read.
  for (auto& r : outputRows(output_templates)) rows.push_back(std::move(r));
  int64_t last = last_symptom_ns;
  for (const auto& r : rows)
    if (r.t.time_known) last = std::max(last, r.last_ns);
  ctx.last_line_ns = last;
  int64_t end = ctx.end_ns;
  if (last > 0 && (end == 0 || last < end)) end = last;
  const auto templates = mergeSightings(rows, end - common::temporalWindowNs(ctx.start_ns, ctx.end_ns));
  for (const auto& base : store.workloadBaselines(job, job.info.end_ns - o.baseline_window_ns, o.baseline_jobs)) {
    ctx.has_baseline = true;
    const auto [bfrom, bto] = windowOf(base, o.margin_ns);
    for (auto& t : mergeSightings(store.unmatchedForWindow(base.info.nodes, bfrom, bto, o.max_rows), 0))
      ctx.baseline.push_back(std::move(t.text));
  }
  common::attachUnrecognized(verdict, common::findFailureIndicating(templates, ctx), job.info.nodes, ctx);
}

}  // namespace faultline::aggregator

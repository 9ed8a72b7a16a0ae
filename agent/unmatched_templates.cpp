#include "agent/unmatched_templates.h"

#include <algorithm>

#include "common/template_mask.h"
#include "common/unrecognized.h"

namespace faultline::agent {

namespace {

common::TemplateMinerOptions minerOptions(const UnmatchedTemplatesOptions& o) {
  common::TemplateMinerOptions m;
  m.max_templates = std::max<size_t>(1, o.max_templates);
  m.max_example_bytes = o.max_line_bytes;
  return m;
}

// The heap a string holds beyond its own object (libstdc++ keeps 15 bytes inline).
size_t heapOf(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

}  // namespace

UnmatchedTemplates::UnmatchedTemplates(Options options)
    : options_(options), miner_(minerOptions(options)), error_line_(options.max_memo) {}

void UnmatchedTemplates::note(Pending& p, std::string_view line, int64_t ns, bool time_known) {
  ++p.count;
  // The first line of the interval, or an earlier-stamped one (a timed line beats a read time).
  const bool earlier = p.count == 1 || (time_known && (!p.time_known || ns < p.first_ns));
  if (!earlier) return;
  pending_bytes_ -= heapOf(p.first_line);
  p.first_line.assign(line.substr(0, options_.max_line_bytes));
  pending_bytes_ += heapOf(p.first_line);
  p.first_ns = ns;
  p.time_known = time_known;
}

void UnmatchedTemplates::add(const common::LogRecord& record, common::SourceKind kind, int64_t read_ns) {
  const int64_t ns = record.time_known ? record.time_ns : read_ns;
  common::forEachErrorLine(record.text, error_line_, [&](std::string_view line) {
    ++stats_.lines;
    const Key key{miner_.add(line), kind};
    auto it = pending_.find(key);
    if (it == pending_.end()) {
      // The table holds what was seen in one interval; a burst of new shapes beyond its bound is
      // counted, not kept.
      if (pending_.size() >= 2 * miner_.options().max_templates) {
        ++stats_.lines_left_out;
        ++overflow_lines_;
        return;
      }
      it = pending_.emplace(key, Pending{}).first;
    }
    note(it->second, line, ns, record.time_known);
  });
}

std::vector<common::UnmatchedTemplate> UnmatchedTemplates::take(uint64_t* left_out, uint64_t* lines_left_out) {
  struct Candidate {
    common::UnmatchedTemplate t;
    bool fresh = false;   // its template was first seen in this interval
    uint64_t total = 0;   // its template's lines in all (fewer: more telling)
    common::TemplateId id = common::kNoTemplate;
  };
  std::vector<Candidate> all;
  all.reserve(returned_.size() + pending_.size());
  for (auto& r : returned_) all.push_back({std::move(r), true, 0, common::kNoTemplate});
  returned_.clear();
  for (auto& [key, p] : pending_) {
    Candidate c;
    c.id = key.first;
    c.t.count = p.count;
    c.t.first_line = std::move(p.first_line);
    c.t.first_ns = p.first_ns;
    c.t.time_known = p.time_known;
    c.t.kind = key.second;
    if (const auto* tmpl = miner_.find(key.first)) {
      c.t.text = tmpl->text;
      c.fresh = tmpl->first_seen > taken_at_;
      c.total = tmpl->count;
    } else {
      c.t.text = common::maskMessage(c.t.first_line);  // evicted since: its line's own shape
      c.fresh = true;
      c.total = c.t.count;
    }
    all.push_back(std::move(c));
  }
  pending_.clear();
  pending_bytes_ = 0;
  taken_at_ = miner_.records();
  std::stable_sort(all.begin(), all.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fresh != b.fresh) return a.fresh;
    if (a.total != b.total) return a.total < b.total;
    if (a.t.first_ns != b.t.first_ns) return a.t.first_ns < b.t.first_ns;
    return a.id < b.id;
  });
  std::vector<common::UnmatchedTemplate> out;
  if (lines_left_out) *lines_left_out += overflow_lines_;
  overflow_lines_ = 0;
  for (auto& c : all) {
    if (out.size() < options_.max_per_batch) {
      out.push_back(std::move(c.t));
      continue;
    }
    ++stats_.left_out;
    stats_.lines_left_out += c.t.count;
    if (left_out) ++*left_out;
    if (lines_left_out) *lines_left_out += c.t.count;
  }
  stats_.shipped += out.size();
  return out;
}

void UnmatchedTemplates::putBack(const std::vector<common::UnmatchedTemplate>& sightings) {
  stats_.shipped -= std::min<uint64_t>(stats_.shipped, sightings.size());
  returned_ = sightings;
}

size_t UnmatchedTemplates::memoryBytes() const {
  size_t returned = 0;
  for (const auto& r : returned_) returned += sizeof(r) + heapOf(r.text) + heapOf(r.first_line);
  // A map node: the key and value plus the tree's three pointers and colour.
  const size_t node = sizeof(std::pair<const Key, Pending>) + 4 * sizeof(void*);
  return miner_.memoryBytes() + error_line_.memoryBytes() + pending_.size() * node + pending_bytes_ + returned;
}

}  // namespace faultline::agent

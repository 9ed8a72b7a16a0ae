#include "common/symptom_aggregator.h"

#include <algorithm>
#include <climits>

namespace faultline::common {

void SymptomAggregator::add(Symptom s) {
  Key key{s.rule_id, s.node, s.device, s.boot_id, s.node.empty() ? s.field("rank") : std::string(),
          static_cast<int>(s.role)};
  auto it = open_.find(key);
  if (it == open_.end()) {
    open_.emplace(std::move(key), std::move(s));
    return;
  }
  Symptom& g = it->second;
  bool comparable = g.time_known && s.time_known;
  if (comparable && s.first_ns > g.last_ns + window_ns_) {
    closed_.push_back(std::move(g));
    g = std::move(s);
    return;
  }
  g.count += s.count;
  if (comparable) {
    g.first_ns = std::min(g.first_ns, s.first_ns);
    g.last_ns = std::max(g.last_ns, s.last_ns);
  } else if (!g.time_known && s.time_known) {
    g.first_ns = s.first_ns;
    g.last_ns = s.last_ns;
    g.time_known = true;
  }
  for (auto& e : s.evidence) {
    if (g.evidence.size() >= Symptom::kMaxEvidence) break;
    if (std::find(g.evidence.begin(), g.evidence.end(), e) == g.evidence.end()) g.evidence.push_back(std::move(e));
  }
}

std::vector<Symptom> SymptomAggregator::drainOlderThan(int64_t now_ns) {
  std::vector<Symptom> out = std::move(closed_);
  closed_.clear();
  for (auto it = open_.begin(); it != open_.end();) {
    // An untimed group (a live source's record without a stamp) carries its read time: it closes
    // by that, as a timed one does by its own.
    bool old = now_ns == INT64_MAX || it->second.last_ns + window_ns_ < now_ns;
    if (old) {
      out.push_back(std::move(it->second));
      it = open_.erase(it);
    } else {
      ++it;
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Symptom& a, const Symptom& b) {
    if (a.time_known != b.time_known) return a.time_known;
    return a.first_ns < b.first_ns;
  });
  return out;
}

std::vector<Symptom> SymptomAggregator::drainAll() { return drainOlderThan(INT64_MAX); }

}  // namespace faultline::common

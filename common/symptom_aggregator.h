// Collapses identical symptoms (same rule, node, device, boot) seen within a window into one
// symptom with first/last time, a count and the first few evidence lines. A job-wide log's
// symptom whose rank could not be placed on a node (node "") also keeps its rank apart: each
// rank is placed later, on its own node. Used on the node (before shipping), offline, and by
// `faultline job output`. Pure; not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/symptom.h"

namespace faultline::common {

class SymptomAggregator {
 public:
  explicit SymptomAggregator(int64_t window_ns = 300'000'000'000) : window_ns_(window_ns) {}

  // Adds one symptom; merges it into an open group when one matches within the window.
  void add(Symptom s);
  // Emits every group whose last occurrence is older than now_ns - window (by the symptoms'
  // own clock). Pass INT64_MAX to flush everything.
  std::vector<Symptom> drainOlderThan(int64_t now_ns);
  std::vector<Symptom> drainAll();
  size_t pending() const { return open_.size(); }

 private:
  // rule, node, device, boot, rank, role (a rule's start-up noise and its real faults stay apart)
  using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, int>;
  int64_t window_ns_;
  std::map<Key, Symptom> open_;
  std::vector<Symptom> closed_;  // groups pushed out of the window by a later occurrence
};

}  // namespace faultline::common

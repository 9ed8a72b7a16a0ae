#include "aggregator/metrics/metrics.h"

#include <fmt/format.h>

namespace faultline::aggregator {

namespace {
// Seconds; spans a fast SQLite commit (100 µs) to a slow verdict (a minute).
constexpr double kBuckets[] = {0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};

std::string escapeLabel(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}
}  // namespace

void Metrics::describe(const std::string& name, const std::string& help) {
  std::lock_guard lock(mu_);
  help_[name] = help;
  counters_[name];
}

void Metrics::add(const std::string& name, const std::string& label_key, const std::string& label_value, uint64_t n) {
  std::lock_guard lock(mu_);
  if (!label_key.empty()) label_keys_[name] = label_key;
  counters_[name][label_value] += n;
}

void Metrics::observe(const std::string& name, double seconds) {
  std::lock_guard lock(mu_);
  auto& h = histograms_[name];
  if (h.buckets.empty()) h.buckets.assign(std::size(kBuckets), 0);
  for (size_t i = 0; i < std::size(kBuckets); ++i)
    if (seconds <= kBuckets[i]) ++h.buckets[i];
  ++h.count;
  h.sum += seconds;
}

uint64_t Metrics::counter(const std::string& name, const std::string& label_value) const {
  std::lock_guard lock(mu_);
  auto it = counters_.find(name);
  if (it == counters_.end()) return 0;
  auto v = it->second.find(label_value);
  return v == it->second.end() ? 0 : v->second;
}

uint64_t Metrics::observations(const std::string& name) const {
  std::lock_guard lock(mu_);
  auto it = histograms_.find(name);
  return it == histograms_.end() ? 0 : it->second.count;
}

std::string Metrics::render(const std::map<std::string, double>& gauges) const {
  std::lock_guard lock(mu_);
  std::string out;
  for (const auto& [name, values] : counters_) {
    auto h = help_.find(name);
    if (h != help_.end()) out += fmt::format("# HELP {} {}\n", name, h->second);
    out += fmt::format("# TYPE {} counter\n", name);
    auto key = label_keys_.find(name);
    if (values.empty()) out += fmt::format("{} 0\n", name);
    for (const auto& [label, v] : values) {
      if (label.empty() || key == label_keys_.end()) out += fmt::format("{} {}\n", name, v);
      else out += fmt::format("{}{{{}=\"{}\"}} {}\n", name, key->second, escapeLabel(label), v);
    }
  }
  for (const auto& [name, h] : histograms_) {
    out += fmt::format("# TYPE {} histogram\n", name);
    for (size_t i = 0; i < std::size(kBuckets); ++i)
      out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBuckets[i], h.buckets[i]);
    out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, h.count, name, h.sum, name,
                       h.count);
  }
  for (const auto& [name, v] : gauges) out += fmt::format("# TYPE {} gauge\n{} {}\n", name, name, v);
  return out;
}

}  // namespace faultline::aggregator

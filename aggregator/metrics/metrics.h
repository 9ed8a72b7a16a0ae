// The aggregator's own counters and latency histograms, rendered in Prometheus text format for
// GET /metrics. Thread-safe (one mutex; updates are a map lookup and an add).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace faultline::aggregator {

class Metrics {
 public:
  // Counter `name` with one optional label (label_value "" = no label).
  void add(const std::string& name, const std::string& label_key = "", const std::string& label_value = "",
           uint64_t n = 1);
  // Observation in seconds for histogram `name`.
  void observe(const std::string& name, double seconds);
  uint64_t counter(const std::string& name, const std::string& label_value = "") const;
  uint64_t observations(const std::string& name) const;
  // Prometheus exposition text; `gauges` are added as-is (name -> value).
  std::string render(const std::map<std::string, double>& gauges = {}) const;
  // Declares a counter with a help text so it appears (as 0) before its first increment.
  void describe(const std::string& name, const std::string& help);

 private:
  struct Histogram {
    std::vector<uint64_t> buckets;
    uint64_t count = 0;
    double sum = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::string> help_;
  std::map<std::string, std::string> label_keys_;
  std::map<std::string, std::map<std::string, uint64_t>> counters_;
  std::map<std::string, Histogram> histograms_;
};

}  // namespace faultline::aggregator

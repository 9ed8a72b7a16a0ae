// The fleet view: across the jobs that ended in a time window, which nodes and which devices
// keep being named responsible, with those jobs as evidence, and which exact causes repeat
// (same rule on the same node/device/port pair). Pure over the verdicts it is given.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/store/store.h"

namespace faultline::aggregator {

struct FleetSuspect {
  std::string node;
  std::string device;  // "" for the node as a whole
  size_t jobs = 0;     // distinct failed jobs that blamed it
  double score = 0;    // sum of confidences
  std::vector<std::string> job_ids;
  std::vector<std::string> sub_domains;  // distinct, sorted
  int64_t first_ns = 0, last_ns = 0;     // ends of the first/last such job
};

struct FleetPattern {
  std::string rule_id;
  std::string node;
  std::string device;
  std::string detail;  // the cause's fields, "k=v k=v" (ports, peers)
  std::vector<std::string> job_ids;
};

struct FleetReport {
  int64_t since_ns = 0, until_ns = 0;
  size_t jobs = 0;           // failed jobs with a verdict in the window
  size_t systemic_jobs = 0;  // not blamed on nodes
  std::vector<FleetSuspect> nodes;    // ranked: jobs desc, score desc, name
  std::vector<FleetSuspect> devices;  // same, per (node, device)
  std::vector<FleetPattern> patterns; // causes seen in 2+ jobs
};

// `verdicts`: the latest revision per job; `job_end_ns` gives each job's end (for first/last).
FleetReport rankFleet(const std::vector<VerdictRow>& verdicts, const std::vector<JobRow>& jobs, int64_t since_ns,
                      int64_t until_ns, size_t min_jobs = 1);
// Convenience: reads the window from the store.
FleetReport rankFleet(Store& store, int64_t since_ns, int64_t until_ns, size_t min_jobs = 1);

nlohmann::json toJson(const FleetReport& r);

}  // namespace faultline::aggregator

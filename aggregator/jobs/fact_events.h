// The FACT observation API's request bodies (NVRx's FACT client; docs/api.md, "FACT observation
// API") -> the store's job events and job outputs. Pure parsing and rule matching, no I/O: the
// bodies are hostile input, validated with a reason for every refusal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "aggregator/store/store.h"
#include "common/metric_text.h"
#include "common/rule_engine.h"

namespace faultline::aggregator {

// POST /attributor: an AttributorInfo {"workload": {"id", "type", "job_start_time",
// "job_end_time", "status", "nodes", "ranks_per_node", "nranks", "exit_code_signal", ...},
// "metadata": {...}}. Keys faultline does not use (srun_cmd, name, username, framework,
// metadata) are accepted and ignored; the used ones are type-checked.
struct Attributor {
  std::string attributor_id;  // = the faultline job id (attributorIdOf(workload.id))
  std::string workload_id;
  JobUpdate update;  // a start (status RUNNING/PENDING) or an end
  bool ended = false;
};
std::optional<Attributor> attributorFromJson(const nlohmann::json& body, int64_t now_ns,
                                             std::string* error);

// The job id an attributor maps to: "fact-" + the workload id with every byte outside
// [A-Za-z0-9._-] as '.', a long one cut and made unique by a hash of the whole id. The same
// workload id always maps to the same job (a repeated POST /attributor revisits it).
std::string attributorIdOf(const std::string& workload_id);

// POST /attributor/{id}/observation: {"context": {"time_interval": {"start", "end"},
// "resources", "source": "syslog" | "applog", "format": "raw_loki_streams" |
// "prometheus_metrics"}, "body": STRING | streams}. A raw_loki_streams body is a JSON array of
// Loki streams (or {"streams": [...]}, Loki's push shape), as a string (what NVRx sends) or as
// JSON; each stream {"stream": {labels}, "values": [[ns_timestamp_string, line], ...]}, a line
// being plain text or a JSON record {"body", "severity", "attributes": {"hostname", "appname"}}.
// A prometheus_metrics body is a string: an exporter's scrape in the Prometheus text or OpenMetrics
// format (common/metric_text.h), read through the metric rules like a PromQL answer.
struct ObservationLimits {
  size_t max_streams = 10000;
  size_t max_values = 1000000;  // lines over all streams
  size_t max_line_bytes = 64 << 10;
};
// What a job's earlier prometheus_metrics observations left: their series (each series' samples
// before the job's start, or its first sample, are the baseline a later one is measured from) and
// the hits already stored as symptoms (rule id and series, each stored once).
struct PostedMetrics {
  std::vector<common::MetricSeries> series;
  std::set<std::string> reported;
  int64_t used_ns = 0;  // when an observation last added to it (the holder's eviction order)
};

struct ObservationContext {
  // The job's window (its start and end, 0 = unknown) widened by this margin: a Loki stamp
  // outside it and outside the observation's own time_interval is not the line's time.
  int64_t job_start_ns = 0, job_end_ns = 0, margin_ns = 30'000'000'000;
  std::vector<std::string> job_nodes;
  std::function<std::string(int)> node_of_rank;  // may be empty
  std::string observation_id;                    // names the job outputs: "fact:ID:SOURCE:NODE"
  // prometheus_metrics: the job's earlier metric observations, added to and read (null: the
  // metrics are read alone, a scrape its own baseline).
  PostedMetrics* metrics = nullptr;
  common::MetricTextLimits metric_limits;
};
struct Observation {
  std::string source;  // syslog | applog
  std::string format;  // raw_loki_streams | prometheus_metrics
  // One job output per (node, kind of log) the streams held; a prometheus_metrics body gives one
  // (job-wide, its symptoms on the nodes their series name), a Loki body without a stream one
  // whose coverage says so.
  std::vector<JobOutput> outputs;
  uint64_t lines = 0, out_of_window = 0;
};
std::optional<Observation> observationFromJson(const nlohmann::json& body,
                                               const ObservationContext& ctx,
                                               const common::RuleEngine& engine,
                                               const std::string& job_id, int64_t now_ns,
                                               std::string* error,
                                               const ObservationLimits& limits = {});

}  // namespace faultline::aggregator

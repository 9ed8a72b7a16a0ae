// Metric evidence over PromQL (issue 31): each metric rule (common/metric_rule.h) is one
// range query for the job's nodes and window against a Prometheus-API endpoint (Prometheus,
// Mimir, VictoriaMetrics, Thanos: POST /api/v1/query_range), and the series that meet the rule's
// condition become symptoms that join the log symptoms in the same correlation.
//
// Every query's outcome is a coverage entry (source "prometheus URL METRIC", format "promql"):
// status ok (series for the job's nodes came back), empty (none did), or error (the endpoint
// could not be reached, refused the query or answered something else) with the reason — never
// a silent skip. Blocking; one connection per query; never throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/diagnosis.h"
#include "common/job.h"
#include "common/rule_set.h"
#include "common/symptom.h"

namespace faultline::aggregator {

struct PrometheusOptions {
  std::string url;           // http(s)://host:port[/path prefix], e.g. http://127.0.0.1:9090
  std::string bearer_token;  // sent as "Authorization: Bearer ..." when set
  std::string basic_user;    // basic auth when set (with basic_password)
  std::string basic_password;
  std::string ca_file;       // https: the CA the server's certificate must chain to ("" = system's)
  std::chrono::milliseconds timeout{10'000};
  int64_t baseline_ns = 300'000'000'000;  // before the start: a counter's value before the job
  int64_t margin_ns = 30'000'000'000;     // after the end (clock skew, teardown)
  int64_t min_step_ns = 15'000'000'000;   // at least the exporters' scrape interval
  size_t max_points = 10'000;             // per series (Prometheus refuses over 11,000)
};

struct MetricEvidence {
  std::vector<common::Symptom> symptoms;
  std::vector<common::CoverageEntry> coverage;  // one per metric rule queried
};

// The job's window is [start, end]: a job without a start is looked at from an hour before its
// end; a job without an end (running) up to `now_ns`. No metric rules or no nodes: nothing asked.
MetricEvidence queryMetricEvidence(const PrometheusOptions& options, const common::RuleSet& rules,
                                   const common::JobInfo& job, int64_t now_ns);

// The PromQL a rule asks for the given nodes (exposed for tests and `--explain`).
std::string metricQuery(const common::MetricRule& rule, const std::vector<std::string>& nodes);

}  // namespace faultline::aggregator

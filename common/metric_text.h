// Metrics as an exporter's scrape prints them — the Prometheus text exposition format (0.0.4) and
// OpenMetrics text — read into series, and metric rules (common/metric_rule.h) evaluated over
// series held in memory rather than asked of a PromQL endpoint. Used where metrics arrive as
// text: FACT `prometheus_metrics` observations (aggregator/jobs/fact_events.h).
//
// Text format: `# HELP` / `# TYPE` / `# UNIT` comments, `# EOF` (OpenMetrics), and samples
// `NAME{label="value",...} VALUE [TIMESTAMP]` with VALUE a float, `+Inf`, `-Inf` or `NaN`. A
// Prometheus text timestamp is milliseconds since the epoch; OpenMetrics (a body ending in
// `# EOF`) writes seconds, fractions allowed. A sample without one takes the caller's time (the
// scrape's). An OpenMetrics exemplar (`# {...} v`) after a sample is ignored.
//
// Hostile input: a line that is not a sample or a comment is counted as malformed with the
// first one's reason, never a crash and never the end of the read; the series and line limits
// stop a flood and say so.
//
// Pure: no I/O, no clock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/metric_rule.h"

namespace faultline::common {

struct MetricTextLimits {
  size_t max_series = 100'000;
  size_t max_line_bytes = 64 << 10;
  size_t max_samples_per_series = 64;  // the first (a baseline) and the newest are kept
};

struct MetricText {
  std::vector<MetricSeries> series;  // in first-seen order, samples in time order
  size_t samples = 0;                // samples read into `series`
  size_t malformed = 0;              // lines that were neither a sample nor a comment
  size_t over_limit = 0;             // samples of series beyond max_series, or lines too long
  std::string first_problem;         // "line N: why" of the first malformed line
  bool openmetrics = false;          // the body ended in `# EOF`
};

// Reads a scrape. `default_ns`: the time of samples that carry none (UTC ns).
MetricText parseMetricText(std::string_view text, int64_t default_ns, const MetricTextLimits& limits = {});

// The series' identity: its name and labels, sorted, as PromQL prints them.
std::string metricSeriesKey(const MetricSeries& series);

// Adds `more`'s samples to the series with the same key in `into` (or a new series), keeping time
// order, one sample per time (a later one replaces it) and at most max_samples_per_series (the
// first and the newest). Returns the samples that did not fit under max_series.
size_t mergeMetricSeries(std::vector<MetricSeries>& into, const std::vector<MetricSeries>& more,
                         const MetricTextLimits& limits = {});

// Whether a series meets a matcher list in PromQL syntax (`a="b", c!~"x|y"`: = != =~ !~, the
// regular expressions anchored at both ends as PromQL's are). "" matches every series. nullopt
// and *error when the list does not parse.
std::optional<bool> seriesMatches(const MetricSeries& series, std::string_view matchers, std::string* error);

// The series a metric rule reads from those held: its metric's series that meet its selector,
// or, for a rule with an `expr`, the expression's result where it has one of the two shapes the
// rule packs use — `A{selector} / B{selector}` (series with the same labels but the name divided
// at the same times; the result carries A's labels without the name, as PromQL's) and
// `A{selector} or B{selector}` (A's series, and B's whose labels A lacks). Another expression:
// nothing, and *unsupported says why.
std::vector<MetricSeries> metricRuleSeries(const MetricRule& rule, const std::vector<MetricSeries>& held,
                                           std::string* unsupported);

}  // namespace faultline::common

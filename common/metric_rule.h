// Metric rules: time series a PromQL endpoint returns for a job's nodes and window, read as
// symptoms that join the same correlation as log symptoms (issue 31).
//
// A metric rule is data (rules/metrics/*.yaml, top-level key `metric_rules`, docs/rules.md
// "Metric rules"): which series (a metric, or a PromQL expression over the job's nodes), which
// label names the node and which the GPU, the condition that makes a series a symptom, and the
// symptom's classification. A condition is met at one sample, the symptom's time:
//   increase            a counter rose by more than `threshold` (0) since the last sample before
//                       the window (a fall is a counter reset: the new value counts from 0);
//   above / below       a gauge above / below `threshold`, held for `for` seconds;
//   equals              a gauge equal to `threshold` (a state), held for `for` seconds;
//   changes_to_nonzero  a gauge that takes a non-zero value other than the one before (DCGM's
//                       XID gauge holds the last Xid's number: an Xid from before the job is
//                       not the job's);
//   bits_set            a bit mask gauge with any bit of `mask` set (clock-event reasons);
//                       these four with `edge: true` count only a change into the condition.
// `as_rule: "xid.{value}"` names the log rule the symptom stands for when the set has it (its
// id and classification, so the causal knowledge written for the log line applies); otherwise
// the metric rule's own id and classification.
//
// Pure: no I/O (the PromQL client is aggregator/evidence/prometheus.h).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/symptom.h"

namespace YAML {
class Node;
}

namespace faultline::common {

struct RuleSet;

enum class MetricCondition { kIncrease, kAbove, kBelow, kEquals, kChangesToNonZero, kBitsSet };
std::string_view metricConditionName(MetricCondition c);
std::optional<MetricCondition> parseMetricCondition(std::string_view s);

// One series: its labels (with "__name__" when the endpoint gave it) and samples in time order.
struct MetricSeries {
  std::map<std::string, std::string> labels;
  std::vector<std::pair<int64_t, double>> samples;  // UTC ns, value
  const std::string& label(const std::string& name) const;
};

// An example of a metric rule: a series written as PromQL prints one
// (`NAME{label="value",...}`) and its values one step (15 s) apart, the first of them one step
// before the window: "0 0 79 79".
struct MetricExample {
  std::string series;
  std::string samples;
  // What the symptom must be (match examples): the rule id it stands as, its node and device.
  std::string expect_rule, expect_node, expect_device;
  int line = 0;
};

struct MetricRule {
  std::string id;
  std::string since;
  std::string pack;
  std::string file;
  int line = 0;
  std::string metric;                      // the series' name
  // A PromQL expression instead of `METRIC{...}`, "{selector}" standing for the matchers that
  // pick the job's nodes (and `selector`): node_memory_MemAvailable_bytes{selector} / ...
  std::string expr;
  std::string selector;                    // extra matchers, PromQL syntax: fstype!~"tmpfs|overlay"
  std::vector<std::string> node_labels;    // labels that may name the node, first present wins
  std::vector<std::string> device_labels;  // labels that may name the GPU (PCI bus id, UUID, index)
  MetricCondition condition = MetricCondition::kIncrease;
  double threshold = 0;
  uint64_t mask = 0;
  int64_t for_ns = 0;
  // above / below / equals: only a change into the condition counts — a sample that did not meet
  // it (the one before the window, or one in it) comes first. A port down since before the job
  // (an uncabled one) is not the job's event.
  bool edge = false;
  std::string as_rule;
  std::string symptom;
  SubDomain sub_domain = SubDomain::kNone;
  std::string category;
  Role role = Role::kContext;
  Severity severity = Severity::kWarning;
  std::string summary_template;  // {node} {device} {value} {from} {label.NAME}
  std::string meaning;
  std::string action;
  std::vector<MetricExample> match_examples;
  std::vector<MetricExample> no_match_examples;
};

// Where a series met the rule's condition.
struct MetricHit {
  int64_t time_ns = 0;  // the first sample that met it
  int64_t last_ns = 0;  // the last sample of the window that still met it
  double value = 0;     // the value there
  double from = 0;      // the value before (the baseline of an increase)
};

// The series against the condition over [start_ns, end_ns]; samples before start_ns are the
// baseline only. nullopt when the condition is not met in the window.
std::optional<MetricHit> evaluateMetricRule(const MetricRule& rule, const MetricSeries& series, int64_t start_ns,
                                            int64_t end_ns);

// The node a series names: the first of the rule's node labels whose value (an "instance"
// host:port without its port) is one of `nodes`, as given or by short name (before the first
// dot). "" when none names one of them.
std::string metricSeriesNode(const MetricRule& rule, const MetricSeries& series, const std::vector<std::string>& nodes);

// The symptom a hit stands for. `rules` (may be null) resolves as_rule. `origin` names where the
// series came from (the endpoint), for the evidence line.
Symptom metricSymptom(const MetricRule& rule, const MetricSeries& series, const MetricHit& hit, const std::string& node,
                      const RuleSet* rules, const std::string& origin);

// "NAME{a="b",c="d"}" → labels (with __name__); nullopt and *error on a malformed selector.
std::optional<MetricSeries> parseSeriesSelector(std::string_view text, std::string* error);

// Loads the `metric_rules` list of one pack; problems appended as "file:line: why".
void loadMetricRules(const std::string& path, const YAML::Node& doc, std::vector<MetricRule>& out,
                     std::vector<std::string>& errors);

// Runs every metric rule's examples: a match example must give a symptom of the expected rule,
// node and device; a no_match example none. Problems as "file:line: why".
std::vector<std::string> checkMetricRuleExamples(const RuleSet& rules);

}  // namespace faultline::common

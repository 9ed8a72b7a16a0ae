#include "common/metric_rule.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <set>

#include "common/diagnosis.h"
#include "common/job.h"
#include "common/rule_set.h"

namespace faultline::common {

namespace {

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kExampleStepNs = 15 * kSecond;
constexpr int64_t kExampleStartNs = 1'700'000'000 * kSecond;

const std::string kEmpty;

std::string formatValue(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{:g}", v);
}

bool meets(const MetricRule& r, double v) {
  switch (r.condition) {
    case MetricCondition::kAbove: return v > r.threshold;
    case MetricCondition::kBelow: return v < r.threshold;
    case MetricCondition::kEquals: return v == r.threshold;
    case MetricCondition::kBitsSet:
      return std::isfinite(v) && v >= 0 && (static_cast<uint64_t>(v) & r.mask) != 0;
    default: return false;
  }
}

std::string shortName(std::string_view host) {
  return std::string(host.substr(0, host.find('.')));
}

// A node label's host: "instance" is host:port (an IPv6 [addr]:port is left as it is).
std::string labelHost(std::string v) {
  if (auto colon = v.rfind(':'); colon != std::string::npos && v.find(':') == colon && !v.empty() && v.front() != '[')
    v.resize(colon);
  return v;
}

bool sameHost(std::string_view a, std::string_view b) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  return lower(a) == lower(b) || lower(shortName(a)) == lower(shortName(b));
}

}  // namespace

std::string_view metricConditionName(MetricCondition c) {
  switch (c) {
    case MetricCondition::kIncrease: return "increase";
    case MetricCondition::kAbove: return "above";
    case MetricCondition::kBelow: return "below";
    case MetricCondition::kEquals: return "equals";
    case MetricCondition::kChangesToNonZero: return "changes_to_nonzero";
    case MetricCondition::kBitsSet: return "bits_set";
  }
  return "increase";
}

std::optional<MetricCondition> parseMetricCondition(std::string_view s) {
  for (auto c : {MetricCondition::kIncrease, MetricCondition::kAbove, MetricCondition::kBelow, MetricCondition::kEquals,
                 MetricCondition::kChangesToNonZero, MetricCondition::kBitsSet})
    if (metricConditionName(c) == s) return c;
  return std::nullopt;
}

const std::string& MetricSeries::label(const std::string& name) const {
  auto it = labels.find(name);
  return it == labels.end() ? kEmpty : it->second;
}

std::optional<MetricHit> evaluateMetricRule(const MetricRule& r, const MetricSeries& series, int64_t start_ns,
                                            int64_t end_ns) {
  const auto& s = series.samples;
  std::optional<double> before;  // the last sample before the window
  size_t i = 0;
  for (; i < s.size() && s[i].first < start_ns; ++i)
    if (std::isfinite(s[i].second)) before = s[i].second;
  std::optional<MetricHit> hit;
  switch (r.condition) {
    case MetricCondition::kIncrease: {
      // Counted from the baseline; a fall is a reset (the new value counts from zero).
      std::optional<double> prev = before;
      double rise = 0;
      for (; i < s.size() && s[i].first <= end_ns; ++i) {
        const double v = s[i].second;
        if (!std::isfinite(v)) continue;
        if (!prev) {  // the window's first sample is the baseline
          prev = v;
          continue;
        }
        rise += v >= *prev ? v - *prev : v;
        prev = v;
        if (rise > r.threshold) {
          if (!hit) hit = MetricHit{s[i].first, s[i].first, rise, before.value_or(0)};
          hit->last_ns = s[i].first;
          hit->value = rise;
        }
      }
      break;
    }
    case MetricCondition::kChangesToNonZero: {
      std::optional<double> prev = before;
      for (; i < s.size() && s[i].first <= end_ns; ++i) {
        const double v = s[i].second;
        if (!std::isfinite(v)) continue;
        if (v != 0 && (!prev || v != *prev) && !hit) hit = MetricHit{s[i].first, s[i].first, v, prev.value_or(0)};
        if (hit && v == hit->value) hit->last_ns = s[i].first;
        prev = v;
      }
      break;
    }
    default: {
      // Held for `for`: from the first sample of a run that meets it, up to one that does not.
      std::optional<std::pair<int64_t, double>> run;
      bool armed = !r.edge || (before && !meets(r, *before));  // edge: a sample not meeting it came first
      for (; i < s.size() && s[i].first <= end_ns; ++i) {
        const double v = s[i].second;
        if (!std::isfinite(v) || !meets(r, v)) {
          run.reset();
          if (std::isfinite(v)) armed = true;
          continue;
        }
        if (!armed) continue;
        if (!run) run = std::make_pair(s[i].first, v);
        if (!hit && s[i].first - run->first >= r.for_ns)
          hit = MetricHit{run->first, s[i].first, run->second, before.value_or(0)};
        if (hit) hit->last_ns = s[i].first;
      }
      break;
    }
  }
  return hit;
}

std::string metricSeriesNode(const MetricRule& rule, const MetricSeries& series, const std::vector<std::string>& nodes) {
  for (const auto& name : rule.node_labels) {
    const std::string v = labelHost(series.label(name));
    if (v.empty()) continue;
    for (const auto& n : nodes)
      if (sameHost(v, n)) return n;
  }
  return "";
}

Symptom metricSymptom(const MetricRule& rule, const MetricSeries& series, const MetricHit& hit, const std::string& node,
                      const RuleSet* rules, const std::string& origin) {
  // The symptom stands as the log rule as_rule names when the set has it, else as this rule.
  auto classifyAs = [](Symptom& s, const auto& r) {
    s.rule_id = r.id;
    s.symptom = r.symptom;
    s.sub_domain = r.sub_domain;
    s.category = r.category;
    s.role = r.role;
    s.severity = r.severity;
  };
  Symptom s;
  const std::string value = formatValue(hit.value);
  const Rule* log = nullptr;
  if (!rule.as_rule.empty() && rules) {
    std::string id = rule.as_rule;
    if (auto at = id.find("{value}"); at != std::string::npos) id.replace(at, 7, value);
    log = rules->find(id);
  }
  if (log && !log->deprecated) classifyAs(s, *log);
  else classifyAs(s, rule);
  s.node = node;
  for (const auto& name : rule.device_labels) {
    const std::string& v = series.label(name);
    if (v.empty()) continue;
    s.device = normalizePciId(v);
    break;
  }
  s.source = origin.empty() ? "prometheus" : origin;
  s.source_kind = SourceKind::kMetric;
  s.first_ns = hit.time_ns;
  s.last_ns = hit.last_ns;
  s.time_known = true;
  s.count = 1;
  for (const auto& [k, v] : series.labels)
    if (k != "__name__") s.fields.emplace("label." + k, v);
  s.fields["value"] = value;
  s.fields["from"] = formatValue(hit.from);
  s.fields["metric"] = rule.metric;
  // The evidence line: the series as PromQL prints it and what it did.
  std::string labels;
  for (const auto& [k, v] : series.labels)
    if (k != "__name__") labels += fmt::format("{}{}=\"{}\"", labels.empty() ? "" : ",", k, v);
  std::string change = rule.condition == MetricCondition::kIncrease
                           ? fmt::format("rose by {} from {}", value, formatValue(hit.from))
                       : rule.condition == MetricCondition::kChangesToNonZero
                           ? fmt::format("changed from {} to {}", formatValue(hit.from), value)
                           : fmt::format("was {} ({} {})", value, metricConditionName(rule.condition),
                                         rule.condition == MetricCondition::kBitsSet
                                             ? fmt::format("0x{:x}", rule.mask)
                                             : formatValue(rule.threshold));
  s.evidence.push_back(fmt::format("{}{{{}}} {} at {} ({})", rule.metric, labels, change,
                                   formatTimeNs(hit.time_ns), s.source));
  // The summary: {node} {device} {value} {from} {label.NAME}.
  std::string out;
  const std::string& t = rule.summary_template;
  for (size_t p = 0; p < t.size();) {
    if (t[p] == '{') {
      const size_t close = t.find('}', p);
      if (close != std::string::npos) {
        const std::string key = t.substr(p + 1, close - p - 1);
        if (key == "node") out += node;
        else if (key == "device") out += s.device;
        else if (key == "value") out += value;
        else if (key == "from") out += formatValue(hit.from);
        else if (key.rfind("label.", 0) == 0) out += series.label(key.substr(6));
        else out += t.substr(p, close - p + 1);
        p = close + 1;
        continue;
      }
    }
    out += t[p++];
  }
  s.summary = out;
  return s;
}

std::optional<MetricSeries> parseSeriesSelector(std::string_view text, std::string* error) {
  MetricSeries series;
  auto isName = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; };
  size_t i = 0;
  while (i < text.size() && isName(text[i])) ++i;
  if (i == 0) {
    *error = "a series starts with its metric's name";
    return std::nullopt;
  }
  series.labels["__name__"] = std::string(text.substr(0, i));
  if (i == text.size()) return series;
  if (text[i] != '{' || text.back() != '}') {
    *error = "labels go in {...} after the name";
    return std::nullopt;
  }
  std::string_view rest = text.substr(i + 1, text.size() - i - 2);
  while (!rest.empty()) {
    size_t k = 0;
    while (k < rest.size() && isName(rest[k])) ++k;
    if (k == 0 || k + 1 >= rest.size() || rest[k] != '=' || rest[k + 1] != '"') {
      *error = fmt::format("expected label=\"value\" at '{}'", rest);
      return std::nullopt;
    }
    std::string value;
    size_t j = k + 2;
    for (; j < rest.size() && rest[j] != '"'; ++j) {
      if (rest[j] == '\\' && j + 1 < rest.size()) ++j;
      value += rest[j];
    }
    if (j >= rest.size()) {
      *error = "a label value without its closing quote";
      return std::nullopt;
    }
    series.labels[std::string(rest.substr(0, k))] = value;
    rest.remove_prefix(j + 1);
    if (!rest.empty() && rest.front() == ',') rest.remove_prefix(1);
  }
  return series;
}

void loadMetricRules(const std::string& path, const YAML::Node& doc, std::vector<MetricRule>& out,
                     std::vector<std::string>& errors) {
  static const std::set<std::string> kKeys = {
      "id", "since", "metric", "expr", "selector", "node_labels", "device_labels", "condition", "threshold",
      "mask", "for", "edge", "as_rule", "symptom", "sub_domain", "category", "role", "severity", "summary", "meaning",
      "action", "examples"};
  auto problem = [&](const YAML::Node& at, const std::string& why) {
    errors.push_back(fmt::format("{}:{}: {}", path, at.IsDefined() ? at.Mark().line + 1 : 0, why));
  };
  const YAML::Node list = doc["metric_rules"];
  if (!list.IsSequence()) {
    problem(list, "metric_rules must be a list");
    return;
  }
  std::string pack = path.substr(path.find_last_of('/') + 1);
  if (auto dot = pack.rfind('.'); dot != std::string::npos) pack.resize(dot);
  for (const auto& node : list) {
    const size_t before = errors.size();
    MetricRule r;
    r.file = path;
    r.pack = pack;
    r.line = node.Mark().line + 1;
    if (!node.IsMap()) {
      problem(node, "a metric rule must be a mapping");
      continue;
    }
    for (const auto& kv : node) {
      const auto key = kv.first.as<std::string>();
      if (!kKeys.count(key)) problem(kv.first, fmt::format("unknown key '{}'", key));
    }
    auto str = [&](const char* key, bool required) {
      const YAML::Node v = node[key];
      if (!v) {
        if (required) problem(node, fmt::format("metric rule {}: '{}' is required", r.id, key));
        return std::string();
      }
      if (!v.IsScalar()) {
        problem(v, fmt::format("'{}' must be a string", key));
        return std::string();
      }
      return v.as<std::string>();
    };
    auto strings = [&](const char* key) {
      std::vector<std::string> v;
      const YAML::Node n = node[key];
      if (!n) return v;
      if (!n.IsSequence()) problem(n, fmt::format("'{}' must be a list", key));
      else
        for (const auto& e : n) v.push_back(e.as<std::string>());
      return v;
    };
    r.id = str("id", true);
    r.since = str("since", true);
    r.metric = str("metric", true);
    r.expr = str("expr", false);
    r.selector = str("selector", false);
    r.node_labels = strings("node_labels");
    r.device_labels = strings("device_labels");
    if (r.node_labels.empty()) problem(node, fmt::format("metric rule {}: 'node_labels' is required", r.id));
    if (auto c = parseMetricCondition(str("condition", true))) r.condition = *c;
    else problem(node["condition"], "condition must be one of increase, above, below, equals, changes_to_nonzero, bits_set");
    auto number = [&](const char* key, double* out_v) {
      const std::string v = str(key, false);
      if (v.empty()) return;
      char* end = nullptr;
      *out_v = std::strtod(v.c_str(), &end);
      if (end == v.c_str() || *end) problem(node[key], fmt::format("'{}' must be a number", key));
    };
    number("threshold", &r.threshold);
    double for_s = 0;
    number("for", &for_s);
    r.for_ns = static_cast<int64_t>(for_s * kSecond);
    if (std::string m = str("mask", false); !m.empty()) r.mask = std::strtoull(m.c_str(), nullptr, 0);
    if (r.condition == MetricCondition::kBitsSet && r.mask == 0) problem(node, "bits_set needs a non-zero 'mask'");
    r.as_rule = str("as_rule", false);
    if (const auto e = node["edge"]) r.edge = e.as<bool>();
    r.symptom = str("symptom", true);
    r.category = str("category", true);
    if (auto d = parseSubDomain(str("sub_domain", true))) r.sub_domain = *d;
    else problem(node["sub_domain"], "unknown sub_domain");
    if (auto role = parseRole(str("role", true))) r.role = *role;
    else problem(node["role"], "unknown role");
    if (auto sev = parseSeverity(str("severity", true))) r.severity = *sev;
    else problem(node["severity"], "unknown severity");
    r.summary_template = str("summary", true);
    r.meaning = str("meaning", true);
    r.action = str("action", true);
    if (r.expr.find("{selector}") == std::string::npos && !r.expr.empty())
      problem(node["expr"], "expr must hold {selector} where the job's nodes are matched");
    const YAML::Node ex = node["examples"];
    if (!ex || !ex["match"]) problem(node, fmt::format("metric rule {}: needs examples.match", r.id));
    for (const char* kind : {"match", "no_match"}) {
      if (!ex || !ex[kind]) continue;
      for (const auto& e : ex[kind]) {
        MetricExample m;
        m.line = e.Mark().line + 1;
        if (!e.IsMap() || !e["series"] || !e["samples"]) {
          problem(e, "an example has 'series' and 'samples'");
          continue;
        }
        m.series = e["series"].as<std::string>();
        m.samples = e["samples"].as<std::string>();
        if (const auto expect = e["expect"]) {
          if (expect["rule"]) m.expect_rule = expect["rule"].as<std::string>();
          if (expect["node"]) m.expect_node = expect["node"].as<std::string>();
          if (expect["device"]) m.expect_device = expect["device"].as<std::string>();
        }
        (std::string_view(kind) == "match" ? r.match_examples : r.no_match_examples).push_back(std::move(m));
      }
    }
    if (errors.size() == before) out.push_back(std::move(r));
  }
}

std::vector<std::string> checkMetricRuleExamples(const RuleSet& rules) {
  std::vector<std::string> problems;
  std::set<std::string> ids;
  for (const auto& r : rules.metric_rules) {
    if (!ids.insert(r.id).second || rules.find(r.id))
      problems.push_back(fmt::format("{}:{}: duplicate rule id '{}'", r.file, r.line, r.id));
    auto run = [&](const MetricExample& ex, bool want) {
      std::string error;
      auto series = parseSeriesSelector(ex.series, &error);
      if (!series) {
        problems.push_back(fmt::format("{}:{}: metric rule {}: example series: {}", r.file, ex.line, r.id, error));
        return;
      }
      // Values one step apart; the first is the baseline, one step before the window.
      int64_t t = kExampleStartNs - kExampleStepNs;
      const char* p = ex.samples.c_str();
      for (char* end = nullptr;; p = end, t += kExampleStepNs) {
        while (*p == ' ') ++p;
        if (!*p) break;
        const double v = std::strtod(p, &end);
        if (end == p) {
          problems.push_back(fmt::format("{}:{}: metric rule {}: samples must be numbers: \"{}\"", r.file, ex.line,
                                         r.id, ex.samples));
          return;
        }
        series->samples.emplace_back(t, v);
      }
      std::vector<std::string> nodes;
      for (const auto& l : r.node_labels)
        if (!series->label(l).empty()) nodes.push_back(shortName(labelHost(series->label(l))));
      const std::string node = metricSeriesNode(r, *series, nodes);
      auto hit = node.empty() ? std::nullopt : evaluateMetricRule(r, *series, kExampleStartNs, t);
      if (!want) {
        if (hit)
          problems.push_back(fmt::format("{}:{}: metric rule {}: no_match example met the condition: {} {}", r.file,
                                         ex.line, r.id, ex.series, ex.samples));
        return;
      }
      if (!hit) {
        problems.push_back(fmt::format("{}:{}: metric rule {}: match example {}: {} {}", r.file, ex.line, r.id,
                                       node.empty() ? "names no node" : "does not meet the condition", ex.series,
                                       ex.samples));
        return;
      }
      const Symptom s = metricSymptom(r, *series, *hit, node, &rules, "example");
      const std::string want_rule = ex.expect_rule.empty() ? r.id : ex.expect_rule;
      if (s.rule_id != want_rule)
        problems.push_back(fmt::format("{}:{}: metric rule {}: example gave rule {}, expected {}", r.file, ex.line,
                                       r.id, s.rule_id, want_rule));
      if (!ex.expect_node.empty() && s.node != ex.expect_node)
        problems.push_back(fmt::format("{}:{}: metric rule {}: example gave node '{}', expected '{}'", r.file, ex.line,
                                       r.id, s.node, ex.expect_node));
      if (!ex.expect_device.empty() && s.device != ex.expect_device)
        problems.push_back(fmt::format("{}:{}: metric rule {}: example gave device '{}', expected '{}'", r.file,
                                       ex.line, r.id, s.device, ex.expect_device));
    };
    for (const auto& ex : r.match_examples) run(ex, true);
    for (const auto& ex : r.no_match_examples) run(ex, false);
  }
  return problems;
}

}  // namespace faultline::common

#include "aggregator/evidence/prometheus.h"

#include <fmt/format.h>
#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"

namespace faultline::aggregator {

namespace {

constexpr int64_t kSecond = 1'000'000'000;

// A node name as an RE2 literal, inside a PromQL double-quoted string (backslashes doubled).
std::string regexLiteral(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view(".^$*+?()[]{}|\\-").find(c) != std::string_view::npos) out += "\\\\";
    if (c == '"') out += '\\';
    out += c;
  }
  return out;
}

std::string base64(const std::string& s) {
  std::string out(4 * ((s.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(std::max(n, 0)));
  return out;
}

std::string seconds(int64_t ns) { return fmt::format("{}.{:03}", ns / kSecond, (ns % kSecond) / 1'000'000); }

}  // namespace

std::string metricQuery(const common::MetricRule& rule, const std::vector<std::string>& nodes) {
  std::string names;
  for (const auto& n : nodes) names += (names.empty() ? "" : "|") + regexLiteral(n);
  // The node as given, with a domain after it, or with a port (instance).
  const std::string regex = "(?:" + names + ")(?:[.:].*)?";
  const std::string base = rule.expr.empty() ? rule.metric + "{selector}" : rule.expr;
  std::string query;
  for (const auto& label : rule.node_labels) {
    std::string matchers = label + "=~\"" + regex + "\"";
    if (!rule.selector.empty()) matchers += "," + rule.selector;
    std::string part = base;
    for (size_t at; (at = part.find("{selector}")) != std::string::npos;) part.replace(at, 10, "{" + matchers + "}");
    query += (query.empty() ? "(" : " or (") + part + ")";
  }
  return query;
}

MetricEvidence queryMetricEvidence(const PrometheusOptions& o, const common::RuleSet& rules,
                                   const common::JobInfo& job, int64_t now_ns) {
  MetricEvidence out;
  if (rules.metric_rules.empty() || job.nodes.empty()) return out;
  const int64_t end = job.end_ns ? job.end_ns : now_ns;
  const int64_t start = job.start_ns ? job.start_ns : end - 3600 * kSecond;
  const int64_t from = start - o.baseline_ns, to = end + o.margin_ns;
  const int64_t step = std::max(o.min_step_ns, (to - from) / static_cast<int64_t>(std::max<size_t>(o.max_points, 1)));
  HttpCallExtras extras;
  extras.content_type = "application/x-www-form-urlencoded";
  if (!o.basic_user.empty()) extras.authorization = "Basic " + base64(o.basic_user + ":" + o.basic_password);
  std::string origin = o.url;  // no credentials in it: they travel in headers
  for (const auto& rule : rules.metric_rules) {
    common::CoverageEntry cov;
    cov.source = "prometheus " + o.url + " " + rule.metric;
    cov.format = "promql";
    const std::string body = "query=" + urlEncode(metricQuery(rule, job.nodes)) + "&start=" + seconds(from) +
                             "&end=" + seconds(to) + "&step=" + seconds(step);
    std::string error;
    auto res = httpCall(o.url, "POST", "/api/v1/query_range", body, o.bearer_token, o.timeout, &error, o.ca_file,
                        extras);
    nlohmann::json j;
    if (res) {
      j = nlohmann::json::parse(res->body, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        error = fmt::format("HTTP {}: not a Prometheus API answer", res->status);
      else if (j.value("status", "") != "success")
        error = fmt::format("HTTP {}: {}: {}", res->status, j.value("errorType", "error"), j.value("error", ""));
      else if (!j.contains("data") || !j["data"].is_object() || j["data"].value("resultType", "") != "matrix" ||
               !j["data"].contains("result") || !j["data"]["result"].is_array())
        error = fmt::format("HTTP {}: the answer holds no matrix", res->status);
    }
    if (!error.empty()) {
      cov.status = "error";
      cov.reason = error;
      out.coverage.push_back(std::move(cov));
      continue;
    }
    size_t series_for_job = 0, malformed = 0;
    for (const auto& r : j["data"]["result"]) {
      common::MetricSeries series;
      if (!r.is_object() || !r.contains("metric") || !r["metric"].is_object() || !r.contains("values") ||
          !r["values"].is_array()) {
        ++malformed;
        continue;
      }
      for (const auto& [k, v] : r["metric"].items())
        if (v.is_string()) series.labels[k] = v.get<std::string>();
      for (const auto& p : r["values"]) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number() || !p[1].is_string()) {
          ++malformed;
          continue;
        }
        const double t = p[0].get<double>();
        const std::string v = p[1].get<std::string>();
        char* endp = nullptr;
        const double value = std::strtod(v.c_str(), &endp);
        if (endp == v.c_str() || !std::isfinite(t)) {
          ++malformed;
          continue;
        }
        series.samples.emplace_back(static_cast<int64_t>(std::llround(t * 1e3)) * 1'000'000, value);
      }
      cov.records += series.samples.size();
      const std::string node = common::metricSeriesNode(rule, series, job.nodes);
      if (node.empty()) continue;
      ++series_for_job;
      if (auto hit = common::evaluateMetricRule(rule, series, start, to))
        out.symptoms.push_back(common::metricSymptom(rule, series, *hit, node, &rules, "prometheus " + origin));
    }
    cov.skipped = malformed;
    cov.status = series_for_job ? "ok" : "empty";
    cov.reason = series_for_job ? fmt::format("{} series of the job's nodes", series_for_job)
                                : "no series of the job's nodes in the window";
    if (malformed) cov.reason += fmt::format("; {} malformed entries skipped", malformed);
    out.coverage.push_back(std::move(cov));
  }
  return out;
}

}  // namespace faultline::aggregator

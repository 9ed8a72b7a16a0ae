// common/metric_text.h: exporters' scrapes read into series, and the series a metric rule reads
// from them.
#include "common/metric_text.h"

#include <catch2/catch.hpp>
#include <cmath>

using namespace faultline::common;

namespace {

constexpr int64_t kScrape = 1'717'243'200'000'000'000;  // 2024-06-01T12:00:00Z

const MetricSeries* find(const MetricText& t, const std::string& key) {
  for (const auto& s : t.series)
    if (metricSeriesKey(s) == key) return &s;
  return nullptr;
}

MetricRule rule(const std::string& metric, const std::string& expr = "", const std::string& selector = "") {
  MetricRule r;
  r.id = "t";
  r.metric = metric;
  r.expr = expr;
  r.selector = selector;
  return r;
}

}  // namespace

TEST_CASE("metric text: a dcgm-exporter scrape, comments, untimed samples take the scrape's time", "[metric_text]") {
  // The shape dcgm-exporter serves on :9400/metrics (labels as its default counters file sets them).
  const std::string scrape =
      "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
      "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
      "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",UUID=\"GPU-6a9e3c1f\",pci_bus_id=\"00000000:3B:00.0\",device=\"nvidia0\","
      "modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu-a01\"} 79\r\n"
      "DCGM_FI_DEV_XID_ERRORS{gpu=\"1\",UUID=\"GPU-77b0\",pci_bus_id=\"00000000:5E:00.0\",Hostname=\"gpu-a01\"} 0\n"
      "\n"
      "   # indented comment\n"
      "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\",Hostname=\"gpu-a01\"} +Inf\n"
      "node_load1 0.5\n";
  auto t = parseMetricText(scrape, kScrape);
  CHECK_FALSE(t.openmetrics);
  CHECK(t.malformed == 0);
  CHECK(t.samples == 4);
  REQUIRE(t.series.size() == 4);
  const auto& x = t.series[0];
  CHECK(x.label("__name__") == "DCGM_FI_DEV_XID_ERRORS");
  CHECK(x.label("pci_bus_id") == "00000000:3B:00.0");
  CHECK(x.label("modelName") == "NVIDIA H100 80GB HBM3");
  REQUIRE(x.samples.size() == 1);
  CHECK(x.samples[0] == std::pair<int64_t, double>{kScrape, 79});
  CHECK(std::isinf(t.series[2].samples[0].second));
  CHECK(find(t, "node_load1{}") != nullptr);
}

TEST_CASE("metric text: Prometheus stamps are milliseconds, OpenMetrics stamps seconds", "[metric_text]") {
  auto prom = parseMetricText("up{job=\"n\"} 1 1717243200123\nup{job=\"n\"} 0 1717243260000\n", 0);
  REQUIRE(prom.series.size() == 1);
  REQUIRE(prom.series[0].samples.size() == 2);
  CHECK(prom.series[0].samples[0].first == 1'717'243'200'123'000'000);
  CHECK(prom.series[0].samples[1].second == 0);

  auto om = parseMetricText(
      "# TYPE node_infiniband_link_downed counter\n"
      "node_infiniband_link_downed_total{device=\"mlx5_0\",port=\"1\"} 3 1717243200.5 # {trace_id=\"a\"} 1\n"
      "# EOF\n",
      0);
  CHECK(om.openmetrics);
  CHECK(om.malformed == 0);
  REQUIRE(om.series.size() == 1);
  CHECK(om.series[0].samples[0].first == 1'717'243'200'500'000'000);
  CHECK(om.series[0].samples[0].second == 3);

  // "# EOF" inside the body is not the OpenMetrics end: the stamps stay milliseconds.
  auto mid = parseMetricText("# EOF\nup 1 1000\n", 0);
  CHECK_FALSE(mid.openmetrics);
  CHECK(mid.series[0].samples[0].first == 1'000'000'000);
}

TEST_CASE("metric text: escapes, UTF-8 names, and malformed lines counted without losing the good ones",
          "[metric_text]") {
  auto t = parseMetricText(
      "node_filesystem_avail_bytes{mountpoint=\"/scratch \\\"a\\\"\",device=\"a\\\\b\\nc\"} 10\n"
      "{\"gpu.temp\", \"host.name\"=\"n1\"} 71\n"
      "garbage line with { no closing\n"
      "m{a=\"1\"} notanumber\n"
      "m{a=\"unterminated} 1\n"
      "m{a=\"1\"}1\n"
      "m{a=\"1\"} 1 2 3\n"
      "m{a=\"1\"} 1 99e99\n"
      "\xff\xfe\x00binary\n"
      "ok_after 2\n",
      kScrape);
  CHECK(t.malformed == 7);
  CHECK(t.first_problem.rfind("line 3:", 0) == 0);
  REQUIRE(t.series.size() == 3);
  CHECK(t.series[0].label("mountpoint") == "/scratch \"a\"");
  CHECK(t.series[0].label("device") == "a\\b\nc");
  CHECK(t.series[1].label("__name__") == "gpu.temp");
  CHECK(t.series[1].label("host.name") == "n1");
  CHECK(t.series[2].label("__name__") == "ok_after");
}

TEST_CASE("metric text: limits stop a flood and count it", "[metric_text]") {
  MetricTextLimits limits;
  limits.max_series = 2;
  limits.max_line_bytes = 40;
  limits.max_samples_per_series = 3;
  auto t = parseMetricText(
      "a 1 1000\na 2 2000\na 3 3000\na 4 4000\nb 1\nc 1\n"
      "long_line_name{label=\"value that is far too long for the limit\"} 1\n",
      0, limits);
  CHECK(t.series.size() == 2);
  CHECK(t.over_limit == 2);  // c (a third series) and the long line
  // The first sample (a baseline) and the newest are kept.
  REQUIRE(t.series[0].samples.size() == 3);
  CHECK(t.series[0].samples[0].second == 1);
  CHECK(t.series[0].samples[1].second == 3);
  CHECK(t.series[0].samples[2].second == 4);
}

TEST_CASE("metric text: merging later scrapes keeps one sample per time and the series cap", "[metric_text]") {
  MetricTextLimits limits;
  limits.max_series = 2;
  std::vector<MetricSeries> held;
  CHECK(mergeMetricSeries(held, parseMetricText("x{g=\"0\"} 0\n", 1000).series, limits) == 0);
  CHECK(mergeMetricSeries(held, parseMetricText("x{g=\"0\"} 79\ny 1\n", 2000).series, limits) == 0);
  CHECK(mergeMetricSeries(held, parseMetricText("x{g=\"0\"} 43\nz 1\n", 2000).series, limits) == 1);
  REQUIRE(held.size() == 2);
  REQUIRE(held[0].samples.size() == 2);
  CHECK(held[0].samples[0] == std::pair<int64_t, double>{1000, 0});
  CHECK(held[0].samples[1] == std::pair<int64_t, double>{2000, 43});  // the later scrape at one time wins
}

TEST_CASE("metric text: matchers as PromQL writes them", "[metric_text]") {
  auto t = parseMetricText("fs{fstype=\"xfs\",mountpoint=\"/\"} 1\nfs{fstype=\"tmpfs\",mountpoint=\"/run\"} 1\n", 0);
  std::string error;
  CHECK(seriesMatches(t.series[0], "", &error) == true);
  CHECK(seriesMatches(t.series[0], "fstype!~\"tmpfs|overlay\"", &error) == true);
  CHECK(seriesMatches(t.series[1], "fstype!~\"tmpfs|overlay\"", &error) == false);
  CHECK(seriesMatches(t.series[1], "fstype=~\"tmp\"", &error) == false);  // anchored at both ends
  CHECK(seriesMatches(t.series[1], "fstype=~\"tmp.*\", mountpoint != \"/\"", &error) == true);
  CHECK(seriesMatches(t.series[0], "absent=\"\"", &error) == true);  // a missing label is ""
  CHECK_FALSE(seriesMatches(t.series[0], "fstype=~\"(\"", &error).has_value());
  CHECK(error.find("fstype") != std::string::npos);
  CHECK_FALSE(seriesMatches(t.series[0], "fstype xfs", &error).has_value());
}

TEST_CASE("metric text: the series a rule reads, its selector and the packs' two expression shapes",
          "[metric_text]") {
  auto t = parseMetricText(
      "node_filesystem_avail_bytes{instance=\"n1:9100\",fstype=\"xfs\",mountpoint=\"/scratch\"} 5\n"
      "node_filesystem_size_bytes{instance=\"n1:9100\",fstype=\"xfs\",mountpoint=\"/scratch\"} 100\n"
      "node_filesystem_avail_bytes{instance=\"n1:9100\",fstype=\"tmpfs\",mountpoint=\"/run\"} 1\n"
      "node_filesystem_size_bytes{instance=\"n1:9100\",fstype=\"tmpfs\",mountpoint=\"/run\"} 100\n"
      "node_filesystem_avail_bytes{instance=\"n1:9100\",fstype=\"xfs\",mountpoint=\"/nosize\"} 1\n"
      "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"0\"} 8\n"
      "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{gpu=\"1\"} 0\n"
      "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{gpu=\"1\"} 64\n",
      kScrape);
  std::string why;
  auto plain = metricRuleSeries(rule("node_filesystem_avail_bytes", "", "fstype!~\"tmpfs\""), t.series, &why);
  CHECK(why.empty());
  CHECK(plain.size() == 2);

  auto ratio = metricRuleSeries(rule("node_filesystem_avail_bytes",
                                     "node_filesystem_avail_bytes{selector} / node_filesystem_size_bytes{selector}",
                                     "fstype!~\"tmpfs|ramfs\""),
                                t.series, &why);
  CHECK(why.empty());
  REQUIRE(ratio.size() == 1);  // tmpfs filtered, /nosize has no denominator
  CHECK(ratio[0].label("__name__").empty());
  CHECK(ratio[0].label("mountpoint") == "/scratch");
  CHECK(ratio[0].samples[0].second == 0.05);

  auto either = metricRuleSeries(
      rule("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
           "DCGM_FI_DEV_CLOCKS_EVENT_REASONS{selector} or DCGM_FI_DEV_CLOCK_THROTTLE_REASONS{selector}"),
      t.series, &why);
  CHECK(why.empty());
  REQUIRE(either.size() == 2);  // gpu 1 from the newer name, gpu 0 from the older
  CHECK(either[0].label("gpu") == "1");
  CHECK(either[0].samples[0].second == 64);
  CHECK(either[1].label("gpu") == "0");

  auto other = metricRuleSeries(rule("x", "rate(x{selector}[5m]) > 0"), t.series, &why);
  CHECK(other.empty());
  CHECK(why.find("PromQL endpoint") != std::string::npos);
}

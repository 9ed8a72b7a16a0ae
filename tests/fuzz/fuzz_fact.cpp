// libFuzzer target for the FACT observation API's bodies (aggregator/jobs/fact_events.h) and the
// metric text they carry (common/metric_text.h): the input is read as an AttributorInfo, as an
// observation envelope, as a prometheus_metrics body (a scrape) and as a raw_loki_streams body,
// each against a job of two nodes whose earlier metric observations are kept across inputs
// (bounded, as the server keeps them).
//
// Properties: no crash, hang, leak or sanitizer report, no exception; every refusal says why; a
// scrape's counts add up (samples kept + skipped never exceed the lines) and its series stay
// within the limits.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "aggregator/jobs/fact_events.h"
#include "common/metric_text.h"
#include "common/rule_engine.h"
#include "tests/fuzz/fuzz_util.h"

using faultline::fuzz::fail;
using nlohmann::json;

namespace {

const faultline::common::RuleEngine* engine_ = nullptr;
constexpr int64_t kNow = int64_t{1'778'415'200} * 1'000'000'000;

faultline::aggregator::PostedMetrics& held() {
  static faultline::aggregator::PostedMetrics metrics;
  return metrics;
}

void observe(const json& body, faultline::aggregator::ObservationContext& ctx) {
  std::string error;
  auto o = faultline::aggregator::observationFromJson(body, ctx, *engine_, "fact-job", kNow, &error);
  if (!o && error.empty()) fail("observation refused without a reason");
  if (held().series.size() > ctx.metric_limits.max_series) fail("metric series over the limit");
  for (const auto& s : held().series)
    if (s.samples.size() > ctx.metric_limits.max_samples_per_series) fail("samples over the limit");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const faultline::common::RuleEngine engine(faultline::fuzz::realRules());
  engine_ = &engine;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = faultline::fuzz::bytes(data, size);
  try {
    std::string error;
    const size_t lines = static_cast<size_t>(std::count(in.begin(), in.end(), '\n')) + 1;
    auto text = faultline::common::parseMetricText(in, kNow);
    if (text.samples + text.malformed + text.over_limit > lines) fail("scrape counts exceed its lines");
    if (text.malformed && text.first_problem.empty()) fail("malformed lines without a reason");

    faultline::aggregator::ObservationContext ctx;
    ctx.job_start_ns = kNow - int64_t{600} * 1'000'000'000;
    ctx.job_end_ns = kNow;
    ctx.job_nodes = {"gpu-a01", "gpu-a02"};
    ctx.observation_id = "obs-1";
    ctx.metrics = &held();
    ctx.metric_limits.max_series = 5000;
    if (held().series.size() > 4000) held() = {};

    const std::string body(in);
    observe(json{{"context", {{"source", "syslog"}, {"format", "prometheus_metrics"}}}, {"body", body}}, ctx);
    observe(json{{"context", {{"source", "syslog"}, {"format", "raw_loki_streams"}}}, {"body", body}}, ctx);
    auto parsed = json::parse(in, nullptr, false);
    if (!parsed.is_discarded()) {
      observe(parsed, ctx);
      if (!faultline::aggregator::attributorFromJson(parsed, kNow, &error) && error.empty())
        fail("AttributorInfo refused without a reason");
    }
  } catch (const std::exception& e) {
    fail("exception: %s", e.what());
  }
  return 0;
}

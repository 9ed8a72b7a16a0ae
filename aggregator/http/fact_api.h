// The FACT observation API (docs/api.md, "FACT observation API"): the routes NVRx's FACT client
// calls, so a tool built for NVIDIA's attribution service can ask faultline instead.
//
//   POST /attributor                      AttributorInfo -> {"attributor_id"}: a faultline job
//   POST /attributor/{id}/observation     Loki streams (syslog / applog) -> job outputs, a revision
//   GET  /attributor/{id}/attribution     the job's latest verdict as NodeAttributions
//   GET  /v2/healthz
//
// Every route is also served under /latest (the client's default API root). Observations go
// through the same parsers, rules and aggregation as `faultline job output` (fact_events.h) and
// are stored as the job's outputs, so the verdict engine judges them like any other evidence.
//
// Threading and blocking as Api (api.h): the Api owns this and calls it on its thread, after it
// has checked the write token (POST) or the read token (GET).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/http/api.h"
#include "aggregator/jobs/fact_events.h"

namespace faultline::aggregator {

class FactApi {
 public:
  // All references must outlive this. `engine` and `rules` may be null: then no verdict is made
  // during a request, and observations answer 503 respectively.
  FactApi(Store& store, VerdictEngine* engine, Metrics& metrics, const Clock& clock,
          const common::RuleEngine* rules, std::function<bool()> leads);

  // `parts`: the path's segments. Whether they name a FACT route ("latest" first or not).
  static bool isFactPath(const std::vector<std::string>& parts);
  HttpResponse handle(const HttpRequest& request, std::vector<std::string> parts);

 private:
  HttpResponse createAttributor(const HttpRequest& request);
  HttpResponse observe(const HttpRequest& request, const std::string& id);
  HttpResponse attribution(const std::string& id);
  // Drops the least recently observed attributors' metrics (never `keep`'s) over kMaxHeldSeries.
  void forgetOldMetrics(const std::string& keep);

  Store& store_;
  VerdictEngine* engine_;
  Metrics& metrics_;
  const Clock& clock_;
  const common::RuleEngine* rules_;
  std::function<bool()> leads_;
  // Each attributor's prometheus_metrics series so far (the baselines of its later
  // observations), kept in memory: at most kMaxHeldSeries over all attributors, the least
  // recently observed one forgotten first. A restart or a failover forgets them (docs/api.md).
  static constexpr size_t kMaxHeldSeries = 200'000;
  std::map<std::string, PostedMetrics> posted_;
};

}  // namespace faultline::aggregator

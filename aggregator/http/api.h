// The HTTP API as a pure request -> response function over the store (docs/api.md). The socket
// side lives in server.h; this part is tested without a network.
//
// Threading: call from the thread that owns the VerdictEngine (the aggregator's io_context).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aggregator/clock.h"
#include "aggregator/http/ui_reader.h"
#include "aggregator/ingest/connections.h"
#include "aggregator/ingest/refusals.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/store/store.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "common/rule_engine.h"

namespace faultline::aggregator {

struct HttpRequest {
  std::string method;  // GET, POST, ...
  std::string target;  // path and query string
  std::string authorization;
  std::string body;
  std::string cookie = {};  // the Cookie header (the dashboard's read token, see ApiOptions)
  std::string peer = {};    // the client's address as the server saw it ("" when not over a socket)
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra response headers
};

struct ApiOptions {
  // Bearer token for the write endpoints; empty disables them (403).
  std::string write_token;
  int64_t agent_timeout_ns = 90 * kSecondNs;
  // When set, every read (the API and the /ui/ dashboard; not /healthz) needs it too: as
  // "Authorization: Bearer TOKEN" (the write token is accepted as well), or as the cookie
  // faultline_read=TOKEN that opening any /ui/ page with ?token=TOKEN sets. For an aggregator
  // listening beyond loopback (docs/dashboard.md, "Access").
  std::string read_token;
  // The API is served over HTTPS (--tls-cert): the read-token cookie is marked Secure, so a
  // browser never sends it over plain HTTP.
  bool secure_cookie = false;
  // Whether this replica judges jobs itself (the leader, store/leader.h); unset = always. A
  // replica that does not lead stores a job's end and leaves the verdict to the leader's tick.
  std::function<bool()> leads;
  // The ingest endpoint's refused identities, served at GET /agents/refusals (null: none here).
  const RefusalLog* refusals = nullptr;
  // The ingest endpoint's open connections: a host whose connection closed is not live.
  const ConnectionTracker* connections = nullptr;
  // The rules the FACT observation routes read posted log lines with (fact_api.h); null: those
  // routes answer 503. Must outlive the Api.
  const common::RuleEngine* rules = nullptr;
  // Networks ("10.0.0.0/8", "fd00::/8", or one address) whose FACT POSTs need no write token:
  // NVRx's FACT client sends no Authorization header. A request that does send one is checked as
  // always. Empty: every FACT POST needs the token. Checked by factOpenFromError first.
  std::vector<std::string> fact_open_from;
};

// Why `networks` are not all "ADDRESS[/PREFIX]" (v4 or v6); "" when they are.
std::string factOpenFromError(const std::vector<std::string>& networks);
// Whether `address` (as HttpRequest::peer holds it) is in one of `networks`.
bool addressInNetworks(const std::string& address, const std::vector<std::string>& networks);

class FactApi;

class Api {
 public:
  // `engine` may be null (then a job end does not trigger an immediate verdict). All references
  // must outlive the Api. `gauges` (may be empty) adds live values to /metrics.
  Api(Store& store, VerdictEngine* engine, Metrics& metrics, const Clock& clock, ApiOptions options);
  ~Api();
  HttpResponse handle(const HttpRequest& request);
  // The Authorization header carries the write token (the server lets such requests send
  // larger bodies: job outputs).
  bool writeAuthorized(std::string_view authorization) const;
  // The store's SQLite file: the dashboard's reads (GET /jobs with offset/rule/q/total,
  // /fleet/...) use a second, read-only connection to it. Unset: those answer 503.
  void setStoreFile(std::string path) { store_file_ = std::move(path); }
  // A site relay's uplink status (Relay::status), shown in /healthz as "relay" and as gauges in
  // /metrics; called on the thread that serves requests (the relay's io thread). Unset or null:
  // not a relay.
  void setRelayStatus(std::function<nlohmann::json()> status) { relay_status_ = std::move(status); }

 private:
  // 404 for a job id this store does not hold, naming the relayed jobs of that site-local id.
  HttpResponse unknownJob(const std::string& job_id);
  struct ReadRequest;  // api.cpp
  HttpResponse route(const HttpRequest& request, const std::string& path,
                     const std::multimap<std::string, std::string>& query);
  // The FACT routes, the writes, and the methods no route takes; nullopt: a read, routed on.
  std::optional<HttpResponse> routeWrite(const HttpRequest& request, const std::vector<std::string>& parts);
  HttpResponse health();
  HttpResponse metricsPage();
  nlohmann::json relayStatus() const;
  // /jobs... and /nodes...; nullopt: no such route there.
  std::optional<HttpResponse> readJobs(const ReadRequest& r);
  std::optional<HttpResponse> readNodes(const ReadRequest& r);
  HttpResponse jobEvent(const HttpRequest& request, const std::string& job_id, bool end);
  HttpResponse jobOutput(const HttpRequest& request, const std::string& job_id);
  // The dashboard: pages and assets under /ui/ (web/, built in).
  HttpResponse ui(const std::string& path);
  // GET /jobs with the dashboard's parameters (offset, rule, q, blamed, total); /fleet/daily, /fleet/job-nodes.
  HttpResponse jobPage(const std::multimap<std::string, std::string>& query, int64_t since_ns, size_t limit);
  HttpResponse fleet(const std::string& path, const std::multimap<std::string, std::string>& query, int64_t now_ns);
  UiReader* uiReader(std::string* error);
  bool leads() const { return !options_.leads || options_.leads(); }
  // 403/401 unless the request may write.
  std::optional<HttpResponse> refuseWrite(const HttpRequest& request);
  // 401 (or, for a /ui/ page opened with ?token=, a redirect setting the cookie) unless the
  // request may read.
  std::optional<HttpResponse> refuseRead(const HttpRequest& request, const std::string& path,
                                         const std::multimap<std::string, std::string>& query);

  Store& store_;
  VerdictEngine* engine_;
  Metrics& metrics_;
  const Clock& clock_;
  ApiOptions options_;
  std::string store_file_;
  std::function<nlohmann::json()> relay_status_;
  std::unique_ptr<UiReader> ui_reader_;  // opened on first use
  std::unique_ptr<FactApi> fact_;        // NVRx's FACT client's routes (fact_api.h)
};

// A JSON answer (bytes that are not UTF-8 become U+FFFD), and {"error": why}.
HttpResponse jsonResponse(int status, const nlohmann::json& body);
HttpResponse errorResponse(int status, const std::string& why);

// Splits "/a/b?x=1&y=%20" into the decoded path and query parameters.
std::string splitTarget(const std::string& target, std::multimap<std::string, std::string>* query);
std::string urlDecode(std::string_view s);
std::string urlEncode(std::string_view s);

}  // namespace faultline::aggregator

#include "aggregator/http/api.h"

#include <fmt/format.h>

#include <boost/asio/ip/address.hpp>
#include <optional>

#include "aggregator/http/fact_api.h"
#include "aggregator/http/web_assets.h"
#include "aggregator/jobs/job_events.h"
#include "aggregator/query/query.h"
#include "common/wire_detail.h"

namespace faultline::aggregator {

using nlohmann::json;

std::string urlDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') out += ' ';
    else if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
             std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else out += s[i];
  }
  return out;
}

std::string urlEncode(std::string_view s) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

std::string splitTarget(const std::string& target, std::multimap<std::string, std::string>* query) {
  auto q = target.find('?');
  std::string path = urlDecode(target.substr(0, q));
  if (q != std::string::npos) {
    std::string_view rest(target);
    rest.remove_prefix(q + 1);
    while (!rest.empty()) {
      auto amp = rest.find('&');
      auto item = rest.substr(0, amp);
      auto eq = item.find('=');
      if (!item.empty())
        query->emplace(urlDecode(item.substr(0, eq)), eq == std::string_view::npos ? "" : urlDecode(item.substr(eq + 1)));
      if (amp == std::string_view::npos) break;
      rest.remove_prefix(amp + 1);
    }
  }
  return path;
}

// Bytes that are not UTF-8 (a query parameter echoed back, an old row) become U+FFFD: dump() would
// throw, and the server answer 500 (found by tests/fuzz fuzz_http: GET /symptoms?node=%F2...).
HttpResponse jsonResponse(int status, const json& body) {
  return {status, "application/json", body.dump(2, ' ', false, json::error_handler_t::replace) + "\n", {}};
}
HttpResponse errorResponse(int status, const std::string& why) { return jsonResponse(status, json{{"error", why}}); }

namespace {

HttpResponse error(int status, const std::string& why) { return errorResponse(status, why); }

std::string param(const std::multimap<std::string, std::string>& q, const std::string& key) {
  auto it = q.find(key);
  return it == q.end() ? "" : it->second;
}

// Constant-time comparison so the token cannot be guessed byte by byte from response times.
bool sameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char d = 0;
  for (size_t i = 0; i < a.size(); ++i) d |= static_cast<unsigned char>(a[i] ^ b[i]);
  return d == 0;
}

}  // namespace

Api::Api(Store& store, VerdictEngine* engine, Metrics& metrics, const Clock& clock, ApiOptions options)
    : store_(store), engine_(engine), metrics_(metrics), clock_(clock), options_(std::move(options)) {
  fact_ = std::make_unique<FactApi>(store_, engine_, metrics_, clock_, options_.rules, options_.leads);
}

Api::~Api() = default;

HttpResponse Api::handle(const HttpRequest& request) {
  std::multimap<std::string, std::string> query;
  std::string path = splitTarget(request.target, &query);
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  HttpResponse r;
  // Names, ids and filters are UTF-8 text: other bytes (once %-decoded) are refused here, before
  // they reach the store and its JSON (tests/fuzz fuzz_http: GET /symptoms?node=%F2 threw there).
  bool utf8 = common::wire_detail::validUtf8(path);
  for (const auto& [k, v] : query) utf8 = utf8 && common::wire_detail::validUtf8(k) && common::wire_detail::validUtf8(v);
  if (!utf8) r = error(400, "the path or a query parameter is not UTF-8");
  else if (auto refused = request.method == "GET" ? refuseRead(request, path, query) : std::nullopt) r = std::move(*refused);
  else r = route(request, path, query);
  metrics_.add("faultline_http_requests_total", "code", std::to_string(r.status));
  return r;
}

bool Api::writeAuthorized(std::string_view authorization) const {
  const std::string_view prefix = "Bearer ";
  return !options_.write_token.empty() && authorization.substr(0, prefix.size()) == prefix &&
         sameSecret(authorization.substr(prefix.size()), options_.write_token);
}

HttpResponse Api::unknownJob(const std::string& job_id) {
  auto relayed = job_id.find(':') == std::string::npos ? store_.relayedJobIds(job_id) : std::vector<std::string>{};
  if (relayed.empty()) return error(404, "unknown job");
  std::string list;
  for (const auto& id : relayed) list += (list.empty() ? "" : ", ") + id;
  return error(404, "unknown job '" + job_id + "'; relayed from a site: " + list);
}

namespace {

// "ADDRESS[/PREFIX]" as a network; nullopt when it is not one.
std::optional<std::pair<boost::asio::ip::address, unsigned>> parseNetwork(const std::string& text) {
  const size_t slash = text.find('/');
  boost::system::error_code ec;
  auto addr = boost::asio::ip::make_address(text.substr(0, slash), ec);
  if (ec) return std::nullopt;
  const unsigned max = addr.is_v4() ? 32 : 128;
  unsigned prefix = max;
  if (slash != std::string::npos) {
    const std::string p = text.substr(slash + 1);
    if (p.empty() || p.size() > 3 || p.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
    prefix = static_cast<unsigned>(std::stoul(p));
    if (prefix > max) return std::nullopt;
  }
  return std::make_pair(addr, prefix);
}

}  // namespace

std::string factOpenFromError(const std::vector<std::string>& networks) {
  for (const auto& n : networks)
    if (!parseNetwork(n)) return "not an address or ADDRESS/PREFIX network: " + n;
  return "";
}

bool addressInNetworks(const std::string& address, const std::vector<std::string>& networks) {
  boost::system::error_code ec;
  auto peer = boost::asio::ip::make_address(address, ec);
  if (ec) return false;
  if (peer.is_v6() && peer.to_v6().is_v4_mapped())
    peer = boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, peer.to_v6());
  for (const auto& n : networks) {
    auto net = parseNetwork(n);
    if (!net || net->first.is_v4() != peer.is_v4()) continue;
    auto bytes = [](const boost::asio::ip::address& x) {
      if (x.is_v4()) {
        auto b = x.to_v4().to_bytes();
        return std::vector<unsigned char>(b.begin(), b.end());
      }
      auto b = x.to_v6().to_bytes();
      return std::vector<unsigned char>(b.begin(), b.end());
    };
    const auto want = bytes(net->first), got = bytes(peer);
    bool match = true;
    for (unsigned bit = 0; bit < net->second && match; ++bit)
      match = ((want[bit / 8] ^ got[bit / 8]) >> (7 - bit % 8) & 1) == 0;
    if (match) return true;
  }
  return false;
}

std::optional<HttpResponse> Api::refuseWrite(const HttpRequest& request) {
  if (options_.write_token.empty()) return error(403, "write endpoints are disabled (no token configured)");
  if (!writeAuthorized(request.authorization)) {
    metrics_.add("faultline_http_unauthorized_total");
    if (request.authorization.empty())
      return error(401, "missing bearer token: job events need the aggregator's write token (faultline --token-file FILE)");
    return error(401, "bad bearer token: it is not the aggregator's write token (--token-file)");
  }
  return std::nullopt;
}

namespace {

// The value of cookie `name` in a Cookie header ("a=1; faultline_read=T"), "" when absent.
std::string cookieValue(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    size_t end = header.find(';');
    std::string_view part = header.substr(0, end);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (part.size() > name.size() && part.substr(0, name.size()) == name && part[name.size()] == '=')
      return std::string(part.substr(name.size() + 1));
    if (end == std::string_view::npos) break;
    header.remove_prefix(end + 1);
  }
  return "";
}

}  // namespace

std::optional<HttpResponse> Api::refuseRead(const HttpRequest& request, const std::string& path,
                                            const std::multimap<std::string, std::string>& query) {
  if (options_.read_token.empty() || path == "/healthz" || path == "/v2/healthz" || path == "/latest/v2/healthz")
    return std::nullopt;
  const std::string_view prefix = "Bearer ";
  std::string_view auth = request.authorization;
  if (auth.substr(0, prefix.size()) == prefix &&
      (sameSecret(auth.substr(prefix.size()), options_.read_token) || writeAuthorized(auth)))
    return std::nullopt;
  if (sameSecret(cookieValue(request.cookie, "faultline_read"), options_.read_token)) return std::nullopt;
  const bool page = path == "/ui" || path.rfind("/ui/", 0) == 0;
  auto token = query.find("token");
  if (page && token != query.end() && sameSecret(token->second, options_.read_token)) {
    // The token leaves the address bar (and the history) at once; the cookie carries it from now.
    HttpResponse r;
    r.status = 303;
    r.content_type = "text/plain";
    r.body = "see other\n";
    r.headers = {{"Location", path == "/ui" ? "/ui/" : path},
                 {"Set-Cookie", "faultline_read=" + options_.read_token + "; Path=/; HttpOnly; SameSite=Strict" +
                                    (options_.secure_cookie ? "; Secure" : "")},
                 {"Cache-Control", "no-store"}};
    return r;
  }
  metrics_.add("faultline_http_unauthorized_total");
  if (page) {
    HttpResponse r;
    r.status = 401;
    r.content_type = "text/plain; charset=utf-8";
    r.body = "faultline: this dashboard needs its read token: open /ui/?token=TOKEN once (it is then kept in a cookie).\n";
    return r;
  }
  if (request.authorization.empty())
    return error(401, "missing bearer token: reads need the aggregator's read token (faultline --token-file FILE)");
  return error(401, "bad bearer token: reads need the aggregator's read token (or its write token)");
}

HttpResponse Api::jobOutput(const HttpRequest& request, const std::string& job_id) {
  if (auto refused = refuseWrite(request)) return *refused;
  if (!validJobId(job_id)) return error(400, "bad job id");
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded()) return error(400, "body is not JSON");
  std::string why;
  auto output = jobOutputFromJson(body, job_id, clock_.nowNs(), &why);
  if (!output) {
    metrics_.add("faultline_job_outputs_rejected_total");
    return error(400, why);
  }
  if (!store_.putJobOutput(*output, &why)) return error(503, why);
  metrics_.add("faultline_job_outputs_total");
  metrics_.add("faultline_job_output_symptoms_total", "", "", output->symptoms.size());
  json out{{"job_id", job_id}, {"source", output->source}, {"symptoms", output->symptoms.size()}, {"verdict", nullptr}};
  if (engine_ && leads())
    if (auto v = engine_->onJobOutput(job_id))
      out["verdict"] = {{"revision", v->revision},
                        {"status", v->status},
                        {"reason", v->reason},
                        {"sub_domain", common::subDomainName(v->diagnosis.sub_domain)}};
  return jsonResponse(200, out);
}

HttpResponse Api::jobEvent(const HttpRequest& request, const std::string& job_id, bool end) {
  if (auto refused = refuseWrite(request)) return *refused;
  json body = request.body.empty() ? json(nullptr) : json::parse(request.body, nullptr, false);
  if (body.is_discarded()) return error(400, "body is not JSON");
  std::string why;
  auto update = jobUpdateFromJson(body, job_id, end ? JobEventKind::kEnd : JobEventKind::kStart, clock_.nowNs(), &why);
  if (!update) return error(400, why);
  // An end for a job nobody started, naming no nodes, has nothing to judge: refused, not judged.
  if (end && update->nodelist.empty() && update->nodes.empty() && !store_.job(job_id))
    return error(404, fmt::format("unknown job '{}': no start was recorded and the end names no nodes", job_id));
  update->source = "http";
  auto row = store_.recordJob(*update, &why);
  if (!row) return error(why.rfind("store:", 0) == 0 ? 503 : 400, why);
  metrics_.add("faultline_job_events_total", "kind", end ? "end" : "start");
  json out{{"job_id", job_id}, {"state", row->info.state}, {"verdict", nullptr}};
  if (end && engine_ && leads()) {
    int64_t t0 = clock_.steadyNs();
    if (auto v = engine_->onJobEnded(job_id)) {
      out["verdict"] = {{"revision", v->revision},
                        {"status", v->status},
                        {"sub_domain", common::subDomainName(v->diagnosis.sub_domain)}};
      metrics_.observe("faultline_verdict_compute_seconds", double(clock_.steadyNs() - t0) / 1e9);
    }
  }
  return jsonResponse(200, out);
}

// The pages are one shell (index.html) that routes on its own URL; the API stays the data source.
// Read-only, same origin, nothing inline: the CSP forbids scripts and styles from anywhere else.
HttpResponse Api::ui(const std::string& path) {
  static const std::vector<std::pair<std::string, std::string>> kHeaders = {
      {"Cache-Control", "no-cache"},
      {"X-Content-Type-Options", "nosniff"},
      {"Content-Security-Policy",
       "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"}};
  auto page = [&](std::string_view name) -> HttpResponse {
    const auto* a = findWebAsset(name);
    if (!a) return {404, "text/plain; charset=utf-8", "not found\n", kHeaders};
    return {200, std::string(webContentType(name)), std::string(a->body), kHeaders};
  };
  const std::string assets = "/ui/assets/";
  if (path.rfind(assets, 0) == 0) {
    std::string name = path.substr(assets.size());
    if (name.empty() || name.find('/') != std::string::npos || name == "index.html") return page("");
    return page(name);
  }
  if (path == "/ui" || path == "/ui/jobs" || path == "/ui/fleet" || path == "/ui/agents" ||
      (path.rfind("/ui/jobs/", 0) == 0 && path.size() > 9 && path.find('/', 9) == std::string::npos))
    return page("index.html");
  return page("");
}

UiReader* Api::uiReader(std::string* error) {
  if (!ui_reader_) {
    if (store_file_.empty()) {
      *error = "this server has no store file for the dashboard's reads";
      return nullptr;
    }
    ui_reader_ = UiReader::open(store_file_, error);
  }
  return ui_reader_.get();
}

HttpResponse Api::jobPage(const std::multimap<std::string, std::string>& query, int64_t since_ns, size_t limit) {
  std::string why;
  auto* reader = uiReader(&why);
  if (!reader) return error(503, why);
  JobPageFilter f;
  f.since_ns = since_ns;
  f.state = param(query, "state");
  f.sub_domain = param(query, "sub_domain");
  f.node = param(query, "node");
  f.blamed = param(query, "blamed");
  f.rule = param(query, "rule");
  f.text = param(query, "q");
  f.limit = limit;
  // `end` points into `offset`: it must outlive the check (a temporary did not: tests/fuzz).
  if (const std::string offset = param(query, "offset"); !offset.empty()) {
    char* end = nullptr;
    f.offset = std::strtoull(offset.c_str(), &end, 10);
    if (*end) return error(400, "bad 'offset'");
  }
  int64_t total = 0;
  auto rows = reader->jobs(f, &total, &why);
  if (!rows) return error(503, why);
  auto r = jsonResponse(200, *rows);
  r.headers.emplace_back("X-Total-Count", std::to_string(total));
  return r;
}

HttpResponse Api::fleet(const std::string& path, const std::multimap<std::string, std::string>& query, int64_t now) {
  std::string s = param(query, "since");
  auto since = parseSince(s.empty() ? (path == "/fleet/daily" ? "30d" : "24h") : s, now);
  if (!since) return error(400, "bad 'since' (use 7d, 24h, 30m or a timestamp)");
  std::string why;
  auto* reader = uiReader(&why);
  if (!reader) return error(503, why);
  std::optional<json> out;
  if (path == "/fleet/daily") {
    size_t nodes = 40;
    if (!param(query, "nodes").empty()) nodes = std::min<size_t>(std::strtoul(param(query, "nodes").c_str(), nullptr, 10), 1000);
    out = reader->daily(*since, now, nodes, &why);
  } else if (path == "/fleet/job-nodes") {
    out = reader->jobNodes(*since, &why);
  } else {
    return error(404, "not found");
  }
  return out ? jsonResponse(200, *out) : error(503, why);
}

// A read route's request: the path's parts, the query, the time, and the parameters every route
// reads the same way (since, limit).
struct Api::ReadRequest {
  const std::string& path;
  const std::multimap<std::string, std::string>& query;
  std::vector<std::string> parts;
  int64_t now;
  QueryContext q;

  std::optional<int64_t> since(const std::string& fallback) const {
    std::string s = param(query, "since");
    if (s.empty()) s = fallback;
    if (s.empty()) return 0;
    return parseSince(s, now);
  }
  size_t limit(size_t dflt) const {
    std::string l = param(query, "limit");
    if (l.empty()) return dflt;
    try {
      return std::min<size_t>(std::stoul(l), 100000);
    } catch (...) {
      return dflt;
    }
  }
  static HttpResponse badSince() { return error(400, "bad 'since' (use 7d, 24h, 30m or a timestamp)"); }
};

HttpResponse Api::route(const HttpRequest& request, const std::string& path,
                        const std::multimap<std::string, std::string>& query) {
  const int64_t now = clock_.nowNs();
  ReadRequest r{path, query, {}, now, QueryContext{store_, now, options_.agent_timeout_ns, options_.connections}};
  for (size_t pos = 1; pos <= path.size();) {
    auto slash = path.find('/', pos);
    r.parts.push_back(path.substr(pos, slash == std::string::npos ? std::string::npos : slash - pos));
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  if (auto w = routeWrite(request, r.parts)) return *w;
  if (path == "/healthz") return health();
  if (path == "/metrics") return metricsPage();
  const auto& parts = r.parts;
  if (parts.empty()) return error(404, "not found");
  if (parts[0] == "ui") return ui(path);
  if (parts[0] == "fleet") return fleet(path, query, now);
  if (parts[0] == "jobs")
    if (auto j = readJobs(r)) return *j;
  if (parts[0] == "nodes")
    if (auto n = readNodes(r)) return *n;
  if (path == "/agents") return jsonResponse(200, queryAgents(r.q));
  if (path == "/agents/refusals") return jsonResponse(200, queryRefusals(options_.refusals));
  if (path == "/symptoms") {
    auto s = r.since("");
    if (!s) return ReadRequest::badSince();
    SymptomFilter f;
    for (auto [it, end] = query.equal_range("node"); it != end; ++it) f.nodes.push_back(it->second);
    f.rule_id = param(query, "rule");
    f.since_ns = *s;
    f.limit = r.limit(1000);
    return jsonResponse(200, querySymptoms(r.q, f));
  }
  return error(404, "not found");
}

std::optional<HttpResponse> Api::routeWrite(const HttpRequest& request, const std::vector<std::string>& parts) {
  if (FactApi::isFactPath(parts)) {
    if (request.method == "POST") {
      const bool open = request.authorization.empty() && !options_.fact_open_from.empty() &&
                        addressInNetworks(request.peer, options_.fact_open_from);
      if (open) metrics_.add("faultline_fact_tokenless_posts_total");
      else if (auto refused = refuseWrite(request)) return *refused;
    }
    return fact_->handle(request, parts);
  }
  if (request.method == "POST") {
    if (parts.size() == 3 && parts[0] == "jobs" && (parts[2] == "start" || parts[2] == "end"))
      return jobEvent(request, parts[1], parts[2] == "end");
    if (parts.size() == 3 && parts[0] == "jobs" && parts[2] == "output") return jobOutput(request, parts[1]);
    return error(parts.size() == 3 && parts[0] == "jobs" ? 404 : 405, "no such write endpoint");
  }
  if (request.method != "GET" && request.method != "HEAD") return error(405, "method not allowed");
  if (parts.size() == 3 && parts[0] == "jobs" && (parts[2] == "start" || parts[2] == "end" || parts[2] == "output"))
    return error(405, "POST only: a job event or a job's output is written, not read");
  return std::nullopt;
}

// A site relay's uplink, asked only by the two paths that show it (it reads the outbox).
json Api::relayStatus() const { return relay_status_ ? relay_status_() : json(nullptr); }

HttpResponse Api::health() {
  const json relay = relayStatus();
  auto c = store_.counts();
  json health{{"status", "ok"},
              {"schema_version", store_.schemaVersion()},
              {"leader", leads()},
              {"agents", c.agents},
              {"nodes", c.nodes},
              {"jobs", c.jobs},
              {"symptoms", c.symptoms}};
  if (!relay.is_null()) health["relay"] = relay;
  return jsonResponse(200, health);
}

HttpResponse Api::metricsPage() {
  auto c = store_.counts();
  std::map<std::string, double> gauges{{"faultline_leader", leads() ? 1.0 : 0.0},
                                       {"faultline_store_symptoms", double(c.symptoms)},
                                       {"faultline_store_jobs", double(c.jobs)},
                                       {"faultline_store_verdicts", double(c.verdicts)},
                                       {"faultline_store_agents", double(c.agents)}};
  if (auto r = store_.relayOutboxStats(); r.next_sequence > 1) {  // a site relay
    gauges["faultline_relay_outbox_batches"] = double(r.batches);
    gauges["faultline_relay_outbox_bytes"] = double(r.bytes);
    gauges["faultline_relay_outbox_dropped_batches"] = double(r.dropped_batches);
  }
  if (const json relay = relayStatus(); relay.is_object()) {
    gauges["faultline_relay_link_up"] = relay.value("link_up", false) ? 1.0 : 0.0;
    gauges["faultline_relay_link_failed_attempts"] = relay.value("failed_attempts", 0.0);
  }
  return {200, "text/plain; version=0.0.4", metrics_.render(gauges), {}};
}

std::optional<HttpResponse> Api::readJobs(const ReadRequest& r) {
  const auto& parts = r.parts;
  if (parts.size() == 1) {
    auto s = r.since("");
    if (!s) return ReadRequest::badSince();
    for (const char* k : {"offset", "rule", "q", "blamed", "total"})
      if (r.query.count(k)) return jobPage(r.query, *s, r.limit(500));
    JobFilter f;
    f.since_ns = *s;
    f.state = param(r.query, "state");
    f.sub_domain = param(r.query, "sub_domain");
    f.node = param(r.query, "node");
    f.limit = r.limit(500);
    return jsonResponse(200, queryJobs(r.q, f));
  }
  if (parts.size() == 2) {
    auto j = queryJob(r.q, parts[1]);
    return j.is_null() ? unknownJob(parts[1]) : jsonResponse(200, j);
  }
  if (parts.size() == 3 && parts[2] == "diagnosis") {
    auto d = queryDiagnosis(r.q, parts[1]);
    if (d.is_null()) return store_.job(parts[1]) ? error(404, "job has no verdict") : unknownJob(parts[1]);
    return jsonResponse(200, d);
  }
  return std::nullopt;
}

std::optional<HttpResponse> Api::readNodes(const ReadRequest& r) {
  const auto& parts = r.parts;
  if (parts.size() == 1) {
    if (param(r.query, "rank") == "1" || param(r.query, "rank") == "true") {
      auto s = r.since("7d");
      if (!s) return ReadRequest::badSince();
      size_t min_jobs = 1;
      if (!param(r.query, "min_jobs").empty())
        min_jobs = std::strtoul(param(r.query, "min_jobs").c_str(), nullptr, 10);
      return jsonResponse(200, queryFleet(r.q, *s, min_jobs));
    }
    return jsonResponse(200, queryNodes(r.q));
  }
  if (parts.size() == 2) {
    auto s = r.since("7d");
    if (!s) return ReadRequest::badSince();
    auto n = queryNode(r.q, parts[1], *s);
    return n.is_null() ? error(404, "unknown node") : jsonResponse(200, n);
  }
  return std::nullopt;
}

}  // namespace faultline::aggregator

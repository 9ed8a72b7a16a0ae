// The dashboard's server side (docs/dashboard.md): the pages and assets under /ui/, the read
// endpoints the pages use (GET /jobs with offset/rule/q/total, /fleet/daily, /fleet/job-nodes)
// against a real SQLite store, and the offline report of `faultline attribute --html` (self-contained,
// the diagnosis embedded so that no log text can break out of its <script> element). The pages
// themselves are tested in a real browser by dashboard_browser_test.cpp.
#include <catch2/catch.hpp>

#include <fstream>
#include <regex>
#include <thread>

#include "aggregator/cli/html_report.h"
#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/http/server.h"
#include "aggregator/http/ui_reader.h"
#include "aggregator/http/web_assets.h"
#include "aggregator/jobs/sacct_poller.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

constexpr int64_t kHour = 3600 * kSec;
constexpr int64_t kDay = 24 * kHour;

struct JobSpec {
  std::string id;
  std::string state;  // Slurm word
  int64_t end_ns;
  std::vector<std::string> nodes;
  std::optional<common::SubDomain> sub_domain;  // no verdict when unset
  std::string rule, summary, evidence;
  std::string blamed, device;
};

// A store with jobs and verdicts as the verdict engine would leave them, and an Api over it.
struct Fixture {
  TempDir dir;
  ManualClock clock{kT0 + 3 * kDay};
  std::unique_ptr<Store> store;
  Metrics metrics;
  std::unique_ptr<Api> api;

  explicit Fixture(bool with_path = true) {
    std::string error;
    store = Store::open(dir.file("d.db"), clock, {}, &error);
    REQUIRE(store);
    api = std::make_unique<Api>(*store, nullptr, metrics, clock, ApiOptions{"", 90 * kSec});
    if (with_path) api->setStoreFile(dir.file("d.db"));
  }

  void add(const JobSpec& j) {
    std::string error;
    JobUpdate u;
    u.job_id = j.id;
    u.state = j.state;
    u.start_ns = j.end_ns - kHour;
    u.end_ns = j.end_ns;
    u.nodes = j.nodes;
    u.source = "test";
    REQUIRE(store->recordJob(u, &error));
    if (!j.sub_domain) return;
    VerdictRow v;
    v.job_id = j.id;
    v.created_ns = j.end_ns + kSec;
    v.status = "final";
    v.reason = "settle";
    json d{{"schema_version", 1},
           {"job_id", j.id},
           {"terminal_state", common::terminalStateOf(j.state)},
           {"sub_domain", common::subDomainName(*j.sub_domain)},
           {"responsible_nodes", json::array()},
           {"cause", nullptr}};
    if (!j.blamed.empty()) d["responsible_nodes"].push_back({{"node", j.blamed}, {"device", j.device}, {"confidence", 0.9}});
    if (!j.rule.empty())
      d["cause"] = {{"rule_id", j.rule}, {"summary", j.summary},   {"evidence", j.evidence},
                    {"node", j.blamed},  {"device", j.device},     {"sub_domain", common::subDomainName(*j.sub_domain)}};
    auto parsed = common::diagnosisFromJson(d, &error);
    INFO(error);
    REQUIRE(parsed);
    v.diagnosis = *parsed;
    REQUIRE(store->addVerdict(v, &error) == 1);
  }

  void seed() {
    using SD = common::SubDomain;
    add({"j1", "FAILED", kT0 + 1 * kHour, {"gpu-b17", "gpu-b18"}, SD::kHardware, "xid.79",
         "GPU 0000:5d:00: Xid 79 GPU has fallen off the bus", "NVRM: Xid 79", "gpu-b17", "0000:5d:00.0"});
    add({"j2", "FAILED", kT0 + 2 * kHour, {"gpu-a01"}, SD::kNetwork, "kernel.ib_port_down", "mlx5_0 port 1 down", "",
         "gpu-a01", "mlx5_0/1"});
    add({"j3", "FAILED", kT0 + 3 * kHour, {"gpu-b17"}, SD::kHardware, "xid.48", "GPU DBE", "", "gpu-b17", ""});
    add({"j4", "COMPLETED", kT0 + 4 * kHour, {"gpu-c01"}, std::nullopt, "", "", "", "", ""});
    add({"j5", "FAILED", kT0 + 5 * kHour, {"gpu-c02"}, SD::kApplication, "python.exception", "KeyError",
         "</script><script>alert(1)</script>", "gpu-c02", ""});
    add({"j6", "FAILED", kT0 + kDay + 1 * kHour, {"gpu-b17"}, SD::kHardware, "xid.79", "GPU fell off the bus (Xid 79)",
         "", "gpu-b17", "0000:5d:00.0"});
    add({"j7", "TIMEOUT", kT0 + kDay + 2 * kHour, {"gpu-d01"}, SD::kNone, "", "", "", "", ""});
  }

  HttpResponse get(const std::string& target) { return api->handle({"GET", target, "", ""}); }
  json getJson(const std::string& target, int want = 200) {
    auto r = get(target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == want);
    return json::parse(r.body, nullptr, false);
  }
  static std::string header(const HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers)
      if (k == name) return v;
    return "";
  }
  std::vector<std::string> ids(const std::string& target, int64_t* total = nullptr) {
    auto r = get(target);
    INFO(target << " -> " << r.body);
    REQUIRE(r.status == 200);
    if (total) *total = std::stoll(header(r, "X-Total-Count"));
    std::vector<std::string> out;
    for (const auto& j : json::parse(r.body)) out.push_back(j["job_id"]);
    return out;
  }
};

using Ids = std::vector<std::string>;

// The text of the <script type="application/json" id="diagnosis"> element.
std::string embeddedJson(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"diagnosis\">";
  auto a = html.find(open);
  REQUIRE(a != std::string::npos);
  a += open.size();
  auto b = html.find("</script>", a);
  REQUIRE(b != std::string::npos);
  return html.substr(a, b - a);
}

// Anything that would make a browser fetch something: absolute or protocol-relative URLs,
// src/href attributes, CSS imports and url(...). The embedded diagnosis is data, not markup: it
// is checked on its own (embeddedJson: no '<' at all).
void checkSelfContained(std::string html) {
  auto data = embeddedJson(html);
  html.erase(html.find(data), data.size());
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*["']?\s*(?!data:)[^"'\s>#])", std::regex::icase)));
  CHECK_FALSE(std::regex_search(html, std::regex(R"((^|[^A-Za-z])url\s*\(|@import)", std::regex::icase)));
  CHECK_FALSE(std::regex_search(html, std::regex(R"(["'(=]\s*//[A-Za-z0-9])")));
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("dashboard: /ui/ serves the page for every route, the assets with their types, 404 otherwise", "[dashboard]") {
  Fixture f;
  for (std::string path : {"/ui/", "/ui", "/ui/jobs/4242", "/ui/jobs/4242_7", "/ui/fleet", "/ui/agents"}) {
    INFO(path);
    auto r = f.get(path);
    CHECK(r.status == 200);
    CHECK(r.content_type == "text/html; charset=utf-8");
    CHECK(r.body.find("<main id=\"page\"") != std::string::npos);
    CHECK(r.body.find("/ui/assets/job_view.js") != std::string::npos);
    // Same origin only: no inline script may run, nothing loads from elsewhere.
    CHECK(Fixture::header(r, "Content-Security-Policy").find("script-src 'self'") != std::string::npos);
    CHECK(Fixture::header(r, "X-Content-Type-Options") == "nosniff");
  }
  CHECK(f.get("/ui/assets/job_view.js").content_type == "text/javascript; charset=utf-8");
  CHECK(f.get("/ui/assets/app.js").content_type == "text/javascript; charset=utf-8");
  CHECK(f.get("/ui/assets/app.css").content_type == "text/css; charset=utf-8");
  CHECK(f.get("/ui/assets/job_view.js").body == std::string(findWebAsset("job_view.js")->body));
  for (std::string path : {"/ui/assets/nope.js", "/ui/assets/", "/ui/assets/index.html", "/ui/assets/a/app.js",
                           "/ui/other", "/ui/jobs/1/diagnosis", "/ui/assets/../app.js"}) {
    INFO(path);
    CHECK(f.get(path).status == 404);
  }
  CHECK(f.api->handle({"POST", "/ui/", "", ""}).status == 405);
}

TEST_CASE("dashboard: every asset can be inlined (no </script or </style inside)", "[dashboard]") {
  REQUIRE(kWebAssetCount >= 5);
  for (size_t i = 0; i < kWebAssetCount; ++i) {
    std::string body(kWebAssets[i].body), lower;
    for (char c : body) lower += char(std::tolower(static_cast<unsigned char>(c)));
    INFO(kWebAssets[i].name);
    CHECK(!body.empty());
    if (kWebAssets[i].name.ends_with(".js")) {
      CHECK(lower.find("</script") == std::string::npos);
      // Log text goes in as text: the job view never assigns markup.
      CHECK(body.find("innerHTML") == std::string::npos);
      CHECK(body.find("insertAdjacentHTML") == std::string::npos);
      CHECK(body.find("document.write") == std::string::npos);
    }
    if (kWebAssets[i].name.ends_with(".css")) CHECK(lower.find("</style") == std::string::npos);
  }
}

TEST_CASE("dashboard: GET /jobs pages with a total and filters by rule and text, same rows as before", "[dashboard]") {
  Fixture f;
  f.seed();
  int64_t total = 0;
  // The dashboard's path returns the documented rows in the same order as the plain GET /jobs.
  auto plain = f.getJson("/jobs");
  auto paged = f.getJson("/jobs?total=1");
  REQUIRE(plain.size() == 7);
  REQUIRE(paged.size() == 7);
  for (size_t i = 0; i < plain.size(); ++i) {
    json row = paged[i];
    INFO(row.dump());
    if (row["verdict"].is_object()) {
      CHECK(row["verdict"].contains("responsible"));
      CHECK(row["verdict"].contains("summary"));
      row["verdict"].erase("responsible");
      row["verdict"].erase("summary");
    }
    CHECK(row == plain[i]);
  }
  CHECK(paged[1]["verdict"]["responsible"] == json::array({{{"node", "gpu-b17"}, {"device", "0000:5d:00.0"},
                                                             {"confidence", 0.9}, {"confidence_band", "strong"}, {"advice", "drain"}}}));

  CHECK(f.ids("/jobs?total=1", &total) == Ids{"j7", "j6", "j5", "j4", "j3", "j2", "j1"});
  CHECK(total == 7);
  CHECK(f.ids("/jobs?limit=2&offset=0", &total) == Ids{"j7", "j6"});
  CHECK(total == 7);
  CHECK(f.ids("/jobs?limit=2&offset=2", &total) == Ids{"j5", "j4"});
  CHECK(f.ids("/jobs?limit=2&offset=6", &total) == Ids{"j1"});
  CHECK(f.ids("/jobs?limit=2&offset=9", &total).empty());
  CHECK(total == 7);
  CHECK(f.ids("/jobs?state=failed&total=1", &total) == Ids{"j7", "j6", "j5", "j3", "j2", "j1"});
  CHECK(total == 6);
  CHECK(f.ids("/jobs?state=failed&limit=1&total=1", &total) == Ids{"j7"});
  CHECK(total == 6);

  CHECK(f.ids("/jobs?rule=xid.79", &total) == Ids{"j6", "j1"});
  CHECK(total == 2);
  CHECK(f.ids("/jobs?rule=xid.*", &total) == Ids{"j6", "j3", "j1"});
  CHECK(f.ids("/jobs?rule=xid.7", &total).empty());  // exact unless it ends in '*'
  CHECK(f.ids("/jobs?rule=xid.7*", &total) == Ids{"j6", "j1"});
  CHECK(f.ids("/jobs?rule=kernel.ib_port_down&sub_domain=network", &total) == Ids{"j2"});
  CHECK(f.ids("/jobs?rule=kernel.ib_port_down&sub_domain=hardware", &total).empty());
  CHECK(f.ids("/jobs?sub_domain=hardware&total=1", &total) == Ids{"j6", "j3", "j1"});
  CHECK(f.ids("/jobs?node=gpu-b18&total=1", &total) == Ids{"j1"});  // ran on it
  CHECK(f.ids("/jobs?blamed=gpu-b18&total=1", &total).empty());      // never blamed
  CHECK(f.ids("/jobs?blamed=gpu-b17", &total) == Ids{"j6", "j3", "j1"});
  CHECK(f.ids("/jobs?blamed=gpu-b17&rule=xid.48", &total) == Ids{"j3"});

  // Text: job id, node names, sub_domain, cause rule and summary; case-insensitive; LIKE's own
  // wildcards are plain characters.
  CHECK(f.ids("/jobs?q=b17", &total) == Ids{"j6", "j3", "j1"});
  CHECK(f.ids("/jobs?q=IB_PORT", &total) == Ids{"j2"});
  CHECK(f.ids("/jobs?q=fallen%20off", &total) == Ids{"j1"});
  CHECK(f.ids("/jobs?q=application", &total) == Ids{"j5"});
  CHECK(f.ids("/jobs?q=j4", &total) == Ids{"j4"});
  CHECK(f.ids("/jobs?q=%25", &total).empty());
  CHECK(f.ids("/jobs?q=b_7", &total).empty());  // '_' would match the '1' of gpu-b17
  CHECK(f.ids("/jobs?q=ib_port", &total) == Ids{"j2"});
  CHECK(f.ids("/jobs?q=b17&state=failed&since=2024-06-02T00:00:00Z", &total) == Ids{"j6"});

  // A new revision replaces the cached verdict of its job on the next read.
  auto v = f.store->latestVerdict("j2");
  REQUIRE(v);
  v->diagnosis.cause->rule_id = "kernel.ib_link_flap";
  v->diagnosis.sub_domain = common::SubDomain::kHardware;
  std::string error;
  REQUIRE(f.store->addVerdict(*v, &error) == 2);
  CHECK(f.ids("/jobs?rule=kernel.ib_port_down", &total).empty());
  CHECK(f.ids("/jobs?rule=kernel.ib_link_flap&sub_domain=hardware", &total) == Ids{"j2"});
  CHECK(f.getJson("/jobs?rule=kernel.ib_link_flap")[0]["verdict"]["revision"] == 2);
  v->diagnosis.responsible = {{"gpu-a02", "", 0.5}};
  REQUIRE(f.store->addVerdict(*v, &error) == 3);
  CHECK(f.ids("/jobs?blamed=gpu-a01", &total).empty());
  CHECK(f.ids("/jobs?blamed=gpu-a02", &total) == Ids{"j2"});

  CHECK(f.get("/jobs?offset=x").status == 400);
  CHECK(f.get("/jobs?total=1&since=yesterday").status == 400);
}

TEST_CASE("dashboard: the read cache filled by one scan or by lookups gives the same pages", "[dashboard]") {
  Fixture f;
  f.seed();
  std::string error;
  auto scan = UiReader::open(f.dir.file("d.db"), &error, 0);     // every fill is a scan
  auto lookup = UiReader::open(f.dir.file("d.db"), &error, 1000);  // every fill is lookups
  REQUIRE(scan);
  REQUIRE(lookup);
  auto same = [&](const JobPageFilter& filter) {
    int64_t t1 = -1, t2 = -2;
    auto a = scan->jobs(filter, &t1, &error);
    auto b = lookup->jobs(filter, &t2, &error);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(t1 == t2);
    CHECK(*a == *b);
    return t1;
  };
  JobPageFilter all;
  CHECK(same(all) == 7);
  JobPageFilter rule;
  rule.rule = "xid.79";
  CHECK(same(rule) == 2);
  JobPageFilter blamed;
  blamed.blamed = "gpu-b17";
  CHECK(same(blamed) == 3);
  // A later revision reaches both (a scan again for `scan`, a lookup for `lookup`).
  auto v = f.store->latestVerdict("j3");
  REQUIRE(v);
  v->diagnosis.cause->rule_id = "xid.79";
  REQUIRE(f.store->addVerdict(*v, &error) == 2);
  CHECK(same(rule) == 3);
}

TEST_CASE("dashboard: failures per node and day, per sub_domain, and the nodes of recent jobs", "[dashboard]") {
  Fixture f;
  f.seed();
  auto d = f.getJson("/fleet/daily");  // default 30d before now (3 days after the first job)
  CHECK(d["days"] == json::array({"2024-06-01", "2024-06-02"}));
  REQUIRE(d["nodes"].size() == 3);
  CHECK(d["nodes"][0] == json({{"node", "gpu-b17"}, {"failures", 3}, {"days", {2, 1}}}));
  CHECK(d["nodes_total"] == 3);  // gpu-b17, gpu-a01, gpu-c02; j7 blamed no node
  std::map<std::string, json> sd;
  for (const auto& s : d["sub_domains"]) sd[s["sub_domain"]] = s["days"];
  CHECK(sd["hardware"] == json({2, 1}));
  CHECK(sd["network"] == json({1, 0}));
  CHECK(sd["application"] == json({1, 0}));
  CHECK(sd["none"] == json({0, 1}));  // the timeout: failed, nothing blamed
  CHECK(sd.count("success") == 0);
  CHECK(f.getJson("/fleet/daily?nodes=1")["nodes"].size() == 1);
  CHECK(f.getJson("/fleet/daily?since=2024-06-02T00:00:00Z")["days"] == json::array({"2024-06-02"}));
  CHECK(f.getJson("/fleet/daily?since=1h")["days"].empty());

  auto n = f.getJson("/fleet/job-nodes?since=2024-06-01T00:00:00Z");
  std::map<std::string, json> by;
  for (const auto& x : n["nodes"]) by[x["node"]] = x;
  CHECK(by.size() == 6);
  CHECK(by["gpu-b17"]["jobs"] == 3);
  CHECK(by["gpu-b17"]["last_job_id"] == "j6");
  CHECK(by["gpu-c01"]["last_job_id"] == "j4");
  CHECK(f.getJson("/fleet/job-nodes")["nodes"].empty());  // default 24h: nothing ended since
  CHECK(f.get("/fleet/daily?since=never").status == 400);
  CHECK(f.get("/fleet/other").status == 404);
}

TEST_CASE("dashboard: without the store's file the dashboard's reads answer 503, the rest works", "[dashboard]") {
  Fixture f(false);
  f.seed();
  CHECK(f.get("/jobs?total=1").status == 503);
  CHECK(f.get("/fleet/daily").status == 503);
  CHECK(f.getJson("/jobs").size() == 7);
  CHECK(f.get("/ui/").status == 200);
}

TEST_CASE("dashboard: pages, headers and the total over a real socket", "[dashboard]") {
  Fixture f;
  f.seed();
  boost::asio::io_context io;
  HttpServer server(io, *f.api);
  std::string error;
  REQUIRE(server.listen("127.0.0.1", 0, &error));
  std::thread t([&] { io.run(); });
  std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto page = httpCall(url, "GET", "/ui/jobs/j1", "", "", std::chrono::seconds(10), &error);
  auto jobs = httpCall(url, "GET", "/jobs?state=failed&limit=2&total=1", "", "", std::chrono::seconds(10), &error);
  auto missing = httpCall(url, "GET", "/ui/assets/missing.css", "", "", std::chrono::seconds(10), &error);
  boost::asio::post(io, [&] {
    server.stop();
    io.stop();
  });
  t.join();
  REQUIRE(page);
  CHECK(page->status == 200);
  CHECK(page->header("content-type") == "text/html; charset=utf-8");
  CHECK(page->header("Content-Security-Policy").find("default-src 'none'") != std::string::npos);
  REQUIRE(jobs);
  CHECK(jobs->header("X-Total-Count") == "6");
  CHECK(json::parse(jobs->body).size() == 2);
  REQUIRE(missing);
  CHECK(missing->status == 404);
}

TEST_CASE("offline report: self-contained, the diagnosis embedded so log text cannot break out", "[dashboard]") {
  json d = {{"schema_version", 1},
            {"job_id", "77<b>"},
            {"terminal_state", "fail"},
            {"sub_domain", "application"},
            {"cause",
             {{"rule_id", "python.exception"},
              {"evidence", "</script><script>window.pwned = 1</script><!-- & \u2028 \u2029 'x' \"y\""},
              {"summary", "<img src=x onerror=alert(1)>"}}},
            {"chain", json::array({{{"rule_id", "python.exception"},
                                    {"role", "root"},
                                    {"node", "<svg onload=alert(1)>"},
                                    {"evidence", "</SCRIPT ><script>alert(2)</script>"}}})}};
  std::string html = cli::renderHtmlReport(d);
  checkSelfContained(html);
  // Three script elements (data, job view, bootstrap) and exactly three ends: nothing from the
  // diagnosis closes one or opens another.
  CHECK(count(html, "<script") == 3);
  CHECK(count(html, "</script>") == 3);
  std::string lower;
  for (char c : html) lower += char(std::tolower(static_cast<unsigned char>(c)));
  CHECK(count(lower, "</script") == 3);
  CHECK(html.find("window.pwned") != std::string::npos);  // still there, as escaped data
  CHECK(html.find("<img src=x") == std::string::npos);
  CHECK(html.find("<svg onload") == std::string::npos);
  CHECK(html.find("\xE2\x80\xA8") == std::string::npos);
  std::string embedded = embeddedJson(html);
  CHECK(embedded.find('<') == std::string::npos);
  CHECK(embedded.find('>') == std::string::npos);
  CHECK(json::parse(embedded) == d);  // the page reads back exactly the diagnosis
  CHECK(html.find("<title>faultline: job 77&lt;b&gt;</title>") != std::string::npos);
  CHECK(html.find("<main id=\"page\" data-page=\"job\">") != std::string::npos);
  CHECK(html.find(std::string(findWebAsset("job_view.js")->body)) != std::string::npos);
}

TEST_CASE("offline report: `faultline attribute BUNDLE --html FILE` embeds the same diagnosis as --json", "[dashboard]") {
  TempDir dir;
  std::string out = dir.file("c.html");
  auto r = runCommand(std::string(FAULTLINE_CLI_BIN) + " attribute " FAULTLINE_SOURCE_DIR "/samples/cascade64-xid79 --json --html " + out +
                          " 2>/dev/null",
                      64 << 20);
  REQUIRE(r.status == 0);
  std::ifstream in(out);
  std::string html((std::istreambuf_iterator<char>(in)), {});
  REQUIRE(!html.empty());
  checkSelfContained(html);
  json printed = json::parse(r.out);
  json embedded = json::parse(embeddedJson(html));
  CHECK(embedded == printed);
  CHECK(embedded["sub_domain"] == "hardware");
  CHECK(html.find("data-page=\"job\"") != std::string::npos);

  // Two bundles with --html: refused (one page is one job).
  auto two = runCommand(std::string(FAULTLINE_CLI_BIN) + " attribute " FAULTLINE_SOURCE_DIR "/samples/cuda-oom " FAULTLINE_SOURCE_DIR
                            "/samples/cascade64-xid79 --html " + dir.file("x.html") + " 2>/dev/null",
                        1 << 20);
  CHECK(two.status == 2);
}

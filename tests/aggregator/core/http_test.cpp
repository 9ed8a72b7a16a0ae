#include <catch2/catch.hpp>

#include <thread>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/http/server.h"
#include "aggregator/offline/bundle.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/api_server.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

// The API server (api_server.h) with a reader that checks the status.
struct Server : ApiServer {
  json get(const std::string& target, int want = 200) {
    auto r = call("GET", target);
    INFO(target << " -> " << r.body);
    CHECK(r.status == want);
    return json::parse(r.body, nullptr, false);
  }
};

}  // namespace

TEST_CASE("http: job events, verdicts and every read endpoint over a real socket", "[http]") {
  Server s;
  CHECK(s.get("/healthz")["status"] == "ok");

  // An agent's batch and heartbeat, as the ingest layer would store them.
  REQUIRE(s.store->ingestBatch(makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid.79", kT0 + 50 * kSec,
                                                                    common::SubDomain::kHardware, common::Role::kRoot,
                                                                    "0000:3b:00.0")}),
                               "agent-gpu-01")
              .status == IngestResult::Status::kStored);
  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-01";
  hb.hostname = "gpu-01";
  hb.created_ns = kT0;
  hb.sources = {{"kmsg", "kmsg", "ok", "", 5, 0, 0}};
  std::string reason;
  REQUIRE(s.store->recordHeartbeat(hb, "agent-gpu-01", &reason));

  // Writes need the bearer token.
  CHECK(s.call("POST", "/jobs/77/start", R"({"nodes": "gpu-[01-02]"})").status == 401);
  CHECK(s.call("POST", "/jobs/77/start", R"({"nodes": "gpu-[01-02]"})", "wrong").status == 401);
  CHECK(s.call("POST", "/jobs/77/start", "{broken", "s3cret").status == 400);
  CHECK(s.call("POST", "/jobs/77/start", R"({"nodes": "gpu-[01-"})", "s3cret").status == 400);
  // Nonsense is refused with the reason, and changes nothing.
  auto bad = s.call("POST", "/jobs/77/start", R"({"nodes": "gpu-[01-02]", "state": "EXPLODED"})", "s3cret");
  CHECK(bad.status == 400);
  CHECK(bad.body.find("not a Slurm job state") != std::string::npos);
  auto unknown = s.call("POST", "/jobs/78/end", R"({"exit_code": "1:0"})", "s3cret");
  CHECK(unknown.status == 404);
  CHECK(unknown.body.find("no start was recorded") != std::string::npos);
  CHECK(s.call("GET", "/jobs/78", "", "").status == 404);
  CHECK(s.call("GET", "/jobs/77/end", "", "").status == 405);  // written, not read
  auto started = s.call("POST", "/jobs/77/start", R"({"nodes": "gpu-[01-02]", "time": "2024-06-01T10:00:00Z"})", "s3cret");
  CHECK(started.status == 200);
  s.clock.advance(100 * kSec);
  auto ended = s.call("POST", "/jobs/77/end", R"({"exit_code": "1:0"})", "s3cret");
  REQUIRE(ended.status == 200);
  auto e = json::parse(ended.body);
  CHECK(e["state"] == "FAILED");
  REQUIRE(e["verdict"].is_object());
  CHECK(e["verdict"]["revision"] == 1);
  CHECK(e["verdict"]["sub_domain"] == "hardware");

  auto jobs = s.get("/jobs?state=failed&node=gpu-02&since=1d");
  REQUIRE(jobs.size() == 1);
  CHECK(jobs[0]["job_id"] == "77");
  CHECK(jobs[0]["verdict"]["responsible_nodes"] == json::array({"gpu-01"}));
  CHECK(s.get("/jobs?sub_domain=network").empty());
  CHECK(s.get("/jobs?sub_domain=hardware").size() == 1);
  CHECK(s.get("/jobs?state=success").empty());
  auto job = s.get("/jobs/77");
  CHECK(job["nodes"] == json::array({"gpu-01", "gpu-02"}));
  CHECK(job["revisions"].size() == 1);
  auto diag = s.get("/jobs/77/diagnosis");
  std::string err;
  auto d = common::diagnosisFromJson(diag, &err);
  REQUIRE(d);
  CHECK(d->sub_domain == common::SubDomain::kHardware);
  bool gpu02_missing = false;
  for (const auto& c : d->coverage) gpu02_missing |= c.node == "gpu-02" && c.status == "missing";
  CHECK(gpu02_missing);
  CHECK(diag["verdict"]["status"] == "provisional");
  s.get("/jobs/78", 404);
  s.get("/jobs/78/diagnosis", 404);

  auto nodes = s.get("/nodes");
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0]["live"] == false);  // heartbeat 100 s old, timeout 90 s
  auto node = s.get("/nodes/gpu-01?since=7d");
  CHECK(node["suspicion"]["rank"] == 1);
  CHECK(node["jobs"].size() == 1);
  s.get("/nodes/nope", 404);
  auto fleet = s.get("/nodes?rank=1&since=7d");
  REQUIRE(fleet["nodes"].size() == 1);
  CHECK(fleet["devices"][0]["device"] == "0000:3b:00.0");
  CHECK(s.get("/agents")[0]["hostname"] == "gpu-01");
  auto sym = s.get("/symptoms?node=gpu-01&rule=gpu.*");
  REQUIRE(sym.size() == 1);
  CHECK(sym[0]["jobs"] == json::array({"77"}));
  CHECK(s.get("/symptoms?node=gpu-02").empty());
  s.get("/symptoms?since=yesterday", 400);
  s.get("/nope", 404);
  CHECK(s.call("DELETE", "/jobs/77").status == 405);
  {
    // An oversized body is refused with 413 and the connection closed; the client may see the
    // close while it is still sending (EPIPE/reset) before it can read the 413. Either way the
    // server goes on serving.
    std::string error;
    auto big = httpCall(s.url, "POST", "/jobs/77/start", std::string(2 << 20, 'x'), "s3cret",
                        std::chrono::seconds(10), &error);
    if (big) {
      CHECK(big->status == 413);
    } else {
      INFO(error);
      CHECK((error.find("roken pipe") != std::string::npos || error.find("reset") != std::string::npos ||
             error.find("end of stream") != std::string::npos));
    }
    s.get("/healthz");
  }

  auto metrics = s.call("GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK_THAT(metrics.body, Catch::Contains("faultline_verdicts_total{sub_domain=\"hardware\"} 1"));
  CHECK_THAT(metrics.body, Catch::Contains("faultline_verdict_latency_seconds_count 1"));
  CHECK_THAT(metrics.body, Catch::Contains("faultline_http_unauthorized_total 2"));
  CHECK_THAT(metrics.body, Catch::Contains("faultline_store_symptoms 1"));
}

TEST_CASE("http: write endpoints are off without a token, the server binds where told", "[http]") {
  TempDir dir;
  ManualClock clock(kT0);
  std::string error;
  auto store = Store::open(dir.file("x.db"), clock, {}, &error);
  REQUIRE(store);
  Metrics metrics;
  Api api(*store, nullptr, metrics, clock, ApiOptions{});
  HttpRequest r{"POST", "/jobs/1/end", "Bearer ", "{}"};
  CHECK(api.handle(r).status == 403);
  boost::asio::io_context io;
  HttpServer server(io, api);
  CHECK_FALSE(server.listen("not-an-address", 0, &error));
  CHECK(server.listen("127.0.0.1", 0, &error));
  CHECK(server.port() != 0);
}

TEST_CASE("http: a job's output file is uploaded, judged with the job, and its upload bound is the token's", "[http]") {
  Server s;
  // The job: the end event (as the epilog sends it) carries the block layout.
  auto ended = s.call("POST", "/jobs/4812345/end",
                      R"({"nodes": "gpu-a[01-02]", "exit_code": "1:0", "ntasks_per_node": 4,
                          "start_time": "2024-06-01T10:00:00Z", "time": "2024-06-01T10:42:51Z"})",
                      "s3cret");
  REQUIRE(ended.status == 200);
  CHECK(json::parse(ended.body)["verdict"]["sub_domain"] == "unattributed");  // no agent, no output yet
  CHECK(s.get("/jobs/4812345")["ntasks_per_node"] == 4);

  // What `faultline job output` sends for the sample's slurm-%j.out: ranks placed through the layout.
  const std::string file = FAULTLINE_SOURCE_DIR "/samples/app-keyerror-rank5/slurm-4812345.out";
  common::RuleEngine rule_engine(common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"}).rules);
  common::JobInfo layout;
  layout.nodes = {"gpu-a01", "gpu-a02"};
  layout.ntasks_per_node = 4;
  common::deriveRanks(layout);
  common::ParseOptions popts;
  popts.default_year = 2024;
  auto scan = offline::scanJobLog(file, "", [&](int r) { return layout.nodeOfRank(r); }, rule_engine, popts);
  REQUIRE(scan.symptoms.size() >= 3);
  json body{{"source", file},
            {"coverage", {{"format", scan.coverage.format}, {"records", scan.coverage.records}, {"status", "ok"}}},
            {"symptoms", json::array()}};
  for (const auto& x : scan.symptoms) body["symptoms"].push_back(symptomToJson(x));

  CHECK(s.call("POST", "/jobs/4812345/output", body.dump()).status == 401);
  CHECK(s.call("POST", "/jobs/4812345/output", "{broken", "s3cret").status == 400);
  CHECK(s.call("POST", "/jobs/4812345/output", R"({"source": "f", "symptoms": [{"rule_id": ""}]})", "s3cret").status == 400);
  CHECK(s.call("POST", "/jobs/bad%20id/output", body.dump(), "s3cret").status == 400);
  s.clock.advance(5 * kSec);
  auto up = s.call("POST", "/jobs/4812345/output", body.dump(), "s3cret");
  INFO(up.body);
  REQUIRE(up.status == 200);
  auto u = json::parse(up.body);
  CHECK(u["symptoms"] == scan.symptoms.size());
  CHECK(u["verdict"]["revision"] == 2);
  CHECK(u["verdict"]["reason"] == "job_output");
  CHECK(u["verdict"]["sub_domain"] == "application");
  auto diag = s.get("/jobs/4812345/diagnosis");
  CHECK(diag["cause"]["rule_id"] == "python.exception");
  CHECK(diag["responsible_nodes"][0]["node"] == "gpu-a02");
  bool output_covered = false;
  for (const auto& c : diag["coverage"]) output_covered |= c["source"] == file && c["status"] == "ok";
  CHECK(output_covered);

  // The epilog retried: the same upload replaces itself and says nothing new.
  auto again = s.call("POST", "/jobs/4812345/output", body.dump(), "s3cret");
  REQUIRE(again.status == 200);
  CHECK(json::parse(again.body)["verdict"]["revision"] == 2);
  CHECK(s.get("/jobs/4812345")["revisions"].size() == 2);
  CHECK(s.store->jobOutputs("4812345").size() == 1);

  // Above 1 MiB only with the token: a big job's output (here padded evidence) is accepted...
  json big = body;
  for (int i = 0; i < 600; ++i) {
    json x = body["symptoms"][0];
    x["fields"]["rank"] = std::to_string(1000 + i);
    x["evidence"] = {std::string(3000, 'e')};
    big["symptoms"].push_back(std::move(x));
  }
  big["source"] = "/shared/slurm-4812399.out";
  REQUIRE(big.dump().size() > (1u << 20));
  auto accepted = s.call("POST", "/jobs/4812399/output", big.dump(), "s3cret");
  CHECK(accepted.status == 200);
  CHECK(json::parse(accepted.body)["verdict"].is_null());  // not a known job yet: kept for its end
  CHECK(s.store->jobOutputs("4812399").size() == 1);
  {
    // ...and without the token the body stops at 1 MiB (413, or the close while still sending).
    std::string error;
    auto refused = httpCall(s.url, "POST", "/jobs/4812399/output", big.dump(), "", std::chrono::seconds(10), &error);
    if (refused) CHECK(refused->status == 413);
    s.get("/healthz");
  }
  auto metrics = s.call("GET", "/metrics");
  CHECK_THAT(metrics.body, Catch::Contains("faultline_job_outputs_total 3"));
  CHECK_THAT(metrics.body, Catch::Contains("faultline_job_outputs_rejected_total 1"));
}

TEST_CASE("http: with a read token every read but /healthz needs it, /ui/?token= sets it as a cookie", "[http][read_token]") {
  TempDir dir;
  ManualClock clock(kT0);
  std::string error;
  auto store = Store::open(dir.file("r.db"), clock, {}, &error);
  REQUIRE(store);
  Metrics metrics;
  ApiOptions o;
  o.write_token = "w-secret";
  o.read_token = "r-secret";
  Api api(*store, nullptr, metrics, clock, o);
  auto get = [&](const std::string& target, const std::string& auth = "", const std::string& cookie = "") {
    return api.handle({"GET", target, auth, "", cookie});
  };
  CHECK(get("/healthz").status == 200);
  CHECK(get("/jobs").status == 401);
  CHECK(get("/jobs", "Bearer wrong").status == 401);
  CHECK(get("/jobs", "Bearer r-secret").status == 200);
  CHECK(get("/jobs", "Bearer w-secret").status == 200);  // who may write may read
  CHECK(get("/metrics").status == 401);
  CHECK(get("/jobs", "", "other=1; faultline_read=r-secret").status == 200);
  CHECK(get("/jobs", "", "faultline_read=r-secre").status == 401);
  // The dashboard: without the token a page that says how to get in, never the page itself.
  auto page = get("/ui/jobs/7");
  CHECK(page.status == 401);
  CHECK_THAT(page.body, Catch::Contains("/ui/?token="));
  CHECK(get("/ui/?token=wrong").status == 401);
  auto login = get("/ui/jobs/7?token=r-secret");
  CHECK(login.status == 303);
  auto header = [&](const std::string& name) {
    for (const auto& [k, v] : login.headers)
      if (k == name) return v;
    return std::string();
  };
  CHECK(header("Location") == "/ui/jobs/7");  // the token leaves the address bar
  CHECK(header("Set-Cookie") == "faultline_read=r-secret; Path=/; HttpOnly; SameSite=Strict");
  CHECK(get("/ui/jobs/7", "", "faultline_read=r-secret").status == 200);
  CHECK(get("/ui/assets/app.css", "", "faultline_read=r-secret").status == 200);
  // Served over HTTPS: the cookie is never sent back over plain HTTP.
  ApiOptions tls = o;
  tls.secure_cookie = true;
  Api tls_api(*store, nullptr, metrics, clock, tls);
  bool secure = false;
  for (const auto& [k, v] : tls_api.handle({"GET", "/ui/?token=r-secret", "", "", ""}).headers)
    if (k == "Set-Cookie") secure = v == "faultline_read=r-secret; Path=/; HttpOnly; SameSite=Strict; Secure";
  CHECK(secure);
  // The read token cannot write.
  CHECK(api.handle({"POST", "/jobs/1/end", "Bearer r-secret", "{}"}).status == 401);

  // Over a real socket: the bearer token of a CLI or script.
  boost::asio::io_context io;
  HttpServer server(io, api);
  REQUIRE(server.listen("127.0.0.1", 0, &error));
  std::thread t([&] { io.run(); });
  const std::string url = "http://127.0.0.1:" + std::to_string(server.port());
  auto r = httpCall(url, "GET", "/jobs", "", "r-secret", std::chrono::seconds(10), &error);
  auto denied = httpCall(url, "GET", "/jobs", "", "", std::chrono::seconds(10), &error);
  boost::asio::post(io, [&] { server.stop(); io.stop(); });
  t.join();
  REQUIRE(r);
  REQUIRE(denied);
  CHECK(r->status == 200);
  CHECK(denied->status == 401);
}

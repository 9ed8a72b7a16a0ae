// The FACT observation API (aggregator/http/fact_api.h) over a real socket, fed exactly the request
// bodies NVRx's FACT client builds (nvidia_resiliency_ext/attribution/fact/client.py: its
// AttributorInfo, its dmesg -> raw_loki_streams conversion, its observation envelope), and checked
// against `faultline attribute` on the same lines.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <thread>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/http/server.h"
#include "aggregator/offline/attribute.h"
#include "common/job.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/api_server.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
using nlohmann::json;

namespace {

// The cycle NVRx reports: 2026-05-10T12:00:00Z .. 12:12:00Z; the clock stands just after its end.
constexpr int64_t kCycleStart = 1'778'414'400LL * 1'000'000'000;
constexpr int64_t kCycleEnd = kCycleStart + 720LL * 1'000'000'000;
const std::string kStartIso = "2026-05-10T12:00:00+00:00", kEndIso = "2026-05-10T12:12:00+00:00";
const std::string kNodeA = "gb-nvl-134-compute01", kNodeB = "gb-nvl-134-compute02";

// Write token "s3cret", read token "r34d".
struct FactServer : ApiServer {
  FactServer() : ApiServer(kCycleEnd + 5 * kSec, options()) {}
  static ApiOptions options() {
    ApiOptions o = defaultOptions();
    o.read_token = "r34d";
    return o;
  }
  json post(const std::string& target, const json& body, int want = 200) {
    auto r = call("POST", target, body.dump(), "s3cret");
    INFO(target << " -> " << r.body);
    CHECK(r.status == want);
    return json::parse(r.body, nullptr, false);
  }
  json get(const std::string& target, int want = 200) {
    auto r = call("GET", target, "", "r34d");
    INFO(target << " -> " << r.body);
    CHECK(r.status == want);
    return json::parse(r.body, nullptr, false);
  }
};

// The AttributorInfo NVRx's store host posts for a failed cycle (_build_attributor_info).
json attributorInfo(const std::string& workload_id) {
  return {{"workload",
           {{"id", workload_id},
            {"type", "slurm"},
            {"srun_cmd", "unknown"},
            {"job_start_time", kStartIso},
            {"job_end_time", kEndIso},
            {"status", "FAILED"},
            {"nranks", 8},
            {"ranks_per_node", 4},
            {"nodes", json::array({kNodeA, kNodeB})},
            {"name", "resnet-training"},
            {"username", "slurm-user"},
            {"framework", "unknown"},
            {"exit_code_signal", 1}}},
          {"metadata",
           {{"cluster", "slurm-cluster"},
            {"agent", "nvrx-ft-launcher"},
            {"tenant", "unknown"},
            {"ruleset", "default"}}}};
}

// NVRx's dmesg -> raw_loki_streams, by the shapes its tests pin down: a "host: " prefix names the
// node ("host_PID" is NVRx's gRPC log id for host), the prefilter keeps Xid lines, each kept line
// is a JSON record {"body", "severity", "attributes": {"hostname", "appname": "kernel",
// "facility": 0}, "resources": {}} stamped base + 1 ns per kept line, one stream per node with
// labels {"job": "nvrx", "app": "dmesg", "hostname"}.
json dmesgToLokiStreams(const std::vector<std::string>& lines, int64_t base_ns) {
  std::vector<std::pair<std::string, json>> streams;
  int64_t offset = 0;
  for (const auto& line : lines) {
    auto colon = line.find(": ");
    std::string host = line.substr(0, colon), body = line.substr(colon + 2);
    if (auto us = host.rfind('_');
        us != std::string::npos &&
        host.find_first_not_of("0123456789", us + 1) == std::string::npos)
      host = host.substr(0, us);
    if (body.find("Xid") == std::string::npos) continue;  // the client's prefilter
    json record{{"body", body},
                {"severity", "err"},
                {"attributes", {{"hostname", host}, {"appname", "kernel"}, {"facility", 0}}},
                {"resources", json::object()}};
    auto it =
        std::find_if(streams.begin(), streams.end(), [&](auto& s) { return s.first == host; });
    if (it == streams.end()) it = streams.insert(streams.end(), {host, json::array()});
    it->second.push_back(json::array({std::to_string(base_ns + offset++), record.dump()}));
  }
  json out = json::array();
  for (auto& [host, values] : streams)
    out.push_back(
        {{"stream", {{"job", "nvrx"}, {"app", "dmesg"}, {"hostname", host}}}, {"values", values}});
  return out;
}

// The observation envelope (_post_observation): the streams travel as a JSON string.
json observation(const json& streams, const std::string& source = "syslog") {
  return {{"context",
           {{"time_interval", {{"start", "2026-05-10T12:00:00+00:00"}, {"end", kEndIso}}},
            {"resources", "AllJobResources"},
            {"source", source},
            {"format", "raw_loki_streams"}}},
          {"body", streams.dump()}};
}

std::vector<std::string> faultyNodes(const json& attribution) {
  std::vector<std::string> nodes;
  for (const auto& a : attribution["attributions"])
    if (a["type"] == "NodeAttribution" && !a["attributions"].empty()) nodes.push_back(a["node"]);
  return nodes;
}

const std::vector<std::string> kDmesgA = {
    kNodeA + ": [1247249.100000] plain kernel line",
    kNodeA +
        ": [1247249.751385] NVRM: Xid (PCI:0000:e4:00): 79, pid='<unknown>', name=<unknown>, GPU "
        "has fallen off the bus.",
};
const std::vector<std::string> kDmesgB = {
    kNodeB +
        "_2549019: [1247250.403317] NVRM: Xid (PCI:0000:2a:00): 45, pid=51301, name=python, Ch "
        "00000010",
};

}  // namespace

TEST_CASE(
    "fact: NVRx's attributor, dmesg observations and attribution agree with faultline attribute",
    "[http][fact]") {
  FactServer s;
  CHECK(s.get("/v2/healthz")["status"] == "ok");
  CHECK(s.call("GET", "/latest/v2/healthz", "", "").status == 200);  // like /healthz: no token

  // Writes need the write token, reads the read token.
  CHECK(s.call("POST", "/latest/attributor", attributorInfo("job-1:cycle2:1").dump(), "").status ==
        401);
  CHECK(s.call("POST", "/latest/attributor", attributorInfo("job-1:cycle2:1").dump(), "r34d")
            .status == 401);
  auto created = s.post("/latest/attributor", attributorInfo("job-1:cycle2:1778414400000000000"));
  const std::string id = created["attributor_id"];
  CHECK(id == "fact-job-1.cycle2.1778414400000000000");
  CHECK(created["state"] == "FAILED");
  CHECK(created["verdict"]["revision"] == 1);
  // The same workload again maps to the same attributor.
  CHECK(s.post("/attributor",
               attributorInfo("job-1:cycle2:1778414400000000000"))["attributor_id"] == id);
  CHECK(s.call("GET", "/latest/attributor/" + id + "/attribution", "", "").status == 401);

  // Before any observation: every node listed, none faulty.
  auto before = s.get("/latest/attributor/" + id + "/attribution");
  REQUIRE(before["attributions"].size() == 2);
  CHECK(faultyNodes(before).empty());
  CHECK(before["verdict"]["sub_domain"] == "unattributed");

  // Each node's agent posts its own dmesg, stamped near the collection end (end - 1 s).
  const int64_t anchor = kCycleEnd - kSec;
  auto a = s.post("/latest/attributor/" + id + "/observation",
                  observation(dmesgToLokiStreams(kDmesgA, anchor)));
  CHECK(a["observation_id"] == "obs-1");
  CHECK(a["lines"] == 1);
  CHECK(a["out_of_window"] == 0);
  CHECK(a["symptoms"] == 1);
  CHECK(a["verdict"]["revision"] == 2);
  CHECK(a["verdict"]["reason"] == "job_output");
  auto b = s.post("/latest/attributor/" + id + "/observation",
                  observation(dmesgToLokiStreams(kDmesgB, anchor)));
  CHECK(b["observation_id"] == "obs-2");
  CHECK(b["coverage"][0]["node"] == kNodeB);  // the gRPC log id "host_PID" names host

  auto after = s.get("/latest/attributor/" + id + "/attribution");
  INFO(after.dump(2));
  CHECK(faultyNodes(after) == std::vector<std::string>{kNodeA});
  const json& claim = after["attributions"][0]["attributions"][0];
  CHECK(claim["rule_id"] == "xid.79");
  CHECK(claim["sub_domain"] == "hardware");
  CHECK(claim["confidence"].get<double>() > 0);
  CHECK(!claim["summary"].get<std::string>().empty());

  // The same lines as a bundle, through `faultline attribute`'s path: same cause, node, domain.
  TempDir bundle;
  std::ofstream(bundle.file("job.json")) << json{
      {"job_id", "fact-compare"},
      {"state", "FAILED"},
      {"exit_code", "1:0"},
      {"start_time", "2026-05-10T12:00:00Z"},
      {"end_time", "2026-05-10T12:12:00Z"},
      {"nodelist", "gb-nvl-134-compute[01-02]"},
      {"ntasks_per_node", 4}}.dump();
  for (const auto& [node, lines] : {std::pair{kNodeA, kDmesgA}, std::pair{kNodeB, kDmesgB}}) {
    std::filesystem::create_directories(bundle.file("nodes/" + node));
    std::ofstream out(bundle.file("nodes/" + node + "/dmesg.txt"));
    for (const auto& l : lines)
      if (l.find("Xid") != std::string::npos)
        out << l.substr(l.find(": ") + 2) << "\n";  // what was posted
  }
  std::string error;
  auto offline = offline::attributeBundle(bundle.path(), *s.rule_engine, &error);
  REQUIRE(offline);
  REQUIRE(offline->cause);
  CHECK(offline->cause->rule_id == claim["rule_id"]);
  CHECK(common::subDomainName(offline->sub_domain) == after["verdict"]["sub_domain"]);
  std::vector<std::string> blamed;
  for (const auto& r : offline->responsible) blamed.push_back(r.node);
  CHECK(blamed == faultyNodes(after));
}

TEST_CASE("fact: out-of-window Loki stamps, applog and prometheus_metrics observations",
          "[http][fact]") {
  FactServer s;
  const std::string id = s.post("/attributor", attributorInfo("job-7:cycle0:5"))["attributor_id"];
  // NVRx's own test stamps: 2026-05-01 (days before the cycle) and 0. The lines still count, as
  // evidence without a time, and the coverage says why.
  auto early = s.post("/attributor/" + id + "/observation",
                      observation(dmesgToLokiStreams(kDmesgA, 1'777'601'387'000'000'000)));
  CHECK(early["out_of_window"] == 1);
  CHECK(early["coverage"][0]["reason"].get<std::string>().find("outside the job's window") !=
        std::string::npos);
  auto zero =
      s.post("/attributor/" + id + "/observation", observation(dmesgToLokiStreams(kDmesgB, 0)));
  CHECK(zero["out_of_window"] == 1);
  CHECK(faultyNodes(s.get("/attributor/" + id + "/attribution")) ==
        std::vector<std::string>{kNodeA});

  // An application log as Loki push (plain lines, {"streams": [...]} as JSON, not a string).
  json line = json::array(
      {std::to_string(kCycleEnd - 30 * kSec),
       "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"});
  json stream{{"stream", {{"hostname", kNodeB}, {"app", "train"}}},
              {"values", json::array({line})}};
  json app{{"context", {{"source", "applog"}, {"format", "raw_loki_streams"}}},
           {"body", {{"streams", json::array({stream})}}}};
  auto applog = s.post("/attributor/" + id + "/observation", app);
  CHECK(applog["observation_id"] == "obs-3");
  CHECK(applog["coverage"][0]["node"] == kNodeB);

  // One scrape alone: the XID gauge's 79 may be older than the job, so it is the series' baseline
  // and no symptom; the coverage says so.
  json prom{{"context", {{"source", "syslog"}, {"format", "prometheus_metrics"}}},
            {"body", "DCGM_FI_DEV_XID_ERRORS{gpu=\"0\",Hostname=\"" + kNodeA + "\"} 79\n"}};
  auto metrics = s.post("/attributor/" + id + "/observation", prom);
  CHECK(metrics["coverage"][0]["status"] == "ok");
  CHECK(metrics["symptoms"] == 0);
  CHECK(metrics["coverage"][0]["reason"].get<std::string>().find("baseline") != std::string::npos);
}

namespace {

// A dcgm-exporter scrape of node A's GPU 0 and a node_exporter scrape (no instance label: the
// exporter's own output) at `at_ms`, in the Prometheus text format.
std::string scrape(int64_t at_ms, int xid, int dbe, const std::string& extra = "") {
  const std::string gpu = "{gpu=\"0\",UUID=\"GPU-5c2b7a1e\",pci_bus_id=\"00000000:E4:00.0\",device=\"nvidia0\","
                          "modelName=\"NVIDIA GB200\",Hostname=\"" + kNodeA + "\"}";
  return fmt::format(
      "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
      "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
      "DCGM_FI_DEV_XID_ERRORS{} {} {}\n"
      "# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n"
      "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{} {} {}\n"
      "DCGM_FI_DEV_XID_ERRORS{{gpu=\"0\",Hostname=\"some-other-node\"}} 31 {}\n"
      "{}",
      gpu, xid, at_ms, gpu, dbe, at_ms, at_ms, extra);
}

json metricObservation(const std::string& text) {
  return {{"context",
           {{"time_interval", {{"start", kStartIso}, {"end", kEndIso}}},
            {"resources", "AllJobResources"},
            {"source", "syslog"},
            {"format", "prometheus_metrics"}}},
          {"body", text}};
}

}  // namespace

TEST_CASE("fact: prometheus_metrics observations are read through the metric rules, measured from the earlier ones",
          "[http][fact][metrics]") {
  FactServer s;
  const std::string id = s.post("/attributor", attributorInfo("job-9:cycle0:1"))["attributor_id"];
  const std::string obs = "/attributor/" + id + "/observation";
  const int64_t start_ms = kCycleStart / 1'000'000;

  // Before the job: Xid gauge 0, no double-bit errors. Baselines only.
  auto before = s.post(obs, metricObservation(scrape(start_ms - 60'000, 0, 0, "garbage {{{\n")));
  CHECK(before["symptoms"] == 0);
  CHECK(before["lines"] == 3);  // samples: A's two series and the other node's
  const std::string reason = before["coverage"][0]["reason"];
  CHECK(before["coverage"][0]["skipped"] == 1);
  CHECK(reason.find("1 malformed lines skipped (line 7:") != std::string::npos);
  CHECK(reason.find("series name no node of the job") != std::string::npos);
  CHECK(faultyNodes(s.get("/attributor/" + id + "/attribution")).empty());

  // Five minutes in: Xid 79 and two double-bit errors on A's GPU 0 -> symptoms on node A.
  auto during = s.post(obs, metricObservation(scrape(start_ms + 300'000, 79, 2)));
  CHECK(during["coverage"][0]["status"] == "ok");
  CHECK(during["symptoms"] == 2);
  auto a = s.get("/attributor/" + id + "/attribution");
  CHECK(faultyNodes(a) == std::vector<std::string>{kNodeA});
  CHECK(a["verdict"]["sub_domain"] == "hardware");
  REQUIRE(!a["attributions"].empty());
  for (const auto& n : a["attributions"])
    if (n["node"] == kNodeA) {
      REQUIRE(!n["attributions"].empty());
      CHECK(n["attributions"][0]["device"] == "0000:e4:00.0");
    }

  // The same state scraped again: nothing new is stored twice.
  auto again = s.post(obs, metricObservation(scrape(start_ms + 360'000, 79, 2)));
  CHECK(again["symptoms"] == 0);
  CHECK(s.get("/attributor/" + id + "/attribution")["verdict"]["cause"] == a["verdict"]["cause"]);
}

TEST_CASE("fact: a metric scrape with its own stamps before the job is its own baseline, in OpenMetrics seconds",
          "[http][fact][metrics]") {
  FactServer s;
  const std::string id = s.post("/attributor", attributorInfo("job-9:cycle0:2"))["attributor_id"];
  const int64_t t0 = kCycleStart / 1'000'000'000 - 30, t1 = kCycleStart / 1'000'000'000 + 120;
  const std::string node = "{device=\"mlx5_0\",port=\"1\",instance=\"" + kNodeB + ":9100\"}";
  const std::string om = fmt::format(
      "# TYPE node_infiniband_link_downed counter\n"
      "node_infiniband_link_downed_total{} 4 {}\n"
      "node_infiniband_link_downed_total{} 5 {}.25\n"
      "# EOF\n",
      node, t0, node, t1);
  auto r = s.post("/attributor/" + id + "/observation", metricObservation(om));
  CHECK(r["symptoms"] == 1);
  auto v = s.get("/attributor/" + id + "/attribution")["verdict"];
  INFO(v.dump());
  CHECK(v["sub_domain"] == "network");
  CHECK(v["cause"] == "metric.node.ib_link_downed");
  CHECK(faultyNodes(s.get("/attributor/" + id + "/attribution")) == std::vector<std::string>{kNodeB});
}

TEST_CASE("fact: hostile bodies are refused with a reason and change nothing", "[http][fact]") {
  FactServer s;
  const std::string id = s.post("/attributor", attributorInfo("job-9:cycle1:1"))["attributor_id"];
  const std::string obs = "/attributor/" + id + "/observation";
  auto refused = [&](const std::string& target, const json& body, const std::string& why) {
    auto r = s.post(target, body, 400);
    INFO(r.dump());
    CHECK(r["error"].get<std::string>().find(why) != std::string::npos);
  };
  CHECK(s.call("POST", "/attributor", "{broken", "s3cret").status == 400);
  json no_nodes = attributorInfo("x");
  no_nodes["workload"]["nodes"] = json::array();
  refused("/attributor", no_nodes, "workload.nodes");
  json bad_status = attributorInfo("x");
  bad_status["workload"]["status"] = "EXPLODED";
  refused("/attributor", bad_status, "workload: ");
  json bad_rpn = attributorInfo("x");
  bad_rpn["workload"]["ranks_per_node"] = "four";
  refused("/attributor", bad_rpn, "ranks_per_node");
  json bad_time = attributorInfo("x");
  bad_time["workload"]["job_end_time"] = "yesterday";
  refused("/attributor", bad_time, "workload: ");

  json ok = observation(dmesgToLokiStreams(kDmesgA, kCycleEnd - kSec));
  json bad = ok;
  bad["context"]["source"] = "journal";
  refused(obs, bad, "context.source");
  bad = ok;
  bad["context"]["format"] = "otlp";
  refused(obs, bad, "context.format");
  bad = ok;
  bad["body"] = "[{\"stream\": {}, \"values\": [[\"12x\", \"line\"]]}]";
  refused(obs, bad, "values[0][0]");
  bad["body"] = "[{\"stream\": {\"app\": \"dmesg\"}, \"values\": [[\"1\", \"NVRM: Xid 79\"]]}]";
  refused(obs, bad, "without a hostname");
  bad["body"] = "not json";
  refused(obs, bad, "not JSON");
  bad["body"] = json::array({{{"values", json::array({json::array({"1", std::string("a\0b", 3)})})},
                              {"stream", {{"hostname", kNodeA}}}}});
  refused(obs, bad, "NUL");
  bad = ok;
  bad["context"]["time_interval"] = {{"start", kEndIso}, {"end", kStartIso}};
  refused(obs, bad, "time_interval");
  CHECK(s.post("/attributor/fact-nobody/observation", ok, 404)["error"].get<std::string>().find(
            "unknown attributor") != std::string::npos);
  CHECK(s.call("GET", obs, "", "r34d").status == 405);
  CHECK(s.call("POST", "/attributor/" + id + "/attribution", "", "s3cret").status == 405);

  // Nothing of that reached the job: still its first verdict, no outputs.
  auto attribution = s.get("/attributor/" + id + "/attribution");
  CHECK(attribution["verdict"]["revision"] == 1);
  CHECK(s.store->jobOutputs(id).empty());
  // The good observation after them is obs-1.
  CHECK(s.post(obs, ok)["observation_id"] == "obs-1");
}

TEST_CASE("fact: POSTs without a token only from --fact-open-from networks (NVRx sends none)", "[http][fact]") {
  CHECK(factOpenFromError({"10.0.0.0/8", "127.0.0.1", "fd00::/8"}).empty());
  CHECK_FALSE(factOpenFromError({"10.0.0.0/33"}).empty());
  CHECK_FALSE(factOpenFromError({"gpu-a01"}).empty());
  CHECK(addressInNetworks("10.1.2.3", {"10.0.0.0/8"}));
  CHECK_FALSE(addressInNetworks("11.1.2.3", {"10.0.0.0/8"}));
  CHECK(addressInNetworks("::ffff:10.1.2.3", {"10.0.0.0/8"}));  // a v4 peer on a dual-stack socket
  CHECK(addressInNetworks("fd00::5", {"fd00::/8"}));
  CHECK_FALSE(addressInNetworks("", {"0.0.0.0/0"}));  // in-process: no peer, never open

  auto tokenless = [](const std::vector<std::string>& open) {
    ApiOptions o = FactServer::options();
    o.fact_open_from = open;
    ApiServer s(kCycleEnd + 5 * kSec, o);
    return s.call("POST", "/attributor", attributorInfo("job-3:cycle0:1").dump()).status;
  };
  CHECK(tokenless({}) == 401);
  CHECK(tokenless({"10.0.0.0/8"}) == 401);
  CHECK(tokenless({"127.0.0.0/8"}) == 200);
  // A request that sends a token is checked as always, open network or not.
  ApiOptions o = FactServer::options();
  o.fact_open_from = {"127.0.0.0/8"};
  ApiServer s(kCycleEnd + 5 * kSec, o);
  CHECK(s.call("POST", "/attributor", attributorInfo("job-3:cycle0:2").dump(), "wrong").status == 401);
}

// aggregator_load: drives the real faultline-aggregator binary with thousands of simulated agents
// through a fleet-wide cascade and reports ingest rate, send->ack latency and the time from a
// large job's end to its stored verdict (bench/README.md, "the aggregator under a fleet-wide
// cascade"; run it with bench/aggregator_load.sh, which makes the keys and starts the aggregator).
//
//   aggregator_load keygen DIR --agents N        DIR/keys/HOST.{key,pub}, DIR/allow/HOST.pub
//   aggregator_load run --endpoint E --server-key F --keys DIR --http-port P --token-file T ...
//
// Each simulated agent is what faultline-agent is on the wire (common/uplink/shipper.cpp): a
// DEALER with routing id = agent id = hostname, its own CurveZMQ key pair, ZMQ_IMMEDIATE, up to
// --in-flight unacknowledged batches, resends after --ack-timeout-ms, a heartbeat every
// --heartbeat-ms. The symptoms are the cascade sample's (--sample), produced by the real rule engine
// over its node logs and rank output (cascade_sample.h) and moved to this run's hosts and time.
//
// One thread, one zmq context, every socket's ZMQ_FD in one epoll set (sim_fleet.h). Talks to
// the aggregator only over 127.0.0.1 (ZeroMQ ingest, HTTP API; aggregator_probe.h); links
// faultline_common, never the aggregator.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "bench/aggregator_probe.h"
#include "bench/cascade_sample.h"
#include "bench/sim_fleet.h"
#include "common/protocol.h"
#include "common/rule_set.h"
#include "common/wire.h"

namespace {

using namespace faultline;
using namespace faultline::bench;
using nlohmann::json;
namespace fs = std::filesystem;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;

std::string readLine(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

std::string hostName(const std::string& prefix, size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%04zu", i);
  return prefix + buf;
}

// ---- Batches --------------------------------------------------------------------------------

// Batch b of an agent carries symptoms b*K .. b*K+K-1 of its node's cascade list, taken
// cyclically: the first pass is the node's own symptoms, later passes re-report them (moved
// `pass` seconds later, as the next aggregation window of an ongoing cascade would).
void buildBatches(SimAgent& a, const std::vector<common::Symptom>& tmpl, const std::string& sample_host, int64_t shift_ns,
                  size_t batches, size_t per_batch, const std::string& ruleset_version) {
  std::vector<common::CoverageEntry> sources = {{a.host, "kmsg", "kmsg", 1000, 0, "ok", ""},
                                                {a.host, "/var/log/slurm/job.out", "application", 5000, 0, "ok", ""}};
  for (size_t b = 0; b < batches; ++b) {
    common::SymptomBatchData d;
    d.header.agent_id = a.host;
    d.header.hostname = a.host;
    d.header.boot_id = a.boot_id;
    d.header.sequence = b + 1;
    d.header.agent_version = "bench";
    d.header.ruleset_version = ruleset_version;
    d.header.created_ns = wallNs();
    for (size_t k = 0; k < per_batch; ++k) {
      size_t idx = b * per_batch + k;
      int64_t pass = static_cast<int64_t>(idx / tmpl.size());
      d.symptoms.push_back(moveSymptom(tmpl[idx % tmpl.size()], sample_host, a.host, shift_ns + pass * kSec));
      d.symptoms.back().boot_id = a.boot_id;
    }
    d.sources = sources;
    a.batches.push_back(common::encodeBatch(d));
    a.batch_symptoms.push_back(static_cast<uint32_t>(per_batch));
  }
}

std::optional<std::pair<std::string, std::string>> readKeyPair(const std::string& dir, const std::string& host) {
  std::string sec = readLine(dir + "/" + host + ".key"), pub = readLine(dir + "/" + host + ".pub");
  if (sec.size() != 40 || pub.size() != 40) return std::nullopt;
  return std::make_pair(pub, sec);
}

// ---- Report ---------------------------------------------------------------------------------

double percentileMs(std::vector<int64_t> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t idx = static_cast<size_t>(std::ceil(q * double(v.size()))) - (q > 0 ? 1 : 0);
  return double(v[std::min(idx, v.size() - 1)]) / 1e6;
}

void printPhase(const char* label, const PhaseStats& st) {
  double s = st.seconds();
  std::printf("%-9s %5zu sender%s %8llu symptoms in %6llu batches, %6.2f s: %8.0f symptoms/s %7.0f batches/s | "
              "ack p50 %7.1f ms  p99 %7.1f ms  max %7.1f ms | resends %llu, duplicate acks %llu, heartbeats %llu%s\n",
              label, st.agents, st.agents == 1 ? " " : "s", static_cast<unsigned long long>(st.symptoms),
              static_cast<unsigned long long>(st.batches), s, s > 0 ? double(st.symptoms) / s : 0,
              s > 0 ? double(st.batches) / s : 0, percentileMs(st.latency_ns, 0.5), percentileMs(st.latency_ns, 0.99),
              percentileMs(st.latency_ns, 1.0), static_cast<unsigned long long>(st.resends),
              static_cast<unsigned long long>(st.duplicate_acks), static_cast<unsigned long long>(st.heartbeats),
              st.complete() ? "" : "  INCOMPLETE (deadline)");
}

struct RunOptions {
  std::vector<std::string> endpoints;  // agent i sends to endpoints[i % n] (replicas)
  std::string server_key_file, keys_dir, token_file, sample_dir, rules_dir, prefix = "gpu-n";
  std::string peer_host = "gpu-peer", job_id = "900001";
  uint16_t http_port = 0;
  int aggregator_pid = 0;
  size_t agents = 2048, job_nodes = 1024, root_index = 0, batches = 4, per_batch = 8, peer_batches = 0;
  size_t after_batches = 4;
  size_t in_flight = 16, io_threads = 1;
  double ack_timeout_ms = 10000, ack_timeout_max_ms = 60000, heartbeat_ms = 30000, spread_ms = 0, timeout_s = 170;
  bool fixed_timeout = false;
};

int cmdRun(const RunOptions& o) {
  std::shared_ptr<const common::RuleSet> rules;
  std::string error;
  auto sample = loadCascadeSampleWithRules(o.sample_dir, o.rules_dir, &rules, &error);
  if (!sample) {
    std::fprintf(stderr, "aggregator_load: %s\n", error.c_str());
    return 2;
  }
  if (sample->expected_node.empty() || !sample->by_node.count(sample->expected_node)) {
    std::fprintf(stderr, "aggregator_load: %s: expected.json names no node with symptoms\n", o.sample_dir.c_str());
    return 2;
  }
  const size_t job_nodes = std::min(o.job_nodes, o.agents);
  const size_t root_index = o.root_index ? o.root_index : job_nodes / 2 + 1;  // 1-based
  if (root_index > job_nodes) {
    std::fprintf(stderr, "aggregator_load: --root-index beyond --job-nodes\n");
    return 2;
  }
  const std::string root_host = hostName(o.prefix, root_index);
  std::vector<std::string> others;  // the cascade's other nodes, in host order
  size_t sample_symptoms = 0;
  for (const auto& [h, list] : sample->by_node) {
    sample_symptoms += list.size();
    if (h != sample->expected_node) others.push_back(h);
  }
  const std::string server_key = readLine(o.server_key_file);
  const std::string token = readLine(o.token_file);
  if (server_key.size() != 40 || token.empty()) {
    std::fprintf(stderr, "aggregator_load: bad --server-key or --token-file\n");
    return 2;
  }

  // The sample's job ends "now": every symptom keeps its offset from the job's end.
  const int64_t shift_ns = wallNs() - sample->job.end_ns;
  const int64_t job_start_ns = sample->job.start_ns + shift_ns;

  zmq::context_t ctx(static_cast<int>(o.io_threads), static_cast<int>(o.agents + 64));
  SimFleetOptions dopt;
  dopt.endpoint = o.endpoints.front();
  dopt.server_key = server_key;
  dopt.ruleset_version = rules->version;
  dopt.in_flight = o.in_flight;
  dopt.ack_timeout_ns = static_cast<int64_t>(o.ack_timeout_ms * kMs);
  dopt.ack_timeout_max_ns = static_cast<int64_t>(std::max(o.ack_timeout_max_ms, o.ack_timeout_ms) * kMs);
  dopt.fixed_timeout = o.fixed_timeout;
  dopt.heartbeat_ns = static_cast<int64_t>(o.heartbeat_ms * kMs);
  SimFleet sim(ctx, dopt);

  size_t made = 0;
  auto makeAgent = [&](const std::string& host, const std::string& sample_host, size_t batches) -> std::optional<size_t> {
    auto keys = readKeyPair(o.keys_dir, host);
    if (!keys) {
      std::fprintf(stderr, "aggregator_load: no key pair for %s in %s\n", host.c_str(), o.keys_dir.c_str());
      return std::nullopt;
    }
    SimAgent a;
    a.host = host;
    a.boot_id = "b00710ad-" + host;
    a.public_key = keys->first;
    a.secret_key = keys->second;
    a.endpoint = o.endpoints[made++ % o.endpoints.size()];
    a.inventory = sample->inventory[sample_host];
    a.inventory.collected_ns = wallNs();
    buildBatches(a, sample->by_node[sample_host], sample_host, shift_ns, batches, o.per_batch, rules->version);
    return sim.add(std::move(a));
  };
  const int64_t t_build = steadyNs();
  std::vector<size_t> fleet, outside;  // outside: the agents not in the judged job
  for (size_t i = 1; i <= o.agents; ++i) {
    std::string host = hostName(o.prefix, i);
    const std::string& from = host == root_host ? sample->expected_node : others[(i - 1) % others.size()];
    auto idx = makeAgent(host, from, o.batches + (i > job_nodes ? o.after_batches : 0));
    if (!idx) return 2;
    fleet.push_back(*idx);
    if (i > job_nodes) outside.push_back(*idx);
  }
  const size_t peer_batches = o.peer_batches ? o.peer_batches : std::min<size_t>(o.agents * o.batches, 1000);
  auto peer = makeAgent(o.peer_host, others.front(), peer_batches);
  if (!peer) return 2;
  size_t encoded = peer_batches + fleet.size() * o.batches + outside.size() * o.after_batches;
  const double build_s = double(steadyNs() - t_build) / 1e9;

  std::printf("aggregator load: %zu agents, %zu of them in job %s (%s%s-%s), root %s <- %s of %s; %zu batches x %zu "
              "symptoms per agent, in-flight %zu, ack timeout %.0f ms (%s), spread %.0f ms; cpus %ld\n",
              o.agents, job_nodes, o.job_id.c_str(), o.prefix.c_str(), hostName("", 1).c_str(),
              hostName("", job_nodes).c_str(), root_host.c_str(), sample->expected_node.c_str(),
              fs::path(o.sample_dir).filename().c_str(), o.batches, o.per_batch, o.in_flight, o.ack_timeout_ms,
              o.fixed_timeout ? "fixed, every late batch again" : "adaptive, one probe",
              o.spread_ms, ::sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("sample    %zu nodes, %zu symptoms (rule engine over node logs and rank output), ruleset %s; "
              "%zu batches encoded in %.2f s\n",
              sample->by_node.size(), sample_symptoms, rules->version.c_str(), encoded, build_s);
  std::fflush(stdout);

  auto healthAgents = [&]() -> int64_t {
    auto r = http(o.http_port, "GET", "/healthz");
    if (!r || r->status != 200) return -1;
    auto j = json::parse(r->body, nullptr, false);
    return j.is_object() ? j.value("agents", int64_t(-1)) : -1;
  };
  auto waitAgents = [&](int64_t want, int64_t deadline) {
    while (steadyNs() < deadline) {
      if (healthAgents() >= want) return true;
      ::usleep(20000);
    }
    return false;
  };
  auto getMetrics = [&] {
    auto r = http(o.http_port, "GET", "/metrics");
    return r ? r->body : std::string();
  };
  const int64_t deadline = steadyNs() + static_cast<int64_t>(o.timeout_s * kSec);
  bool ok = true;

  // 1. Peer: one sender, the same kind of batches, on the idle aggregator.
  sim.connect(*peer);
  if (!sim.sendFirstHeartbeats({*peer}, deadline) || !waitAgents(1, deadline)) {
    std::fprintf(stderr, "aggregator_load: the peer agent did not get through (keys? allow-list?)\n");
    return 1;
  }
  PhaseStats peer_st = sim.run({*peer}, peer_batches, 0, deadline);
  printPhase("peer", peer_st);
  std::fflush(stdout);

  // 2. Connect the fleet: every Curve handshake, ZAP check and first heartbeat stored.
  const int64_t overflows0 = listenOverflows();
  auto conn_cpu0 = threadTimes(o.aggregator_pid);
  const double conn_self0 = selfCpu();
  const int64_t t_conn = steadyNs();
  for (size_t i : fleet) sim.connect(i);
  bool sent = sim.sendFirstHeartbeats(fleet, deadline);
  bool stored = sent && waitAgents(static_cast<int64_t>(o.agents) + 1, deadline);
  const double connect_s = double(steadyNs() - t_conn) / 1e9;
  std::vector<int64_t> handshake_ns;
  for (size_t i : fleet)
    if (sim.agent(i).connected_ns) handshake_ns.push_back(sim.agent(i).connected_ns - t_conn);
  std::printf("connect   %5zu agents: handshake (TCP, Curve, ZAP) done p50 %.2f s, p99 %.2f s, max %.2f s; all first "
              "heartbeats stored after %.2f s; TCP listen-queue overflows %lld%s\n",
              o.agents, percentileMs(handshake_ns, 0.5) / 1e3, percentileMs(handshake_ns, 0.99) / 1e3,
              percentileMs(handshake_ns, 1.0) / 1e3, connect_s,
              static_cast<long long>(listenOverflows() - overflows0), stored ? "" : "  INCOMPLETE (deadline)");
  if (o.aggregator_pid > 0) {
    auto d = cpuDelta(conn_cpu0, threadTimes(o.aggregator_pid), o.aggregator_pid);
    std::printf("          cpu over %.2f s: aggregator %.2f s (%s), load generator %.2f s\n", connect_s, d.total,
                d.top.c_str(), selfCpu() - conn_self0);
  }
  std::fflush(stdout);
  if (!stored) return 1;

  // 3. The job starts (prolog), long before the cascade (the sample's start, moved).
  std::string nodelist = o.prefix + "[" + hostName("", 1) + "-" + hostName("", job_nodes) + "]";
  auto started = http(o.http_port, "POST", "/jobs/" + o.job_id + "/start", token,
                      json{{"nodes", nodelist}, {"time", common::formatTimeNs(job_start_ns)}}.dump());
  if (!started || started->status != 200) {
    std::fprintf(stderr, "aggregator_load: POST start: %s\n", started ? started->body.c_str() : "no answer");
    return 1;
  }

  // 4. The cascade: every agent at once.
  auto cpu0 = threadTimes(o.aggregator_pid);
  double self0 = selfCpu();
  auto probe = std::make_unique<Prober>(o.http_port, "/jobs/" + o.job_id, 50);
  PhaseStats st = sim.run(fleet, o.batches, static_cast<int64_t>(o.spread_ms * kMs), deadline);
  auto probe_cascade = probe->finish();
  auto cpu1 = threadTimes(o.aggregator_pid);
  double self1 = selfCpu();
  printPhase("cascade", st);
  ok = ok && st.complete() && peer_st.complete();
  if (o.aggregator_pid > 0) {
    auto d = cpuDelta(cpu0, cpu1, o.aggregator_pid);
    std::printf("          cpu over %.2f s: aggregator %.2f s (%s), load generator %.2f s; %s; GET /jobs/%s p50 %.0f "
                "ms, max %.0f ms\n",
                st.seconds(), d.total, d.top.c_str(), self1 - self0, ingestShare(d, st.seconds(), st.batches + st.resends).c_str(),
                o.job_id.c_str(), percentileMs(probe_cascade, 0.5), percentileMs(probe_cascade, 1.0));
    // CPU time (user + system, every thread), not wall: the 2-core VM's other load does not count.
    if (st.symptoms > 0)
      std::printf("cpu       cascade aggregator %.1f us/symptom, load generator %.1f us/symptom (%llu symptoms)\n",
                  d.total * 1e6 / double(st.symptoms), (self1 - self0) * 1e6 / double(st.symptoms),
                  static_cast<unsigned long long>(st.symptoms));
  }
  std::fflush(stdout);

  // 5. The job ends (epilog) right after the cascade: FAILED; then wait for the stored verdict.
  const auto verdict_cpu0 = threadTimes(o.aggregator_pid);
  const int64_t t_end = steadyNs();
  auto ended = http(o.http_port, "POST", "/jobs/" + o.job_id + "/end", token,
                    json{{"state", "FAILED"}, {"exit_code", "1:0"}, {"time", common::formatTimeNs(wallNs())}}.dump());
  const double end_post_s = double(steadyNs() - t_end) / 1e9;
  json verdict;
  double verdict_s = -1;
  while (steadyNs() < deadline) {
    auto r = http(o.http_port, "GET", "/jobs/" + o.job_id);
    if (r && r->status == 200) {
      auto j = json::parse(r->body, nullptr, false);
      if (j.is_object() && j.contains("verdict") && j["verdict"].is_object()) {
        verdict_s = double(steadyNs() - t_end) / 1e9;
        verdict = j["verdict"];
        break;
      }
    }
    ::usleep(2000);
  }
  const auto verdict_cpu1 = threadTimes(o.aggregator_pid);
  const double verdict_wall = double(steadyNs() - t_end) / 1e9;
  std::string m1 = getMetrics();
  if (verdict_s < 0) {
    std::printf("verdict   none within the deadline (end POST answered %s in %.3f s)\n",
                ended ? std::to_string(ended->status).c_str() : "nothing", end_post_s);
    ok = false;
  } else {
    std::string responsible;
    for (const auto& n : verdict.value("responsible_nodes", json::array()))
      responsible += (responsible.empty() ? "" : ",") + n.get<std::string>();
    std::string sub = verdict.value("sub_domain", std::string());
    std::string cause = verdict["cause"].is_string() ? verdict["cause"].get<std::string>() : "-";
    bool right = responsible == root_host && (sample->expected_sub_domain.empty() || sub == sample->expected_sub_domain) &&
                 (sample->expected_rule.empty() || cause == sample->expected_rule);
    ok = ok && right;
    std::printf("verdict   %zu-node job: end POST -> stored verdict readable (GET /jobs/%s) %.3f s; the end POST itself "
                "%.3f s; revision %d %s over %lld symptoms: sub_domain %s, responsible %s, cause %s (expected %s %s %s): "
                "%s\n",
                job_nodes, o.job_id.c_str(), verdict_s, end_post_s, verdict.value("revision", 0),
                verdict.value("status", "").c_str(), static_cast<long long>(verdict.value("symptoms", int64_t(0))),
                sub.c_str(), responsible.c_str(), cause.c_str(), root_host.c_str(),
                sample->expected_sub_domain.c_str(), sample->expected_rule.c_str(), right ? "RIGHT" : "WRONG");
    std::printf("          aggregator's own histograms: faultline_verdict_compute_seconds %.3f s, "
                "faultline_verdict_latency_seconds %.3f s\n",
                metric(m1, "faultline_verdict_compute_seconds_sum"), metric(m1, "faultline_verdict_latency_seconds_sum"));
    if (o.aggregator_pid > 0) {
      // The main thread judges inside the end POST: its CPU against the wall time says how much of
      // the wait was the work and how much the machine (runnable, waiting for a core).
      auto d = cpuDelta(verdict_cpu0, verdict_cpu1, o.aggregator_pid);
      double main_queue = 0;
      if (auto a = verdict_cpu0.find(o.aggregator_pid), b = verdict_cpu1.find(o.aggregator_pid);
          a != verdict_cpu0.end() && b != verdict_cpu1.end())
        main_queue = double(b->second.runqueue_ns - a->second.runqueue_ns) / 1e9;
      std::printf("          cpu over %.2f s: aggregator %.2f s (%s); main thread (HTTP, verdicts) on a cpu %.2f s, "
                  "runnable but waiting for one %.2f s\n",
                  verdict_wall, d.total, d.top.c_str(), d.main, main_queue);
    }
  }
  std::fflush(stdout);

  // 6. Aftershock: the agents outside the job keep shipping while the big job's verdict is still
  // provisional (it stays so until every node reports past the end, or --final-timeout).
  PhaseStats after_st;
  if (!outside.empty() && o.after_batches > 0) {
    auto c0 = threadTimes(o.aggregator_pid);
    auto probe_after = std::make_unique<Prober>(o.http_port, "/jobs/" + o.job_id, 50);
    after_st = sim.run(outside, o.after_batches, 0, deadline);
    auto lat = probe_after->finish();
    auto c1 = threadTimes(o.aggregator_pid);
    std::string m2 = getMetrics();
    printPhase("after", after_st);
    ok = ok && after_st.complete();
    if (o.aggregator_pid > 0) {
      auto d = cpuDelta(c0, c1, o.aggregator_pid);
      double ticks = metric(m2, "faultline_verdict_tick_seconds_count") - metric(m1, "faultline_verdict_tick_seconds_count");
      double tick_s = metric(m2, "faultline_verdict_tick_seconds_sum") - metric(m1, "faultline_verdict_tick_seconds_sum");
      std::printf("          cpu over %.2f s: aggregator %.2f s (%s), main thread busy %.0f %%; %s; verdict ticks "
                  "that wrote a revision %.0f (%.2f s); GET /jobs/%s p50 %.0f ms, max %.0f ms\n",
                  after_st.seconds(), d.total, d.top.c_str(),
                  after_st.seconds() > 0 ? 100 * d.main / after_st.seconds() : 0, ingestShare(d, after_st.seconds(), after_st.batches + after_st.resends).c_str(),
                  ticks, tick_s, o.job_id.c_str(), percentileMs(lat, 0.5), percentileMs(lat, 1.0));
    }
  }

  std::string mtext = getMetrics();
  std::printf("store     faultline_ingest_seconds mean %.3f ms over %.0f batches; stored symptoms %.0f, duplicate "
              "batches %.0f, rejects %.0f\n",
              metric(mtext, "faultline_ingest_seconds_count") > 0
                  ? 1e3 * metric(mtext, "faultline_ingest_seconds_sum") / metric(mtext, "faultline_ingest_seconds_count")
                  : 0,
              metric(mtext, "faultline_ingest_seconds_count"), metric(mtext, "faultline_symptoms_total"),
              metric(mtext, "faultline_batches_total{result=\"duplicate\"}"), metric(mtext, "faultline_rejects_total"));
  auto rate = [](const PhaseStats& p) { return p.seconds() > 0 ? double(p.symptoms) / p.seconds() : 0; };
  auto ratio = [](double a, double b) { return b > 0 ? a / b : 0; };
  std::printf("ratio     vs the 1-sender peer of this run: cascade (%zu senders) symptoms/s x%.2f, ack p50 x%.0f",
              st.agents, ratio(rate(st), rate(peer_st)),
              ratio(percentileMs(st.latency_ns, 0.5), percentileMs(peer_st.latency_ns, 0.5)));
  if (after_st.agents)
    std::printf("; after the verdict (%zu senders) symptoms/s x%.2f", after_st.agents, ratio(rate(after_st), rate(peer_st)));
  std::printf("\n");
  return ok ? 0 : 1;
}

// Writes DIR/keys/HOST.key + HOST.pub (the agent's side, like `faultline-agent keygen`) and
// DIR/allow/HOST.pub (the aggregator's allow-list) for PREFIX0001..PREFIXnnnn and the peer.
int cmdKeygen(const std::string& dir, size_t agents, const std::string& prefix, const std::string& peer) {
  std::error_code ec;
  fs::create_directories(dir + "/keys", ec);
  fs::create_directories(dir + "/allow", ec);
  if (ec) {
    std::fprintf(stderr, "aggregator_load keygen: %s: %s\n", dir.c_str(), ec.message().c_str());
    return 1;
  }
  std::vector<std::string> hosts;
  for (size_t i = 1; i <= agents; ++i) hosts.push_back(hostName(prefix, i));
  hosts.push_back(peer);
  for (const auto& h : hosts) {
    char pub[41] = {}, sec[41] = {};
    if (zmq_curve_keypair(pub, sec) != 0) {
      std::fprintf(stderr, "aggregator_load keygen: %s\n", zmq_strerror(zmq_errno()));
      return 1;
    }
    std::ofstream(dir + "/keys/" + h + ".key") << sec << "\n";
    std::ofstream(dir + "/keys/" + h + ".pub") << pub << "\n";
    std::ofstream(dir + "/allow/" + h + ".pub") << pub << "\n";
  }
  std::printf("%zu key pairs in %s/keys, allow-list %s/allow\n", hosts.size(), dir.c_str(), dir.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"aggregator_load: simulated agents against a running faultline-aggregator"};
  app.require_subcommand(1);
  RunOptions o;
  std::string keygen_dir;
  auto* keygen = app.add_subcommand("keygen", "write agent key pairs and the allow-list directory");
  keygen->add_option("dir", keygen_dir)->required();
  for (auto* c : {keygen}) {
    c->add_option("--agents", o.agents, "number of agents (hosts PREFIX0001..)");
    c->add_option("--prefix", o.prefix, "hostname prefix");
    c->add_option("--peer-host", o.peer_host, "hostname of the single-sender peer");
  }
  auto* run = app.add_subcommand("run", "the load run (see bench/README.md)");
  run->add_option("--agents", o.agents, "concurrent senders (hosts PREFIX0001..)");
  run->add_option("--prefix", o.prefix, "hostname prefix");
  run->add_option("--peer-host", o.peer_host, "hostname of the single-sender peer");
  run->add_option("--endpoint", o.endpoints,
                  "aggregator ingest endpoint (tcp://127.0.0.1:PORT); several: replicas, agents spread over them")
      ->required();
  run->add_option("--server-key", o.server_key_file, "the aggregator's public key file (server.pub)")->required();
  run->add_option("--keys", o.keys_dir, "directory of HOST.key/HOST.pub (keygen DIR/keys)")->required();
  run->add_option("--http-port", o.http_port, "aggregator HTTP port")->required();
  run->add_option("--token-file", o.token_file, "bearer token for job start/end")->required();
  run->add_option("--sample", o.sample_dir, "cascade sample bundle (samples/cascade64-xid79)")->required();
  run->add_option("--rules", o.rules_dir, "rule directory")->required();
  run->add_option("--aggregator-pid", o.aggregator_pid, "for per-thread CPU time from /proc");
  run->add_option("--job-id", o.job_id, "id of the judged job");
  run->add_option("--job-nodes", o.job_nodes, "nodes of the judged job (the first agents)");
  run->add_option("--root-index", o.root_index, "1-based agent that carries the root symptom (default middle)");
  run->add_option("--batches", o.batches, "batches per agent");
  run->add_option("--symptoms-per-batch", o.per_batch, "symptoms per batch");
  run->add_option("--peer-batches", o.peer_batches, "batches of the single-sender peer (default min(total, 1000))");
  run->add_option("--after-batches", o.after_batches, "batches per agent outside the job after the verdict (0: no phase)");
  run->add_option("--in-flight", o.in_flight, "unacked batches per agent (the agent's max_in_flight)");
  run->add_option("--ack-timeout-ms", o.ack_timeout_ms, "resend after, until acks are measured (the agent's ack_timeout_ms)");
  run->add_option("--ack-timeout-max-ms", o.ack_timeout_max_ms, "ceiling of the adaptive timeout (the agent's ack_timeout_max_ms)");
  run->add_flag("--fixed-ack-timeout", o.fixed_timeout, "resend every batch unacked after --ack-timeout-ms (agents before the adaptive timer)");
  run->add_option("--heartbeat-ms", o.heartbeat_ms, "heartbeat interval during the cascade");
  run->add_option("--spread-ms", o.spread_ms, "agents start over this span (0: all at once)");
  run->add_option("--io-threads", o.io_threads, "zmq io threads of the generator");
  run->add_option("--timeout", o.timeout_s, "give up after this many seconds");
  CLI11_PARSE(app, argc, argv);
  if (*keygen) return cmdKeygen(keygen_dir, o.agents, o.prefix, o.peer_host);
  if (o.agents == 0 || o.batches == 0 || o.per_batch == 0 || o.in_flight == 0) {
    std::fprintf(stderr, "aggregator_load: --agents, --batches, --symptoms-per-batch, --in-flight must be > 0\n");
    return 2;
  }
  return cmdRun(o);
}

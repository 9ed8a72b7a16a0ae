// faultline-aggregator: wiring only. Opens the store, loads the rules, builds the verdict engine
// and the HTTP API on one io_context, and drives the periodic work (verdict ticks, retention
// pruning, the sacct poll) from timers; the agents' ZeroMQ ingest runs on its own thread. Every piece of logic lives in faultline_aggregator.
#include <utility>  // before Asio: Boost 1.74 + GCC 12 need std::exchange declared

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "aggregator/clock.h"
#include "aggregator/evidence/metric_worker.h"
#include "aggregator/http/api.h"
#include "aggregator/ingest/ingestor.h"
#include "aggregator/ingest/zmq_endpoint.h"
#include "aggregator/http/server.h"
#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/store/db.h"
#include "aggregator/store/leader.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/relay/relay.h"
#include "aggregator/store/store.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "common/rule_set.h"

namespace {

using namespace faultline;
using namespace faultline::aggregator;
namespace net = boost::asio;

std::string defaultDb() {
  const char* state = std::getenv("STATE_DIRECTORY");  // set by systemd's StateDirectory=
  return std::string(state ? state : "/var/lib/faultline") + "/aggregator.db";
}

std::vector<std::string> defaultRuleDirs() {
  for (const char* d : {"/usr/share/faultline/rules", FAULTLINE_DEFAULT_RULES})
    if (std::filesystem::is_directory(d)) return {d};
  return {FAULTLINE_DEFAULT_RULES};
}

// A repeating timer on the io_context; `fn` runs on the io thread.
void every(net::steady_timer& timer, std::chrono::milliseconds period, std::function<void()> fn) {
  timer.expires_after(period);
  timer.async_wait([&timer, period, fn = std::move(fn)](const boost::system::error_code& ec) {
    if (ec) return;
    fn();
    every(timer, period, fn);
  });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"faultline-aggregator: stores agents' symptoms and job events, judges failed jobs, serves queries"};
  std::string db = defaultDb(), listen = "127.0.0.1", token_file, port_file, sacct_command;
  uint16_t port = 8470;
  std::vector<std::string> rule_dirs;
  double leader_poll = 1, settle = 120, margin = 30, agent_timeout = 90, final_timeout = 3600, sacct_interval = 0, tick = 0.25;
  double retention_days = 30, job_retention_days = 180;
  bool sync_full = false;
  std::string ingest_endpoint = "tcp://127.0.0.1:7400", curve_secret_file, allow_dir, ingest_endpoint_file;
  size_t max_message_bytes = 16 << 20;
  bool ingest_legacy = false;
  int ingest_pass = 1024;
  // Site relay (edge sites): forward verdicts, node history and summaries to a central aggregator.
  std::string relay_upstream, relay_site, relay_server_key_file;
  bool relay_symptoms = false, relay_zstd = false, relay_full_revisions = false;
  uint64_t relay_rate = 0, relay_max_bytes = 256ull << 20;
  double relay_interval = 2, relay_ack_timeout = 10;
  app.add_option("--db,--store", db,
                 "store: a SQLite file (default $STATE_DIRECTORY/aggregator.db) or a postgresql:// URL shared by "
                 "several replicas (docs/operations.md)");
  app.add_option("--leader-poll", leader_poll, "seconds between leader-lock checks (PostgreSQL replicas)");
  app.add_option("--listen", listen, "HTTP listen address (default 127.0.0.1)");
  app.add_option("--port", port, "HTTP port (0 = ephemeral)");
  app.add_option("--port-file", port_file, "write the bound HTTP port here once listening");
  app.add_option("--token-file", token_file, "bearer token for POST /jobs/{id}/start|end (none: writes disabled)");
  std::string read_token_file;
  app.add_option("--read-token-file", read_token_file,
                 "token every read needs (API and /ui/ dashboard; not /healthz): for --listen beyond loopback");
  HttpServerOptions http_options;
  bool insecure_http = false;
  double header_timeout = 30;
  app.add_option("--tls-cert", http_options.tls_cert_file, "PEM certificate chain: serve the API over HTTPS (with --tls-key)");
  app.add_option("--tls-key", http_options.tls_key_file, "PEM private key of --tls-cert");
  app.add_flag("--insecure-http", insecure_http,
               "allow --listen beyond loopback without TLS and without --read-token-file (e.g. behind a TLS proxy)");
  app.add_option("--http-max-body-bytes", http_options.limits.body_bytes, "largest request body (else 413)");
  app.add_option("--http-max-header-bytes", http_options.limits.header_bytes, "largest request header (else 431)");
  app.add_option("--http-max-headers", http_options.limits.header_count, "most header fields in a request (else 431)");
  app.add_option("--http-header-timeout", header_timeout, "seconds a client has to send a request's header (slowloris)");
  app.add_option("--http-max-connections", http_options.limits.max_connections, "most open connections (else 503)");
  app.add_option("--rules", rule_dirs, "rule directory (repeatable; default: the shipped rules)");
  app.add_option("--settle", settle, "seconds after a job's end before the verdict is revised");
  PrometheusOptions prometheus;
  std::string prometheus_token_file, prometheus_password_file;
  app.add_option("--prometheus", prometheus.url,
                 "PromQL endpoint (Prometheus, Mimir, VictoriaMetrics: http(s)://host:port) asked for a failed job's "
                 "metric evidence (rules/metrics) at its first verdict and at settle");
  app.add_option("--prometheus-token-file", prometheus_token_file, "bearer token for --prometheus");
  app.add_option("--prometheus-user", prometheus.basic_user, "basic-auth user for --prometheus");
  app.add_option("--prometheus-password-file", prometheus_password_file, "basic-auth password for --prometheus");
  app.add_option("--prometheus-ca", prometheus.ca_file, "CA file for an https --prometheus");
  std::vector<std::string> fact_open_from;
  app.add_option("--fact-open-from", fact_open_from,
                 "network (ADDRESS[/PREFIX], repeatable) whose FACT observation POSTs need no write token: NVRx's "
                 "FACT client sends none (docs/api.md)");
  app.add_option("--margin", margin,
                 "seconds around a job's window whose symptoms still belong to it (clock skew and teardown)")
      ->capture_default_str();
  app.add_option("--agent-timeout", agent_timeout, "seconds without a heartbeat before an agent counts as gone");
  app.add_option("--final-timeout", final_timeout, "seconds after a job's end to stop waiting for silent nodes");
  app.add_option("--sacct-command", sacct_command, "command printing `sacct --json` output (polled)");
  app.add_option("--sacct-interval", sacct_interval, "seconds between sacct polls (0 = no poll)");
  app.add_option("--tick", tick, "seconds between verdict checks");
  app.add_option("--retention-days", retention_days, "keep symptoms, batches and node events this long");
  app.add_option("--job-retention-days", job_retention_days, "keep jobs and their verdicts this long");
  app.add_flag("--sync-full", sync_full, "fsync every commit (survives power loss, not only crashes)");
  size_t symptom_cache_mb = defaultSymptomCacheBytes(availableMemoryBytes()) >> 20;
  app.add_option("--symptom-cache-mb", symptom_cache_mb,
                 "decoded symptoms kept for verdicts, in MiB (~1.3 KB each; 0 = decode every payload); default a "
                 "sixteenth of the memory (machine or cgroup), 64-1024")
      ->capture_default_str();
  app.add_option("--ingest-endpoint", ingest_endpoint, "agents' ZeroMQ endpoint to bind (default tcp://127.0.0.1:7400)");
  app.add_option("--ingest-endpoint-file", ingest_endpoint_file, "write the bound ingest endpoint here once bound");
  app.add_option("--curve-secret-key", curve_secret_file,
                 "file with the aggregator's Z85 CurveZMQ secret key (`faultline keygen`); enables ingest");
  app.add_option("--allow-dir", allow_dir, "agents' public keys, one HOST.pub per node (re-read on SIGHUP)");
  app.add_option("--max-message-bytes", max_message_bytes, "largest batch or heartbeat payload accepted");
  app.add_flag("--ingest-legacy", ingest_legacy,
               "the previous ingest pass (decode and store one message at a time, savepoint per batch); for comparisons");
  app.add_option("--ingest-pass", ingest_pass, "most messages decoded and written in one ingest group");
  app.add_option("--relay-upstream", relay_upstream,
                 "central aggregator's ingest endpoint: run as a site relay (needs --relay-site, "
                 "--relay-server-key and --curve-secret-key, whose public key the central lists "
                 "under its allow-dir relays/SITE.pub)");
  app.add_option("--relay-site", relay_site, "this site's name at the central aggregator");
  app.add_option("--relay-server-key", relay_server_key_file, "file with the central aggregator's Z85 public key");
  app.add_flag("--relay-symptoms", relay_symptoms, "also forward per-node symptom summaries");
  app.add_option("--relay-rate", relay_rate, "cap on the relay link, bytes per second (0 = none)");
  app.add_flag("--relay-zstd", relay_zstd, "zstd-compress relay batches when smaller");
  app.add_flag("--relay-full-revisions", relay_full_revisions,
               "send every verdict revision whole, also one that repeats the verdict before it (for a central "
               "aggregator older than revision references)");
  app.add_option("--relay-max-bytes", relay_max_bytes,
                 "bound on the unsent relay outbox (least severe, oldest batches dropped first)");
  app.add_option("--relay-interval", relay_interval, "seconds between relay collections");
  app.add_option("--relay-ack-timeout", relay_ack_timeout, "seconds before an unacknowledged relay batch is resent");
  CLI11_PARSE(app, argc, argv);
  if (!relay_site.empty() && (relay_site.size() > 64 || relay_site.find_first_not_of(
                                                            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") !=
                                                            std::string::npos)) {
    // It names relays/SITE.pub at the central and prefixes the site's job ids ("SITE:JOBID").
    std::fprintf(stderr, "faultline-aggregator: --relay-site: 1-64 of letters, digits, '.', '_', '-'\n");
    return 2;
  }
  if (!relay_upstream.empty() &&
      (relay_site.empty() || relay_server_key_file.empty() || curve_secret_file.empty())) {
    std::fprintf(stderr,
                 "faultline-aggregator: --relay-upstream needs --relay-site, --relay-server-key and --curve-secret-key\n");
    return 2;
  }
  if (!curve_secret_file.empty() && allow_dir.empty()) {
    std::fprintf(stderr, "faultline-aggregator: --curve-secret-key needs --allow-dir\n");
    return 2;
  }
  auto readKey = [](const std::string& file, std::string* key) {
    std::ifstream in(file);
    if (!in || !(in >> *key) || key->size() != 40) {
      std::fprintf(stderr, "faultline-aggregator: %s: cannot read a Z85 key\n", file.c_str());
      return false;
    }
    return true;
  };
  std::string curve_secret, relay_server_key;
  if (!curve_secret_file.empty() && !readKey(curve_secret_file, &curve_secret)) return 2;
  if (!relay_server_key_file.empty() && !readKey(relay_server_key_file, &relay_server_key)) return 2;

  auto loaded = common::loadRuleDirs(rule_dirs.empty() ? defaultRuleDirs() : rule_dirs);
  if (!loaded.rules) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return 2;
  }
  auto readToken = [](const std::string& file, std::string* token) {
    if (file.empty()) return true;
    std::ifstream in(file);
    if (!in || !std::getline(in, *token) || token->empty()) {
      std::fprintf(stderr, "faultline-aggregator: %s: cannot read a token\n", file.c_str());
      return false;
    }
    return true;
  };
  std::string token, read_token;
  if (!readToken(token_file, &token) || !readToken(read_token_file, &read_token)) return 2;
  if (auto why = factOpenFromError(fact_open_from); !why.empty()) {
    std::fprintf(stderr, "faultline-aggregator: --fact-open-from: %s\n", why.c_str());
    return 2;
  }
  if (!readToken(prometheus_token_file, &prometheus.bearer_token) ||
      !readToken(prometheus_password_file, &prometheus.basic_password))
    return 2;
  if (auto why = exposureError(listen, !http_options.tls_cert_file.empty(), !read_token.empty(), insecure_http);
      !why.empty()) {
    std::fprintf(stderr, "faultline-aggregator: %s (docs/api.md, \"Exposing the API\")\n", why.c_str());
    return 2;
  }
  http_options.limits.header_timeout = std::chrono::milliseconds(static_cast<int64_t>(header_timeout * 1000));

  SystemClock clock;
  std::string error;
  StoreOptions store_options;
  store_options.synchronous_full = sync_full;
  store_options.symptom_cache_bytes = symptom_cache_mb << 20;
  auto store = Store::open(db, clock, store_options, &error);
  if (!store) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", error.c_str());
    return 1;
  }
  std::fprintf(stderr, "faultline-aggregator: decoded-symptom cache %zu MiB\n", symptom_cache_mb);
  Metrics metrics;
  metrics.describe("faultline_verdicts_total", "verdict revisions stored, by sub_domain");
  metrics.describe("faultline_verdict_evaluations_total",
                   "jobs judged (window read and correlated), whether or not a revision was stored");
  metrics.describe("faultline_http_unauthorized_total", "requests with a bad or missing token");
  metrics.describe("faultline_job_outputs_total", "job output uploads stored (faultline job output)");
  metrics.describe("faultline_job_outputs_rejected_total", "job output uploads refused as malformed");
  VerdictOptions vo;
  auto secs = [](double s) { return static_cast<int64_t>(s * 1e9); };
  vo.settle_ns = secs(settle);
  vo.window_margin_ns = secs(margin);
  vo.agent_timeout_ns = secs(agent_timeout);
  vo.final_timeout_ns = secs(final_timeout);
  VerdictEngine engine(*store, clock, loaded.rules, vo, &metrics);
  RefusalLog refusals;             // the ingest endpoint's refused identities, listed by the API
  ConnectionTracker connections;   // its open agent connections: "live" ends when one closes
  ApiOptions api_options;
  api_options.refusals = &refusals;
  api_options.connections = &connections;
  api_options.write_token = token;
  // The FACT observation routes read posted log lines with the same rules (http/fact_api.h).
  common::RuleEngine observation_rules(loaded.rules);
  api_options.rules = &observation_rules;
  api_options.read_token = read_token;
  api_options.fact_open_from = fact_open_from;
  api_options.secure_cookie = !http_options.tls_cert_file.empty();
  api_options.agent_timeout_ns = vo.agent_timeout_ns;
  Leadership leadership(db);
  api_options.leads = [&leadership] { return leadership.leader(); };
  Api api(*store, &engine, metrics, clock, api_options);
  api.setStoreFile(db);

  net::io_context io;
  // Metric evidence: asked on its own thread, answered on the io thread (the engine's).
  std::unique_ptr<MetricWorker> metric_worker;
  if (!prometheus.url.empty()) {
    metrics.describe("faultline_metric_evidence_total", "metric evidence answers from --prometheus, by outcome");
    metric_worker = std::make_unique<MetricWorker>(
        prometheus, loaded.rules,
        [&io, &engine, &metrics](const std::string& job_id, MetricEvidence ev) {
          bool failed = std::any_of(ev.coverage.begin(), ev.coverage.end(), [](auto& c) { return c.status == "error"; });
          metrics.add("faultline_metric_evidence_total", "outcome", failed ? "error" : "ok");
          net::post(io, [&engine, job_id, ev = std::move(ev)]() mutable {
            engine.onMetricEvidence(job_id, std::move(ev.symptoms), std::move(ev.coverage));
          });
        },
        [&clock] { return clock.nowNs(); });
    engine.setMetricRequest([&metric_worker](const common::JobInfo& job) { metric_worker->request(job); });
    std::fprintf(stderr, "faultline-aggregator: metric evidence from %s\n", prometheus.url.c_str());
  }
  HttpServer server(io, api, http_options);
  if (!server.listen(listen, port, &error)) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", error.c_str());
    return 1;
  }
  std::fprintf(stderr, "faultline-aggregator %s: %s, %s://%s:%u, ruleset %s\n", FAULTLINE_VERSION,
               sql::redactUrl(db).c_str(), server.tls() ? "https" : "http",
               listen.c_str(), server.port(), loaded.rules->version.c_str());
  if (!port_file.empty()) std::ofstream(port_file) << server.port() << "\n";

  // Agents' ingest: its own thread (blocking zmq_poll), writing only to the (locked) store.
  Ingestor ingestor(*store, metrics, clock, common::DecodeLimits{.max_bytes = max_message_bytes});
  std::unique_ptr<ZmqEndpoint> endpoint;
  std::thread ingest_thread;
  if (!curve_secret.empty()) {
    ZmqEndpointOptions eo;
    eo.endpoint = ingest_endpoint;
    eo.curve_secret_key = curve_secret;
    eo.allow_dir = allow_dir;
    eo.max_message_bytes = max_message_bytes;
    eo.legacy_ingest = ingest_legacy;
    eo.max_pass = ingest_pass;
    eo.refusals = &refusals;
    eo.connections = &connections;
    endpoint = std::make_unique<ZmqEndpoint>(ingestor, metrics, clock, eo);
    if (!endpoint->start(&error)) {
      std::fprintf(stderr, "faultline-aggregator: ingest: %s\n", error.c_str());
      return 1;
    }
    std::fprintf(stderr, "faultline-aggregator: ingest on %s, %zu agent keys from %s\n", endpoint->endpoint().c_str(),
                 endpoint->allowedKeys(), allow_dir.c_str());
    if (!ingest_endpoint_file.empty()) std::ofstream(ingest_endpoint_file) << endpoint->endpoint() << "\n";
    ingest_thread = std::thread([&] { endpoint->run(); });
  } else {
    std::fprintf(stderr, "faultline-aggregator: no --curve-secret-key: agents' ingest disabled\n");
  }
  // The site relay runs on the io thread (its outbox is a table in the store).
  // Only the leader relays (and only it changes the relay's capture trigger).
  zmq::context_t relay_zmq;
  std::unique_ptr<Relay> relay;
  if (!relay_upstream.empty())
    api.setRelayStatus([&relay]() { return relay ? relay->status() : nlohmann::json(nullptr); });
  auto start_relay = [&]() -> bool {
  if (!relay_upstream.empty()) {
    RelayOptions ro;
    ro.collect.site_id = relay_site;
    ro.collect.ruleset_version = loaded.rules->version;
    ro.collect.symptoms = relay_symptoms;
    ro.collect.revision_refs = !relay_full_revisions;
    ro.collect.max_outbox_bytes = relay_max_bytes;
    ro.shipper.endpoints = {relay_upstream};
    ro.shipper.agent_id = "relay-" + relay_site;
    ro.shipper.curve_secret_key = curve_secret;
    ro.shipper.curve_server_key = relay_server_key;
    ro.shipper.rate_bytes_per_sec = relay_rate;
    ro.shipper.zstd = relay_zstd;
    ro.shipper.ack_timeout_ns = static_cast<int64_t>(relay_ack_timeout * 1e9);
    ro.shipper.tick_ms = static_cast<int>(std::clamp(relay_ack_timeout * 250, 50.0, 1000.0));
    ro.interval_ms = std::max<int64_t>(1, static_cast<int64_t>(relay_interval * 1000));
    relay = std::make_unique<Relay>(io, relay_zmq, clock, *store, &metrics, ro);
    if (!relay->start(&error)) {
      std::fprintf(stderr, "faultline-aggregator: relay: %s\n", error.c_str());
      return false;
    }
    const std::string cap =
        relay_rate ? ", rate cap " + std::to_string(relay_rate) + " B/s (burst " +
                         std::to_string(ro.shipper.rate_burst_bytes) + " B)"
                   : "";
    std::fprintf(stderr, "faultline-aggregator: relaying site %s to %s%s%s%s%s\n", relay_site.c_str(),
                 relay_upstream.c_str(), relay_symptoms ? ", with symptom summaries" : "", relay_zstd ? ", zstd" : "",
                 relay_full_revisions ? ", every revision whole" : "", cap.c_str());
  } else if (std::string e; !store->setRelayCapture(false, &e)) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", e.c_str());
    return false;
  }
  return true;
  };
  net::signal_set hup(io, SIGHUP);
  std::function<void()> wait_hup = [&] {
    hup.async_wait([&](const boost::system::error_code& ec, int) {
      if (ec) return;
      if (endpoint) endpoint->requestReload();
      wait_hup();
    });
  };
  wait_hup();

  // Leadership: taken or confirmed every --leader-poll seconds; gaining it starts the relay,
  // losing it stops it. The verdict ticks, pruning and the sacct poll run only while leading.
  net::steady_timer leader_timer(io), tick_timer(io), prune_timer(io), watchdog_timer(io);
  bool relay_failed = false;
  auto poll_leader = [&] {
    bool was = leadership.leader();
    std::string why;
    bool now = leadership.poll(&why);
    if (now && !was) {
      std::fprintf(stderr, "faultline-aggregator: leading (verdicts, sacct, relay, pruning)\n");
      if (!start_relay()) relay_failed = true;
    } else if (!now && was) {
      std::fprintf(stderr, "faultline-aggregator: no longer leading: %s\n", why.c_str());
      if (relay) relay->stop();
      relay.reset();
    }
    if (relay_failed) io.stop();
  };
  poll_leader();
  if (relay_failed) return 1;
  if (leadership.shared() && !leadership.leader())
    std::fprintf(stderr, "faultline-aggregator: a replica: another one leads for now\n");
  every(leader_timer, std::chrono::milliseconds(static_cast<int64_t>(leader_poll * 1000)), poll_leader);
  every(tick_timer, std::chrono::milliseconds(static_cast<int64_t>(tick * 1000)), [&] {
    if (!leadership.leader()) return;
    int64_t t0 = clock.steadyNs();
    if (engine.tick()) metrics.observe("faultline_verdict_tick_seconds", double(clock.steadyNs() - t0) / 1e9);
  });
  // Pruning in small steps, each its own short transaction, re-posted so HTTP and ticks interleave.
  std::function<void()> prune_step = [&] {
    if (!leadership.leader()) return;
    int64_t now = clock.nowNs();
    size_t n = store->pruneStep(now - secs(retention_days * 86400), now - secs(job_retention_days * 86400), 500);
    metrics.add("faultline_pruned_rows_total", "", "", n);
    if (n == 500) net::post(io, prune_step);
  };
  every(prune_timer, std::chrono::minutes(1), prune_step);
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
    every(watchdog_timer, std::chrono::milliseconds(watchdog_usec / 2000), [] { sd_notify(0, "WATCHDOG=1"); });

  // The sacct poll blocks on a child process: its own thread, writing only to the (locked) store.
  std::mutex poll_mu;
  std::condition_variable poll_cv;
  bool stopping = false;
  std::thread poller;
  if (!sacct_command.empty() && sacct_interval > 0) {
    poller = std::thread([&] {
      SacctPoller p({sacct_command, 256 << 20});
      std::unique_lock lock(poll_mu);
      while (!stopping) {
        lock.unlock();
        if (leadership.leader()) {
          auto r = p.pollOnce(*store);
          metrics.add("faultline_sacct_polls_total", "result", r.ok ? "ok" : "error");
          for (const auto& e : r.errors) std::fprintf(stderr, "faultline-aggregator: sacct: %s\n", e.c_str());
        }
        lock.lock();
        poll_cv.wait_for(lock, std::chrono::milliseconds(static_cast<int64_t>(sacct_interval * 1000)),
                         [&] { return stopping; });
      }
    });
  }

  net::signal_set signals(io, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code&, int sig) {
    std::fprintf(stderr, "faultline-aggregator: signal %d, stopping\n", sig);
    sd_notify(0, "STOPPING=1");
    server.stop();
    hup.cancel();
    if (relay) relay->stop();
    io.stop();
  });
  sd_notify(0, "READY=1");
  io.run();
  {
    std::lock_guard lock(poll_mu);
    stopping = true;
  }
  poll_cv.notify_all();
  if (poller.joinable()) poller.join();
  if (endpoint) endpoint->stop();
  if (ingest_thread.joinable()) ingest_thread.join();
  engine.setMetricRequest(nullptr);
  metric_worker.reset();  // before the io_context it posts to
  return 0;
}

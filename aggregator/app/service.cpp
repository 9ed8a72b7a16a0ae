#include "aggregator/app/service.h"

#include <boost/asio/post.hpp>
#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>

#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/store/db.h"
#include "tools/domain_model/builtin.h"

namespace faultline::aggregator {

namespace net = boost::asio;

namespace {

int64_t secs(double s) { return static_cast<int64_t>(s * 1e9); }
std::chrono::milliseconds millis(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000)); }

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

AggregatorService::AggregatorService(AggregatorConfig config, std::vector<std::string> default_rule_dirs)
    : config_(std::move(config)), default_rule_dirs_(std::move(default_rule_dirs)) {}

AggregatorService::~AggregatorService() { stopThreads(); }

int AggregatorService::run() {
  if (int code = start()) return code;
  sd_notify(0, "READY=1");
  io_.run();
  stopThreads();
  return 0;
}

int AggregatorService::start() {
  if (!loadRules()) return 2;
  if (!openStore()) return 1;
  buildEngineAndApi();
  startMetricWorker();
  if (!startHttp() || !startIngest()) return 1;
  waitForSignals();
  pollLeader();
  if (relay_failed_) return 1;
  if (leadership_->shared() && !leadership_->leader())
    std::fprintf(stderr, "faultline-aggregator: a replica: another one leads for now\n");
  startTimers();
  startSacctPoller();
  return 0;
}

bool AggregatorService::loadRules() {
  auto loaded = common::loadRuleDirs(config_.rule_dirs.empty() ? default_rule_dirs_ : config_.rule_dirs);
  if (!loaded.rules) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return false;
  }
  rules_ = loaded.rules;
  return true;
}

bool AggregatorService::openStore() {
  std::string error;
  StoreOptions options;
  options.synchronous_full = config_.sync_full;
  options.symptom_cache_bytes = config_.symptom_cache_mb << 20;
  store_ = Store::open(config_.db, clock_, options, &error);
  if (!store_) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", error.c_str());
    return false;
  }
  std::fprintf(stderr, "faultline-aggregator: decoded-symptom cache %zu MiB\n", config_.symptom_cache_mb);
  return true;
}

void AggregatorService::buildEngineAndApi() {
  metrics_.describe("faultline_verdicts_total", "verdict revisions stored, by sub_domain");
  metrics_.describe("faultline_verdict_evaluations_total",
                    "jobs judged (window read and correlated), whether or not a revision was stored");
  metrics_.describe("faultline_http_unauthorized_total", "requests with a bad or missing token");
  metrics_.describe("faultline_job_outputs_total", "job output uploads stored (faultline job output)");
  metrics_.describe("faultline_job_outputs_rejected_total", "job output uploads refused as malformed");
  VerdictOptions vo;
  vo.settle_ns = secs(config_.settle_s);
  vo.window_margin_ns = secs(config_.margin_s);
  vo.agent_timeout_ns = secs(config_.agent_timeout_s);
  vo.final_timeout_ns = secs(config_.final_timeout_s);
  std::string why;
  domain_model_ = common::DomainClassifier::parse(common::builtinDomainModelText(), &why);
  if (domain_model_) vo.domain_model = &*domain_model_;
  else std::fprintf(stderr, "faultline-aggregator: the domain model: %s (no domain leads)\n", why.c_str());
  engine_ = std::make_unique<VerdictEngine>(*store_, clock_, rules_, vo, &metrics_);
  observation_rules_ = std::make_unique<common::RuleEngine>(rules_);
  leadership_ = std::make_unique<Leadership>(config_.db);
  ApiOptions o;
  o.refusals = &refusals_;
  o.connections = &connections_;
  o.write_token = config_.token;
  o.rules = observation_rules_.get();
  o.read_token = config_.read_token;
  o.fact_open_from = config_.fact_open_from;
  o.secure_cookie = !config_.http.tls_cert_file.empty();
  o.agent_timeout_ns = vo.agent_timeout_ns;
  o.leads = [this] { return leadership_->leader(); };
  api_ = std::make_unique<Api>(*store_, engine_.get(), metrics_, clock_, o);
  api_->setStoreFile(config_.db);
  if (!config_.relay_upstream.empty())
    api_->setRelayStatus([this]() { return relay_ ? relay_->status() : nlohmann::json(nullptr); });
}

// Metric evidence: asked on its own thread, answered on the io thread (the engine's).
void AggregatorService::startMetricWorker() {
  if (config_.prometheus.url.empty()) return;
  metrics_.describe("faultline_metric_evidence_total", "metric evidence answers from --prometheus, by outcome");
  metric_worker_ = std::make_unique<MetricWorker>(
      config_.prometheus, rules_,
      [this](const std::string& job_id, MetricEvidence ev) {
        bool failed = std::any_of(ev.coverage.begin(), ev.coverage.end(), [](auto& c) { return c.status == "error"; });
        metrics_.add("faultline_metric_evidence_total", "outcome", failed ? "error" : "ok");
        net::post(io_, [this, job_id, ev = std::move(ev)]() mutable {
          engine_->onMetricEvidence(job_id, std::move(ev.symptoms), std::move(ev.coverage));
        });
      },
      [this] { return clock_.nowNs(); });
  engine_->setMetricRequest([this](const common::JobInfo& job) { metric_worker_->request(job); });
  std::fprintf(stderr, "faultline-aggregator: metric evidence from %s\n", config_.prometheus.url.c_str());
}

bool AggregatorService::startHttp() {
  std::string error;
  server_ = std::make_unique<HttpServer>(io_, *api_, config_.http);
  if (!server_->listen(config_.listen, config_.port, &error)) {
    std::fprintf(stderr, "faultline-aggregator: %s\n", error.c_str());
    return false;
  }
  std::fprintf(stderr, "faultline-aggregator %s: %s, %s://%s:%u, ruleset %s\n", FAULTLINE_VERSION,
               sql::redactUrl(config_.db).c_str(), server_->tls() ? "https" : "http", config_.listen.c_str(),
               server_->port(), rules_->version.c_str());
  if (!config_.port_file.empty()) std::ofstream(config_.port_file) << server_->port() << "\n";
  return true;
}

// Agents' ingest: its own thread (blocking zmq_poll), writing only to the (locked) store.
bool AggregatorService::startIngest() {
  ingestor_ = std::make_unique<Ingestor>(*store_, metrics_, clock_,
                                         common::DecodeLimits{.max_bytes = config_.max_message_bytes});
  if (config_.curve_secret.empty()) {
    std::fprintf(stderr, "faultline-aggregator: no --curve-secret-key: agents' ingest disabled\n");
    return true;
  }
  ZmqEndpointOptions eo;
  eo.endpoint = config_.ingest_endpoint;
  eo.curve_secret_key = config_.curve_secret;
  eo.allow_dir = config_.allow_dir;
  eo.max_message_bytes = config_.max_message_bytes;
  eo.legacy_ingest = config_.ingest_legacy;
  eo.max_pass = config_.ingest_pass;
  eo.refusals = &refusals_;
  eo.connections = &connections_;
  endpoint_ = std::make_unique<ZmqEndpoint>(*ingestor_, metrics_, clock_, eo);
  std::string error;
  if (!endpoint_->start(&error)) {
    std::fprintf(stderr, "faultline-aggregator: ingest: %s\n", error.c_str());
    return false;
  }
  std::fprintf(stderr, "faultline-aggregator: ingest on %s, %zu agent keys from %s\n", endpoint_->endpoint().c_str(),
               endpoint_->allowedKeys(), config_.allow_dir.c_str());
  if (!config_.ingest_endpoint_file.empty()) std::ofstream(config_.ingest_endpoint_file) << endpoint_->endpoint() << "\n";
  ingest_thread_ = std::thread([this] { endpoint_->run(); });
  return true;
}

// The site relay runs on the io thread (its outbox is a table in the store). Only the leader
// relays, and only it changes the relay's capture trigger.
bool AggregatorService::startRelay() {
  std::string error;
  if (config_.relay_upstream.empty()) {
    if (store_->setRelayCapture(false, &error)) return true;
    std::fprintf(stderr, "faultline-aggregator: %s\n", error.c_str());
    return false;
  }
  const auto& c = config_;
  RelayOptions ro;
  ro.collect.site_id = c.relay_site;
  ro.collect.ruleset_version = rules_->version;
  ro.collect.symptoms = c.relay_symptoms;
  ro.collect.revision_refs = !c.relay_full_revisions;
  ro.collect.max_outbox_bytes = c.relay_max_bytes;
  ro.shipper.endpoints = {c.relay_upstream};
  ro.shipper.agent_id = "relay-" + c.relay_site;
  ro.shipper.curve_secret_key = c.curve_secret;
  ro.shipper.curve_server_key = c.relay_server_key;
  ro.shipper.rate_bytes_per_sec = c.relay_rate;
  ro.shipper.zstd = c.relay_zstd;
  ro.shipper.ack_timeout_ns = secs(c.relay_ack_timeout_s);
  ro.shipper.tick_ms = static_cast<int>(std::clamp(c.relay_ack_timeout_s * 250, 50.0, 1000.0));
  ro.interval_ms = std::max<int64_t>(1, static_cast<int64_t>(c.relay_interval_s * 1000));
  relay_ = std::make_unique<Relay>(io_, relay_zmq_, clock_, *store_, &metrics_, ro);
  if (!relay_->start(&error)) {
    std::fprintf(stderr, "faultline-aggregator: relay: %s\n", error.c_str());
    return false;
  }
  const std::string cap = c.relay_rate ? ", rate cap " + std::to_string(c.relay_rate) + " B/s (burst " +
                                             std::to_string(ro.shipper.rate_burst_bytes) + " B)"
                                       : "";
  std::fprintf(stderr, "faultline-aggregator: relaying site %s to %s%s%s%s%s\n", c.relay_site.c_str(),
               c.relay_upstream.c_str(), c.relay_symptoms ? ", with symptom summaries" : "",
               c.relay_zstd ? ", zstd" : "", c.relay_full_revisions ? ", every revision whole" : "", cap.c_str());
  return true;
}

// Leadership: taken or confirmed every --leader-poll seconds; gaining it starts the relay, losing
// it stops it. The verdict ticks, pruning and the sacct poll run only while leading.
void AggregatorService::pollLeader() {
  const bool was = leadership_->leader();
  std::string why;
  const bool now = leadership_->poll(&why);
  if (now && !was) {
    std::fprintf(stderr, "faultline-aggregator: leading (verdicts, sacct, relay, pruning)\n");
    if (!startRelay()) relay_failed_ = true;
  } else if (!now && was) {
    std::fprintf(stderr, "faultline-aggregator: no longer leading: %s\n", why.c_str());
    if (relay_) relay_->stop();
    relay_.reset();
  }
  if (relay_failed_) io_.stop();
}

void AggregatorService::startTimers() {
  every(leader_timer_, millis(config_.leader_poll_s), [this] { pollLeader(); });
  every(tick_timer_, millis(config_.tick_s), [this] {
    if (!leadership_->leader()) return;
    const int64_t t0 = clock_.steadyNs();
    if (engine_->tick()) metrics_.observe("faultline_verdict_tick_seconds", double(clock_.steadyNs() - t0) / 1e9);
  });
  every(prune_timer_, std::chrono::minutes(1), [this] { pruneStep(); });
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0)
    every(watchdog_timer_, std::chrono::milliseconds(watchdog_usec / 2000), [] { sd_notify(0, "WATCHDOG=1"); });
}

// Pruning in small steps, each its own short transaction, re-posted so HTTP and ticks interleave.
void AggregatorService::pruneStep() {
  if (!leadership_->leader()) return;
  const int64_t now = clock_.nowNs();
  const size_t n = store_->pruneStep(now - secs(config_.retention_days * 86400),
                                     now - secs(config_.job_retention_days * 86400), 500);
  metrics_.add("faultline_pruned_rows_total", "", "", n);
  if (n == 500) net::post(io_, [this] { pruneStep(); });
}

void AggregatorService::startSacctPoller() {
  if (config_.sacct_command.empty() || config_.sacct_interval_s <= 0) return;
  poller_ = std::thread([this] {
    SacctPoller p({config_.sacct_command, 256 << 20});
    std::unique_lock lock(poll_mu_);
    while (!stopping_) {
      lock.unlock();
      if (leadership_->leader()) {
        auto r = p.pollOnce(*store_);
        metrics_.add("faultline_sacct_polls_total", "result", r.ok ? "ok" : "error");
        for (const auto& e : r.errors) std::fprintf(stderr, "faultline-aggregator: sacct: %s\n", e.c_str());
      }
      lock.lock();
      poll_cv_.wait_for(lock, millis(config_.sacct_interval_s), [this] { return stopping_; });
    }
  });
}

// SIGHUP re-reads the agents' keys, again and again.
void AggregatorService::waitForHup() {
  hup_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    if (endpoint_) endpoint_->requestReload();
    waitForHup();
  });
}

// SIGTERM / SIGINT stop the io_context, which ends run().
void AggregatorService::waitForSignals() {
  waitForHup();
  signals_.async_wait([this](const boost::system::error_code&, int sig) {
    std::fprintf(stderr, "faultline-aggregator: signal %d, stopping\n", sig);
    sd_notify(0, "STOPPING=1");
    server_->stop();
    hup_.cancel();
    if (relay_) relay_->stop();
    io_.stop();
  });
}

void AggregatorService::stopThreads() {
  {
    std::lock_guard lock(poll_mu_);
    stopping_ = true;
  }
  poll_cv_.notify_all();
  if (poller_.joinable()) poller_.join();
  if (endpoint_) endpoint_->stop();
  if (ingest_thread_.joinable()) ingest_thread_.join();
  if (engine_) engine_->setMetricRequest(nullptr);
  metric_worker_.reset();  // before the io_context it posts to
}

}  // namespace faultline::aggregator

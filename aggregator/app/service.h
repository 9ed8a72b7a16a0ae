// faultline-aggregator's composition: owns every piece the process runs and their lifetimes —
// the store, the rules, the verdict engine, the HTTP API and server on one io_context, the
// agents' ZeroMQ ingest on its own thread, metric evidence on a worker thread, the site relay,
// the sacct poll on its own thread — and drives the periodic work (leadership, verdict ticks,
// pruning, the systemd watchdog) from timers. Members are declared in the order they are built,
// so they are torn down in reverse; run() stops the threads before that.
//
// The pieces' logic lives in faultline_aggregator; this file only wires them (issue 32).
#pragma once

#include <utility>  // before Asio: Boost 1.74 + GCC 12 need std::exchange declared

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <zmq.hpp>

#include "aggregator/app/config.h"
#include "aggregator/clock.h"
#include "aggregator/evidence/metric_worker.h"
#include "aggregator/http/api.h"
#include "aggregator/http/server.h"
#include "aggregator/ingest/ingestor.h"
#include "aggregator/ingest/zmq_endpoint.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/relay/relay.h"
#include "aggregator/store/leader.h"
#include "aggregator/store/store.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "common/domain_classifier.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"

namespace faultline::aggregator {

class AggregatorService {
 public:
  // `config` as resolveAggregatorConfig() left it; `default_rule_dirs` when it names none.
  AggregatorService(AggregatorConfig config, std::vector<std::string> default_rule_dirs);
  ~AggregatorService();
  AggregatorService(const AggregatorService&) = delete;
  AggregatorService& operator=(const AggregatorService&) = delete;

  // Starts everything, serves until SIGTERM/SIGINT, stops. The process's exit code: 0 after a
  // signal, 1 when a piece could not start (said on stderr), 2 when the rules do not load.
  int run();

 private:
  int start();  // 0, or the exit code
  bool loadRules();
  bool openStore();
  void buildEngineAndApi();
  void startMetricWorker();
  bool startHttp();
  bool startIngest();
  bool startRelay();  // on gaining leadership
  void pollLeader();
  void startTimers();
  void pruneStep();
  void startSacctPoller();
  void waitForHup();
  void waitForSignals();
  void stopThreads();

  AggregatorConfig config_;
  std::vector<std::string> default_rule_dirs_;
  SystemClock clock_;
  std::shared_ptr<const common::RuleSet> rules_;
  std::unique_ptr<Store> store_;
  Metrics metrics_;
  // The domain lead of unattributed verdicts (tools/domain_model: trained at build time).
  std::optional<common::DomainClassifier> domain_model_;
  std::unique_ptr<VerdictEngine> engine_;
  RefusalLog refusals_;            // the ingest endpoint's refused identities, listed by the API
  ConnectionTracker connections_;  // its open agent connections: "live" ends when one closes
  // The FACT observation routes read posted log lines with the same rules (http/fact_api.h).
  std::unique_ptr<common::RuleEngine> observation_rules_;
  std::unique_ptr<Leadership> leadership_;
  std::unique_ptr<Api> api_;
  boost::asio::io_context io_;
  std::unique_ptr<MetricWorker> metric_worker_;  // posts to io_: reset before it goes
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<Ingestor> ingestor_;
  std::unique_ptr<ZmqEndpoint> endpoint_;
  std::thread ingest_thread_;
  zmq::context_t relay_zmq_;
  std::unique_ptr<Relay> relay_;
  bool relay_failed_ = false;
  boost::asio::signal_set hup_{io_, SIGHUP};
  boost::asio::signal_set signals_{io_, SIGTERM, SIGINT};
  boost::asio::steady_timer leader_timer_{io_}, tick_timer_{io_}, prune_timer_{io_}, watchdog_timer_{io_};
  // The sacct poll blocks on a child process: its own thread, writing only to the (locked) store.
  std::mutex poll_mu_;
  std::condition_variable poll_cv_;
  bool stopping_ = false;
  std::thread poller_;
};

}  // namespace faultline::aggregator

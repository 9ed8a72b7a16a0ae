// Site relay: an edge site's aggregator stores and judges its jobs locally and forwards what the
// central aggregator needs — verdict revisions (with the job), node history and, optionally,
// per-node symptom summaries — over the same acked, durable, rate-capped uplink the agents use
// (common/uplink/Shipper). The outbox is a table in the site's own SQLite store, so a cut link or
// a restart of either side loses nothing: batches stay until the central acknowledges them, and
// the central deduplicates by (site, sequence).
//
// Threading: everything on the io_context thread (the collect timer and the Shipper's socket);
// the Store is locked internally, so ingest and HTTP threads keep writing while the relay reads.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>
#include <vector>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "aggregator/store/store.h"
#include "common/uplink/log.h"
#include "common/uplink/shipper.h"

namespace faultline::aggregator {

class Metrics;

// The Shipper's view of the store's relay outbox.
class StoreOutbox : public uplink::Outbox {
 public:
  explicit StoreOutbox(Store& store) : store_(store) {}
  std::vector<uplink::OutboundBatch> unacked(size_t limit, bool by_severity,
                                             const std::vector<uint64_t>& exclude = {}) const override;
  bool ack(uint64_t sequence) override;

 private:
  Store& store_;
};

struct RelayOptions {
  RelayCollectOptions collect;       // site id, ruleset version, symptom summaries, bounds
  uplink::ShipperOptions shipper;    // upstream endpoint(s), keys, rate cap, zstd
  int64_t interval_ms = 2000;        // how often new verdicts/events are packed and shipped
};

struct RelayStats {
  uint64_t collected_batches = 0, collected_items = 0, collect_errors = 0, dropped_batches = 0;
};

class Relay {
 public:
  Relay(boost::asio::io_context& io, zmq::context_t& zmq, const Clock& clock, Store& store, Metrics* metrics,
        RelayOptions options);
  ~Relay();

  // Turns on the store's relay capture, connects upstream, starts the collect timer.
  bool start(std::string* error);
  void stop();
  // Packs what is new into the outbox and lets the Shipper send; the timer calls it, tests too.
  void collectNow();

  const RelayStats& stats() const { return stats_; }
  // The uplink as the site's operator needs it (GET /healthz "relay", /metrics): the upstream, the
  // link's state and failed attempts since it was last up (link_watch.h), the last ack, what
  // waits in the outbox. Call on the io thread.
  nlohmann::json status() const;
  const uplink::ShipperStats& shipperStats() const { return shipper_->stats(); }
  uplink::Shipper& shipper() { return *shipper_; }

 private:
  void armTimer();

  boost::asio::io_context& io_;
  Store& store_;
  Metrics* metrics_;
  RelayOptions options_;
  uplink::Logger log_;
  StoreOutbox outbox_;
  std::unique_ptr<uplink::Shipper> shipper_;
  boost::asio::steady_timer timer_;
  bool running_ = false;
  RelayStats stats_;
  uint64_t reported_bytes_ = 0, reported_acked_ = 0, reported_resent_ = 0;
};

}  // namespace faultline::aggregator

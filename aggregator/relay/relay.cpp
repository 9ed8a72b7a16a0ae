#include "aggregator/relay/relay.h"

#include <utility>

#include "aggregator/metrics/metrics.h"
#include "common/job.h"

namespace faultline::aggregator {

std::vector<uplink::OutboundBatch> StoreOutbox::unacked(size_t limit, bool by_severity,
                                                        const std::vector<uint64_t>& exclude) const {
  std::vector<uplink::OutboundBatch> out;
  for (auto& b : store_.relayUnacked(limit, by_severity, exclude)) {
    uplink::OutboundBatch o;
    o.sequence = b.sequence;
    o.max_severity = static_cast<common::Severity>(b.max_severity);
    o.items = b.items;
    o.payload = std::move(b.payload);
    out.push_back(std::move(o));
  }
  return out;
}

bool StoreOutbox::ack(uint64_t sequence) { return store_.relayAck(sequence); }

Relay::Relay(boost::asio::io_context& io, zmq::context_t& zmq, const Clock& clock, Store& store, Metrics* metrics,
             RelayOptions options)
    : io_(io),
      store_(store),
      metrics_(metrics),
      options_(std::move(options)),
      log_(clock, 30, "faultline-aggregator: relay"),
      outbox_(store),
      timer_(io) {
  options_.shipper.batch_type = "relay";
  options_.shipper.log_name = "faultline-aggregator: relay";
  options_.shipper.key_file = "relays/" + options_.collect.site_id + ".pub";
  shipper_ = std::make_unique<uplink::Shipper>(io, zmq, clock, outbox_, options_.shipper, &log_);
  if (metrics_) {
    metrics_->describe("faultline_relay_collected_batches_total", "relay batches packed into the outbox");
    metrics_->describe("faultline_relay_collected_items_total", "verdicts, node events and summaries packed");
    metrics_->describe("faultline_relay_confirmed_revisions_total",
                       "verdict revisions packed as a reference to the earlier revision they repeat");
    metrics_->describe("faultline_relay_dropped_batches_total", "outbox batches dropped by the byte bound");
    metrics_->describe("faultline_relay_sent_bytes_total", "bytes sent upstream (after zstd), resends included");
    metrics_->describe("faultline_relay_acked_batches_total", "relay batches acknowledged by the central aggregator");
    metrics_->describe("faultline_relay_resent_batches_total", "relay batches sent again after an ack timeout");
  }
}

Relay::~Relay() { stop(); }

bool Relay::start(std::string* error) {
  if (!store_.setRelayCapture(true, error)) return false;
  if (!shipper_->start(error)) return false;
  running_ = true;
  collectNow();
  armTimer();
  return true;
}

void Relay::stop() {
  if (!running_) return;
  running_ = false;
  timer_.cancel();
  shipper_->stop();
}

void Relay::collectNow() {
  // Drain what accumulated (a long outage, a burst of verdicts) in bounded batches.
  for (int round = 0; round < 64; ++round) {
    std::string error;
    auto r = store_.relayCollect(options_.collect, &error);
    if (!r) {
      ++stats_.collect_errors;
      log_.error("collect: {}", error);
      break;
    }
    stats_.dropped_batches += r->dropped_batches;
    if (r->dropped_batches) log_.warn("outbox over its bound: dropped {} oldest low-severity batches", r->dropped_batches);
    if (r->sequence == 0) break;
    const size_t items = r->verdicts + r->node_events + r->symptoms;
    ++stats_.collected_batches;
    stats_.collected_items += items;
    if (metrics_) {
      metrics_->add("faultline_relay_collected_batches_total");
      metrics_->add("faultline_relay_collected_items_total", "", "", items);
      if (r->confirmed) metrics_->add("faultline_relay_confirmed_revisions_total", "", "", r->confirmed);
      if (r->dropped_batches) metrics_->add("faultline_relay_dropped_batches_total", "", "", r->dropped_batches);
    }
    if (!r->more) break;  // caught up
  }
  shipper_->kick();
  if (metrics_) {
    // The Shipper's counters are cumulative; forward the increments.
    const auto& s = shipper_->stats();
    metrics_->add("faultline_relay_sent_bytes_total", "", "", s.bytes_sent - reported_bytes_);
    metrics_->add("faultline_relay_acked_batches_total", "", "", s.acked - reported_acked_);
    metrics_->add("faultline_relay_resent_batches_total", "", "", s.resent - reported_resent_);
    reported_bytes_ = s.bytes_sent;
    reported_acked_ = s.acked;
    reported_resent_ = s.resent;
  }
}

nlohmann::json Relay::status() const {
  const std::string& upstream = options_.shipper.endpoints.empty() ? std::string() : options_.shipper.endpoints[0];
  const auto& link = shipper_->link();
  const auto& s = shipper_->stats();
  const auto outbox = store_.relayOutboxStats();
  nlohmann::json last_ack = nullptr;
  if (s.last_ack_ns) last_ack = common::formatTimeNs(s.last_ack_ns);
  return {{"site", options_.collect.site_id},
          {"upstream", upstream},
          {"link", uplink::LinkWatch::stateName(link.state(upstream))},
          {"link_up", link.state(upstream) == uplink::LinkWatch::State::kUp},
          {"failed_attempts", link.failures(upstream)},
          {"last_ack", last_ack},
          {"acked_batches", s.acked},
          {"resent_batches", s.resent},
          {"outbox_batches", outbox.batches},
          {"outbox_bytes", outbox.bytes}};
}

void Relay::armTimer() {
  if (!running_) return;
  timer_.expires_after(std::chrono::milliseconds(options_.interval_ms));
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    collectNow();
    armTimer();
  });
}

}  // namespace faultline::aggregator

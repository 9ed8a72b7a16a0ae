// The agents' ZeroMQ ingest endpoint (docs/wire-protocol.md, "Aggregator side"): a ROUTER socket,
// CurveZMQ server, with a ZAP handler that admits only public keys of the allow-list directory
// (allow_list.h) and names each connection by the key's hostname (ZAP User-Id). Every message is
// checked — frame count, size, type, decode limits, the claimed hostname against the
// authenticated one — before the Ingestor stores it; a batch is acked after it is committed (or
// found already stored). A bad message is rejected, counted in faultline_rejects_total{reason},
// logged (rate limited), and the loop goes on.
//
// Threading: start() on any thread; then run() blocks the calling thread (normally a dedicated
// one) until stop(). stop(), requestReload() and endpoint() are thread-safe. The endpoint owns
// its zmq context (one ZAP handler per context). The Ingestor and Metrics must outlive it; they
// are called from the run() thread. Never throws.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <zmq.hpp>

#include "aggregator/clock.h"
#include "aggregator/ingest/allow_list.h"
#include "aggregator/ingest/ingestor.h"
#include "aggregator/metrics/metrics.h"
#include "common/protocol.h"

namespace faultline::aggregator {

struct ZmqEndpointOptions {
  std::string endpoint = "tcp://127.0.0.1:7400";  // bind address; "tcp://127.0.0.1:*" = ephemeral
  std::string curve_secret_key;                   // Z85, the aggregator's secret key (required)
  std::string allow_dir;                          // HOST.pub files (required)
  size_t max_message_bytes = 16 << 20;            // larger payloads are rejected ("oversized")
  int poll_ms = 100;                              // how soon stop()/reload requests are seen
  int log_per_minute = 30;                        // reject log lines; the rest are counted
  // The ingest pass (docs/aggregator.md, "Ingest"). false (default): each pass reads up to
  // `max_pass` queued messages and decodes them before taking the store, then writes them in one
  // group with statements prepared once and no savepoint per batch. true: the previous path — a
  // message read, decoded and stored (a savepoint, statements prepared per batch) one at a time
  // inside the group, at most 256 per pass (kept as the bench's peer).
  bool legacy_ingest = false;
  int max_pass = 1024;
  // Where log lines go (default: stderr).
  std::function<void(const std::string&)> log;
};

class ZmqEndpoint {
 public:
  ZmqEndpoint(Ingestor& ingestor, Metrics& metrics, const Clock& clock, ZmqEndpointOptions options);
  ~ZmqEndpoint();

  // Loads the allow-list, starts the ZAP handler, binds. false + *error on a bad key, an
  // unreadable allow-list directory or a bind failure. Allow-list entries that do not parse are
  // logged and skipped.
  bool start(std::string* error);
  // Serves until stop(). Call once, after a successful start().
  void run();
  void stop();
  // The allow-list is re-read by the run() thread at its next poll (SIGHUP).
  void requestReload();
  // The bound endpoint with the real port (ZMQ_LAST_ENDPOINT).
  std::string endpoint() const;
  // Reloads done so far (tests wait on it).
  uint64_t reloads() const { return reloads_.load(); }
  size_t allowedKeys() const { return allowed_keys_.load(); }

 private:
  void reload();
  void handleZap();
  void handleRouter();
  void handleRouterGrouped();
  void handleMessage(std::vector<zmq::message_t>& frames);
  // The checks every message gets before its type matters (authenticated host, frame count,
  // size, received bytes, zstd, relay key vs type). false: rejected (counted, logged).
  struct Screened {
    std::string routing_id, host, who;
    common::UnwrappedPayload plain;
    bool relay = false;
  };
  bool screen(std::vector<zmq::message_t>& frames, Screened* s);
  void dispatch(Screened& s);
  bool recvMessage(std::vector<zmq::message_t>* frames);
  void sendAcks();
  void reject(const std::string& reason, const std::string& who, const std::string& detail = "");
  void logLine(const std::string& line);

  Ingestor& ingestor_;
  Metrics& metrics_;
  // Acks of the current pass: (routing id, encoded ack), sent once the pass's group committed.
  std::vector<std::pair<std::string, std::string>> pending_acks_;
  const Clock& clock_;
  ZmqEndpointOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> zap_;
  std::unique_ptr<zmq::socket_t> router_;
  AllowList allow_;  // run() thread only (and start())
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_requested_{false};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<size_t> allowed_keys_{0};
  mutable std::mutex endpoint_mu_;
  std::string endpoint_;
  // Rate limit for log lines: a window of one minute on the steady clock.
  int64_t log_window_start_ns_ = 0;
  int log_in_window_ = 0;
  uint64_t log_suppressed_ = 0;
};

}  // namespace faultline::aggregator

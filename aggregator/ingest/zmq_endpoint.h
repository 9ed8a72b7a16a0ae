// The agents' ZeroMQ ingest endpoint (docs/wire-protocol.md, "Aggregator side"): a ROUTER socket,
// CurveZMQ server, with a ZAP handler that admits only public keys of the allow-list directory
// (allow_list.h) and names each connection by the key's hostname (ZAP User-Id). Every message is
// checked — frame count, size, type, decode limits, the claimed hostname against the
// authenticated one — before the Ingestor stores it; a batch is acked after it is committed (or
// found already stored). A bad message is rejected, counted in faultline_rejects_total{reason},
// logged (rate limited), and the loop goes on. A refused identity — a handshake ZAP denied, one
// that failed before ZAP (the peer's curve_server_public_key is not ours: a ZeroMQ socket monitor
// sees it, on a thread of its own so the peer's address is read while its connection is open), a
// key speaking for another host or site — is also counted in faultline_refusals_total{reason} and
// listed in the RefusalLog (refusals.h) with the peer's address and key.
//
// Threading: start() on any thread; then run() blocks the calling thread (normally a dedicated
// one) until stop(). stop(), requestReload() and endpoint() are thread-safe. The endpoint owns
// its zmq context (one ZAP handler per context). The Ingestor and Metrics must outlive it; they
// are called from the run() thread and, on the grouped path, from the store thread run() starts:
// while the store thread writes one pass, the run() thread (the only one on the sockets) reads,
// screens and decodes the next, and makes its payload texts; it sends a pass's acks and log
// lines once the store thread has committed it. Never throws.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "aggregator/clock.h"
#include "aggregator/ingest/allow_list.h"
#include "aggregator/ingest/connections.h"
#include "aggregator/ingest/ingestor.h"
#include "aggregator/ingest/refusals.h"
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
  // Where log lines go (default: stderr). Called from the ingest thread and the monitor thread,
  // one line at a time.
  std::function<void(const std::string&)> log;
  // Where refusals are listed (may be null: counted and logged only). Must outlive the endpoint.
  RefusalLog* refusals = nullptr;
  // Which hosts are connected (may be null). Must outlive the endpoint.
  ConnectionTracker* connections = nullptr;
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
  // The checks every message gets before its type matters (authenticated host, frame count,
  // size, received bytes, zstd, relay key vs type). false: rejected (counted, logged).
  struct Screened {
    std::string routing_id, host, who, peer;  // peer: the connection's address ("Peer-Address")
    common::UnwrappedPayload plain;
    bool relay = false;
  };
  // What storing messages leaves for the run() thread: acks (routing id, encoded ack) to send once
  // their group committed, and reject log lines.
  struct Outcome {
    std::vector<std::pair<std::string, std::string>> acks;
    std::vector<std::string> logs;
  };
  // One pass of the grouped writer: read, screened, decoded and its payload texts made on the
  // run() thread, stored on the store thread.
  struct Item {
    std::vector<zmq::message_t> frames;
    std::unique_ptr<Screened> s;
    std::optional<common::SymptomBatchData> batch;
    Store::Payloads payloads;
    uint64_t sequence = 0;
  };
  struct Pass {
    std::vector<Item> items;
    Outcome out;
  };

  void handleRouter();  // the legacy path, all on the run() thread
  // The grouped path. run() thread: read what is queued into a pass (at most max_pass messages),
  // wait for the store thread's previous pass (and send its acks), top the pass up with what
  // arrived meanwhile and hand it over.
  void readPass();
  // Reads, screens and decodes queued messages into `pass` until it holds max_pass (or none is
  // queued).
  void fillPass(Pass& pass);
  void storeLoop();           // the store thread
  void storePass(Pass& pass);  // store thread: one group (or several, when others wait)
  void awaitStore();          // run() thread: the pass being stored finished and its outcome sent
  void stopStore();           // run() thread: the pass being stored finished, the thread joined
  void finish(Outcome& out);  // run() thread: the log lines, then the acks
  bool screen(std::vector<zmq::message_t>& frames, Screened* s);
  void dispatch(Screened& s, Outcome& out);
  bool recvMessage(std::vector<zmq::message_t>* frames);
  // Run()-thread rejects are logged at once; note() counts one and keeps its line in `out`.
  void reject(const std::string& reason, const std::string& who, const std::string& detail = "");
  void note(Outcome& out, const std::string& reason, const std::string& who, const std::string& detail = "");
  static std::string rejectLine(const std::string& reason, const std::string& who, const std::string& detail);
  void logLine(const std::string& line);
  // A refused identity: counted (faultline_refusals_total, and faultline_rejects_total unless the
  // Ingestor counted it), listed, logged with its hint when new (and at 10, 100, ... repeats).
  void refuse(const Refusal& r, bool counted);
  // The monitor thread: the router's ZeroMQ events until stop.
  void monitorLoop();

  Ingestor& ingestor_;
  Metrics& metrics_;
  const Clock& clock_;
  ZmqEndpointOptions options_;
  zmq::context_t ctx_;
  std::unique_ptr<zmq::socket_t> zap_;
  std::unique_ptr<zmq::socket_t> router_;
  std::unique_ptr<zmq::socket_t> monitor_;  // PAIR: the router's events; the monitor thread's once run() starts
  std::thread monitor_thread_;
  AllowList allow_;  // run() thread only (and start())
  std::atomic<bool> stop_{false};
  std::atomic<bool> reload_requested_{false};
  std::atomic<uint64_t> reloads_{0};
  std::atomic<size_t> allowed_keys_{0};
  mutable std::mutex endpoint_mu_;
  std::string endpoint_;
  // The store thread (grouped path) and the pass it holds: handed over and taken back under
  // store_mu_; wake_fd_ (an eventfd in run()'s poll) says a pass is done.
  std::thread store_thread_;
  std::mutex store_mu_;
  std::condition_variable store_cv_;
  std::unique_ptr<Pass> store_pass_;  // null: the store thread is idle
  bool store_done_ = false;           // store_pass_ is stored, its outcome waits
  bool store_quit_ = false;
  int wake_fd_ = -1;
  // Rate limit for log lines: a window of one minute on the steady clock (under log_mu_).
  std::mutex log_mu_;
  int64_t log_window_start_ns_ = 0;
  int log_in_window_ = 0;
  uint64_t log_suppressed_ = 0;
};

}  // namespace faultline::aggregator

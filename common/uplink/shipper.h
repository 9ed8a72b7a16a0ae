// Ships an Outbox's messages to an aggregator over a ZeroMQ DEALER socket (the aggregator binds a
// ROUTER) and removes them from the outbox when acknowledged. Used by the agent (symptom batches
// from its spool) and by a site relay aggregator (relay batches to the central one).
//
// Delivery: at most `max_in_flight` batches are outstanding; a batch not acknowledged in time
// (injected Clock, steady time) is sent again — which covers a reconnect, since ZeroMQ drops the
// queue of a broken connection and ZMQ_IMMEDIATE refuses to queue while no connection is up. The
// aggregator deduplicates by (sender id, sequence), so resending is safe. "In time" adapts to the
// measured ack round trip between `ack_timeout_ns` and `ack_timeout_max_ns`, and backs off when
// acks are late (common/uplink/in_flight.h): a slow aggregator gets one probe, not every batch
// again.
// Order: by sequence, or critical severity first when `critical_first`. A token bucket caps the
// bytes per second. Heartbeats are best effort (dropped when they cannot be queued).
//
// Threading: everything runs on the io_context thread; the zmq socket's ZMQ_FD is waited on with
// a stream_descriptor (edge-triggered: ZMQ_EVENTS is re-checked after every send and receive). A
// socket monitor (inproc PAIR, its own ZMQ_FD) reports disconnects — every batch out goes again —
// and finished handshakes — sending resumes at once instead of at the next tick — and tells the
// LinkWatch why a link cannot be made (a refused key, a wrong server key, an unreachable endpoint).
// The zmq::context_t and Outbox must outlive the Shipper. No exception leaves a handler: zmq
// errors are counted and logged.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/uplink/in_flight.h"
#include "common/uplink/link_watch.h"
#include "common/uplink/outbox.h"
#include "common/uplink/token_bucket.h"

namespace faultline::uplink {

using common::Clock;

class Logger;

struct ShipperOptions {
  std::vector<std::string> endpoints;  // "tcp://aggregator:7400"; DEALER connects to each
  std::string agent_id;                // the sender's id: ZeroMQ routing id, checked in acks
  std::string batch_type = "batch";    // frame type of outbox messages ("relay" for a site relay)
  std::string heartbeat_type = "heartbeat";
  std::string log_name = "faultline-agent";  // prefix of log lines
  // CurveZMQ: all three set, or all empty (plain TCP, for tests and trusted networks).
  std::string curve_secret_key;   // Z85, 40 chars: this agent's secret key
  std::string curve_public_key;   // Z85: this agent's public key (derived when empty)
  std::string curve_server_key;   // Z85: the aggregator's public key
  int64_t ack_timeout_ns = 10'000'000'000;      // the timeout before any ack was measured, and the floor
  int64_t ack_timeout_max_ns = 60'000'000'000;  // the ceiling of the adaptive, backed-off timeout
  size_t max_in_flight = 16;
  bool critical_first = true;
  uint64_t rate_bytes_per_sec = 0;  // 0 = unlimited
  uint64_t rate_burst_bytes = 256 << 10;
  int tick_ms = 1000;               // resend/timeout check period (real timer)
  // zstd on top of packing: messages go out as "<type>+zstd" ("batch+zstd", "heartbeat+zstd")
  // when that is smaller (tiny heartbeats often are not). The spool keeps the packed bytes.
  bool zstd = false;
  int zstd_level = 3;
  // Why the link cannot be made (link_watch.h): what the aggregator files this sender's key as,
  // how long connects may fail before a line, and where the lines go (default: the Logger).
  std::string key_file = "HOST.pub";
  int64_t unreachable_after_ns = 30'000'000'000;
  // After a refused key or a handshake protocol error libzmq (4.3) does not reconnect by itself:
  // the endpoints are disconnected and connected again this often, so a key filed on the
  // aggregator afterwards gets in without restarting the sender.
  int refused_retry_ms = 30000;
  std::function<void(int, const std::string&)> link_log;
};

struct ShipperStats {
  uint64_t sent = 0;        // batch sends, including resends
  uint64_t resent = 0;      // batches released to be sent again
  uint64_t timed_out = 0;   // batches found unacknowledged past their timeout
  uint64_t disconnects = 0;  // connections lost (their batches out are sent again)
  uint64_t acked = 0;
  int64_t last_ack_ns = 0;  // realtime of the last ack (0: none yet)
  uint64_t bytes_sent = 0;  // payload bytes of batches and heartbeats, as sent
  uint64_t bytes_packed = 0;  // the same payloads before zstd (== bytes_sent without it)
  uint64_t compressed = 0;    // messages sent with the "+zstd" type
  uint64_t heartbeats = 0;
  uint64_t heartbeats_dropped = 0;
  uint64_t bad_messages = 0;
  uint64_t throttled = 0;   // times the rate cap delayed a send
};

class Shipper {
 public:
  Shipper(boost::asio::io_context& io, zmq::context_t& zmq, const Clock& clock, Outbox& outbox,
          ShipperOptions options, Logger* log = nullptr);
  ~Shipper();

  // Creates the socket, connects, starts waiting. Returns false + error on a bad endpoint/key.
  bool start(std::string* error);
  void stop();
  // New batches are in the spool: send what the window and rate allow.
  void kick();
  // Times out unacknowledged sends so they are resent; called by the tick timer and by tests.
  void tick();
  // Best effort: false (and counted in heartbeats_dropped) when it could not be queued.
  bool sendHeartbeat(const std::string& payload);
  // Reads pending acks now (tests call this instead of waiting for the fd).
  bool socketWritable();  // ZMQ_POLLOUT: a send would be taken now
  void processIncoming();

  const ShipperStats& stats() const { return stats_; }
  // The state of the link to each endpoint, as the socket's events tell it.
  const LinkWatch& link() const { return link_; }
  size_t inFlight() const { return in_flight_.size(); }
  // What a batch sent now waits for its ack before it may go again.
  int64_t ackTimeoutNs() const { return in_flight_.timeoutNs(); }

 private:
  void releaseSockets();
  void armFd();
  void armMonitor();
  void processMonitor();
  void armTick();
  void armThrottle(int64_t wait_ns);
  // A refused handshake: connect the endpoints that are not up again after refused_retry_ms.
  void armRefusedRetry();
  bool sendFrames(std::string_view type, const std::string& payload);
  // Sends `packed` as `type` or `type+zstd`; returns the bytes sent (0: not queued).
  size_t sendMessage(const std::string& type, const std::string& packed);

  boost::asio::io_context& io_;
  zmq::context_t& zmq_;
  const Clock& clock_;
  Outbox& outbox_;
  ShipperOptions options_;
  Logger* log_;
  std::unique_ptr<zmq::socket_t> socket_;
  boost::asio::posix::stream_descriptor fd_;  // ZMQ_FD, owned by the socket: released
  std::unique_ptr<zmq::socket_t> monitor_;    // PAIR receiving socket_'s events
  boost::asio::posix::stream_descriptor monitor_fd_;
  boost::asio::steady_timer tick_timer_;
  boost::asio::steady_timer throttle_timer_;
  boost::asio::steady_timer retry_timer_;
  bool retry_armed_ = false;
  bool throttled_ = false;
  bool waiting_ = false;
  bool monitor_waiting_ = false;
  int rekicks_ = 0;    // kicks posted in a row because the pipe arrived after a refused send
  bool held_ = false;  // a connection was lost: no sends until a handshake or the next tick
  bool stopped_ = true;
  TokenBucket bucket_;
  InFlight in_flight_;
  ShipperStats stats_;
  LinkWatch link_;
  uint64_t acked_at_up_ = 0;  // stats_.acked when a handshake last succeeded
};

}  // namespace faultline::uplink

// Simulated faultline agents for the aggregator load bench: each is what faultline-agent is on
// the wire (common/uplink/shipper.cpp) — a DEALER with routing id = agent id = hostname, its own
// CurveZMQ key pair, ZMQ_IMMEDIATE, linger 0, reconnect 0.5 s backing off to 30 s, at most
// `in_flight` unacknowledged batches, resends timed by the agent's own retransmission timer
// (common/uplink/in_flight.h: `ack_timeout_ns` until acks are measured, adaptive and backed off up
// to `ack_timeout_max_ns`; or, with `fixed_timeout`, every batch again after `ack_timeout_ns`, as
// agents did before), and a heartbeat every `heartbeat_ns` — but with its batches encoded up front
// (the agent's spool) and thousands of them served by one thread.
//
// Threading: one thread owns a SimFleet and its sockets; every call blocks that thread (epoll over
// every socket's ZMQ_FD). The zmq context must outlive the SimFleet and allow enough sockets
// (ZMQ_MAX_SOCKETS). Never throws on network trouble: sends that find no connection are retried.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>
#include <zmq.hpp>

#include "common/protocol.h"
#include "common/uplink/in_flight.h"

namespace faultline::bench {

int64_t steadyNs();
int64_t wallNs();

struct SimAgent {
  std::string host;  // also the agent id and routing id, like the real agent's default
  std::string boot_id;
  std::string public_key, secret_key;  // Z85
  std::string endpoint;                // "" = the fleet's (SimFleetOptions::endpoint)
  common::NodeInventory inventory;     // sent with the first heartbeat
  std::vector<std::string> batches;    // encoded SymptomBatch payloads; sequence = index + 1
  std::vector<uint32_t> batch_symptoms;

  // State, kept by the SimFleet.
  std::unique_ptr<zmq::socket_t> sock;
  bool first_heartbeat_sent = false;
  int64_t connected_ns = 0;  // steady time the first heartbeat could go out (handshake done)
  bool active = false;       // in the running phase
  size_t next = 0;           // next batch index to send
  size_t limit = 0;          // the running phase sends batches [next, limit)
  size_t acked = 0;
  std::unique_ptr<uplink::InFlight> in_flight;  // created by add()
  std::map<uint64_t, int64_t> first_sent_ns;     // sequence -> first send, for the ack latency
  std::map<uint64_t, int64_t> last_sent_ns;      // with fixed_timeout only: sequence -> last send
  std::vector<uint64_t> again;                   // released by the timer, to be sent again
  int64_t next_heartbeat_ns = 0;
};

// What one phase (run()) saw from the agents' side.
struct PhaseStats {
  size_t agents = 0;
  uint64_t batches = 0, symptoms = 0, total_batches = 0;  // acked / to send
  uint64_t resends = 0, duplicate_acks = 0, bad_messages = 0, heartbeats = 0;
  std::vector<int64_t> latency_ns;  // first send -> ack, per batch
  int64_t start_ns = 0, last_ack_ns = 0;
  bool complete() const { return batches == total_batches; }
  double seconds() const { return double(last_ack_ns - start_ns) / 1e9; }
};

struct SimFleetOptions {
  std::string endpoint;    // the aggregator's ingest endpoint
  std::string server_key;  // its Curve public key, Z85
  std::string ruleset_version;
  size_t in_flight = 16;                     // the agent's max_in_flight
  int64_t ack_timeout_ns = 10'000'000'000;      // the agent's ack_timeout_ms
  int64_t ack_timeout_max_ns = 60'000'000'000;  // the agent's ack_timeout_max_ms
  bool fixed_timeout = false;                   // resend every batch after ack_timeout_ns (the old agent)
  int64_t heartbeat_ns = 30'000'000'000;     // the agent's heartbeat_interval_s
};

class SimFleet {
 public:
  SimFleet(zmq::context_t& ctx, SimFleetOptions options);
  ~SimFleet();  // closes the sockets (before the context goes)
  SimFleet(const SimFleet&) = delete;
  SimFleet& operator=(const SimFleet&) = delete;

  // Takes an agent (without a socket); returns its index.
  size_t add(SimAgent agent);
  SimAgent& agent(size_t i) { return agents_[i]; }

  // Creates agent i's socket and connects it; the handshake runs in the background.
  void connect(size_t i);
  // Sends each agent's first heartbeat (with its inventory) as soon as its connection is up
  // (ZMQ_IMMEDIATE refuses it before the TCP connect, Curve handshake and ZAP are done). false
  // when the deadline (steady ns) passes first.
  bool sendFirstHeartbeats(const std::vector<size_t>& which, int64_t deadline_ns);
  // Every agent in `which` sends its next `batches` batches; returns when all are acked (and the
  // acks of resends are in), or at the deadline. Agent k starts at k/|which| * spread after the
  // start (spread 0: all at once, a cascade's worst case).
  PhaseStats run(const std::vector<size_t>& which, size_t batches, int64_t spread_ns, int64_t deadline_ns);

 private:
  bool sendFrames(SimAgent& a, std::string_view type, const std::string& payload);
  bool sendHeartbeat(SimAgent& a, bool first);
  bool topUp(SimAgent& a);
  void service(size_t i);
  void onMessage(SimAgent& a, std::string_view type, std::string_view payload);
  void waitAndDrain(int timeout_ms);
  void scan(const std::vector<size_t>& which, int64_t now);

  zmq::context_t& ctx_;
  SimFleetOptions o_;
  int ep_;
  std::vector<SimAgent> agents_;
  PhaseStats* cur_ = nullptr;  // the running phase, if any
  bool connecting_ = false;
  size_t first_heartbeats_ = 0;
};

}  // namespace faultline::bench

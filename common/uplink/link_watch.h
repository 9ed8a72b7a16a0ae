// Why an uplink cannot deliver, in words an operator can act on. The Shipper feeds it its DEALER
// socket's ZeroMQ monitor events; it keeps each endpoint's state and writes a line when the link
// cannot be made — the aggregator refused this sender's key (ZAP), the connection closed during
// the CurveZMQ handshake (curve_server_public_key is not the aggregator's key), the peer speaks
// another mechanism, the endpoint cannot be reached for a while — and when it comes back.
//
// Each kind of trouble is written once when it starts and then at most once per `repeat_ns` per
// endpoint with the attempts since, so an agent retrying every 30 s for a day writes a line every
// ten minutes, not three thousand. Pure apart from the injected clock; not thread-safe (the
// Shipper's io thread).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/clock.h"

namespace faultline::uplink {

class LinkWatch {
 public:
  enum class State {
    kConnecting,        // no attempt finished yet
    kHandshaking,       // TCP connected, handshake under way
    kUp,                // handshake succeeded
    kUnreachable,       // connects fail (refused, timed out, no route)
    kKeyRefused,        // the aggregator's ZAP refused this sender's key
    kHandshakeClosed,   // the connection closed during the handshake (wrong server key, not an aggregator)
    kProtocolError,     // the peer speaks another mechanism or protocol
    kLost,              // was up, connection lost, reconnecting
  };
  struct Options {
    std::string name = "faultline-agent";  // log prefix
    // What the aggregator files this sender's key as, for the hint ("gpu-01.pub", "relays/edge1.pub").
    std::string key_file = "HOST.pub";
    bool curve = true;                          // the link uses CurveZMQ
    int64_t unreachable_after_ns = 30'000'000'000;  // connect failures this long before a line
    int64_t repeat_ns = 600'000'000'000;            // the same trouble again, at most this often
  };
  // `sink(priority, line)`: syslog priorities (3 error, 4 warning, 6 info).
  using Sink = std::function<void(int, const std::string&)>;

  LinkWatch(const common::Clock& clock, Options options, Sink sink);
  // One monitor event (ZMQ_EVENT_*), its value and the endpoint it names.
  void onEvent(uint16_t event, uint32_t value, const std::string& endpoint);
  // Batches timed out while a link was up and not one was acknowledged since it came up: the
  // aggregator takes the connection but refuses what comes over it (a relay key filed under
  // another site name, a key filed under another hostname). Written, like a handshake refusal,
  // once three batches timed out so, then at most every repeat_ns.
  void unacknowledged(uint64_t timed_out);
  State state(const std::string& endpoint) const;
  // Failed attempts since the endpoint's link was last up.
  uint64_t failures(const std::string& endpoint) const;
  static const char* stateName(State s);

 private:
  struct Link {
    State state = State::kConnecting;
    bool attempt_connected = false;  // the current attempt reached TCP CONNECTED
    int64_t lost_logged_ns = 0;      // the last "connection lost" line (kept across reconnects)
    int64_t trouble_since_ns = 0;    // first failure since the link was last up (0: none)
    uint64_t failures = 0;           // failed attempts since the link was last up
    State logged_state = State::kConnecting;  // the trouble last written, and when
    int64_t logged_ns = 0;
    uint64_t failures_at_log = 0;
  };
  // The link is in trouble `s`: write `line` when it is new or `repeat_ns` has passed.
  void trouble(Link& link, const std::string& endpoint, State s, int priority, const std::string& line);
  bool anyUp() const;

  const common::Clock& clock_;
  Options options_;
  Sink sink_;
  std::map<std::string, Link> links_;
  int64_t unacked_logged_ns_ = 0;
  uint64_t unacked_ = 0;  // batches timed out unacknowledged since the last line about it
};

}  // namespace faultline::uplink

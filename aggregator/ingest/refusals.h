// Who was refused at the agents' ingest, and why (docs/aggregator.md, "Refused connections"): a
// handshake the ZAP handler denied (a key not in the allow dir, a peer not speaking CURVE), a
// handshake that failed before ZAP (the peer's curve_server_public_key is not this aggregator's
// key: its HELLO does not open), a protocol error, and an authenticated key speaking for another
// host or site. The ingest endpoint records them; `GET /agents/refusals`, `faultline agents` and
// the dashboard's agents page list them, so an operator sees why an agent is missing without
// reading two machines' logs.
//
// Repeats of one refusal (same reason, peer address without its port, key and claimed name: an
// agent retrying with backoff) are one entry with a count and first/last times. Bounded: the
// entries last refused longest ago give way. In memory only — since this process started.
//
// Thread-safe (one mutex): the ingest thread, its ZeroMQ monitor thread and the HTTP thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace faultline::aggregator {

struct Refusal {
  std::string reason;  // "unknown key", "wrong server key", "not CURVE", "protocol error",
                       // "hostname mismatch", "relay: site mismatch"
  std::string peer;    // the peer's address ("10.1.2.3"), "" when it could not be learned
  std::string key;     // the client's public key (Z85) when the handshake got that far
  std::string host;    // the host (or relay:SITE) the key is filed under, when authenticated
  std::string detail;  // what was claimed ("batch claims gpu-02")
  int64_t first_ns = 0, last_ns = 0;  // realtime
  uint64_t count = 0;
};

// What an operator should check for a refusal's reason (one sentence).
std::string refusalHint(const std::string& reason);

class RefusalLog {
 public:
  explicit RefusalLog(size_t capacity = 64) : capacity_(capacity == 0 ? 1 : capacity) {}
  // Records one refusal at `now_ns`; returns its entry's count (1: new, not a repeat of a listed one).
  uint64_t record(const Refusal& r, int64_t now_ns);
  // Most recent first.
  std::vector<Refusal> recent() const;
  uint64_t total() const;

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  std::deque<Refusal> entries_;  // most recent first
  uint64_t total_ = 0;
};

}  // namespace faultline::aggregator

// The batches a sender has out and when each goes again: an adaptive acknowledgement timeout with
// exponential back-off, after TCP's retransmission timer (RFC 6298), so that a slow receiver is
// not buried under resends.
//
// Why: with a fixed timeout, an aggregator whose queue takes longer to drain than the timeout
// gets every outstanding batch of every agent a second time, then a third, and the duplicates
// are more load on the one thing that is already behind (seen in bench/aggregator_load at 9,800
// agents: 55,293 resends once acks took 38 s).
//
// How:
// - The timeout is SRTT + 4·RTTVAR from acks of batches sent once (Karn: an ack of a batch sent
//   twice could answer either send), never below `min_timeout_ns`, never above `max_timeout_ns`.
//   Before the first measured ack it is `min_timeout_ns` (the configured ack timeout).
// - When batches time out, only the oldest goes again (a probe) and the timeout doubles; the
//   others wait one more (backed-off) timeout. A receiver that is only slow acks them meanwhile:
//   one duplicate per agent and timeout, not one per batch.
// - Batches lost with a connection (ZeroMQ drops the queue of a broken connection; a receiver
//   that died lost its own) are not left to time out: the caller sees the disconnect and calls
//   lost(), and everything out goes again at once.
// - A measured ack resets the back-off.
//
// Times are steady nanoseconds from the caller's clock (tests inject one). Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace faultline::uplink {

class InFlight {
 public:
  InFlight(int64_t min_timeout_ns, int64_t max_timeout_ns);

  // `sequence` went out at `now`: a first send, or one that due()/acked() asked for.
  void sent(uint64_t sequence, int64_t now);
  // Its ack arrived. false when it was not out (a second ack of a batch sent twice).
  bool acked(uint64_t sequence, int64_t now);
  // The timer: appends to *again what to send again now (one probe when batches timed out), and
  // backs off when anything timed out. Returns how many batches had timed out.
  size_t due(int64_t now, std::vector<uint64_t>* again);
  // The connection went down: every batch out is appended to *again (in sequence order).
  void lost(std::vector<uint64_t>* again);
  // A batch that cannot be sent any more (acknowledged by other means, dropped): forget it.
  void forget(uint64_t sequence);

  bool contains(uint64_t sequence) const { return out_.count(sequence) > 0; }
  size_t size() const { return out_.size(); }
  template <typename F>
  void forEach(F&& f) const {
    for (const auto& [seq, e] : out_) f(seq);
  }

  // The timeout a batch sent now gets (back-off included).
  int64_t timeoutNs() const;
  int64_t smoothedRttNs() const { return srtt_ns_; }  // 0 before the first measured ack
  int backoff() const { return backoff_; }

 private:
  struct Entry {
    int64_t sent_ns = 0;      // the last send
    int64_t deadline_ns = 0;  // when it times out
    bool resent = false;      // sent more than once: its ack measures nothing
  };

  int64_t min_ns_, max_ns_;
  int64_t srtt_ns_ = 0, rttvar_ns_ = 0;
  int backoff_ = 1;
  std::map<uint64_t, Entry> out_;
  std::set<uint64_t> again_;  // released to go again, not sent yet
};

}  // namespace faultline::uplink

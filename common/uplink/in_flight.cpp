#include "common/uplink/in_flight.h"

#include <algorithm>

namespace faultline::uplink {

InFlight::InFlight(int64_t min_timeout_ns, int64_t max_timeout_ns)
    : min_ns_(std::max<int64_t>(min_timeout_ns, 1)), max_ns_(std::max(max_timeout_ns, min_ns_)) {}

int64_t InFlight::timeoutNs() const {
  int64_t base = srtt_ns_ == 0 ? min_ns_ : std::clamp(srtt_ns_ + 4 * rttvar_ns_, min_ns_, max_ns_);
  // base * backoff, without overflow: backoff only doubles while the product is below max.
  return std::min(max_ns_, base * backoff_);
}

void InFlight::sent(uint64_t sequence, int64_t now) {
  bool resent = again_.erase(sequence) > 0 || out_.count(sequence) > 0;
  out_[sequence] = Entry{now, now + timeoutNs(), resent};
}

bool InFlight::acked(uint64_t sequence, int64_t now) {
  again_.erase(sequence);  // released for a resend, but the first send's ack came after all
  auto it = out_.find(sequence);
  if (it == out_.end()) return false;
  const Entry e = it->second;
  out_.erase(it);
  if (!e.resent) {
    // RFC 6298 2.2/2.3 with alpha = 1/8, beta = 1/4.
    int64_t r = std::max<int64_t>(now - e.sent_ns, 0);
    if (srtt_ns_ == 0) {
      srtt_ns_ = std::max<int64_t>(r, 1);
      rttvar_ns_ = r / 2;
    } else {
      int64_t dev = srtt_ns_ > r ? srtt_ns_ - r : r - srtt_ns_;
      rttvar_ns_ = rttvar_ns_ - rttvar_ns_ / 4 + dev / 4;
      srtt_ns_ = std::max<int64_t>(srtt_ns_ - srtt_ns_ / 8 + r / 8, 1);
    }
    backoff_ = 1;
  }
  return true;
}

size_t InFlight::due(int64_t now, std::vector<uint64_t>* again) {
  size_t timed_out = 0;
  uint64_t probe = 0;
  for (const auto& [seq, e] : out_)
    if (e.deadline_ns <= now && timed_out++ == 0) probe = seq;  // the map is in sequence order
  if (timed_out == 0) return 0;
  if (timeoutNs() < max_ns_ && backoff_ < (1 << 20)) backoff_ *= 2;
  out_.erase(probe);
  again_.insert(probe);
  again->push_back(probe);
  const int64_t deadline = now + timeoutNs();
  for (auto& [seq, e] : out_)
    if (e.deadline_ns <= now) e.deadline_ns = deadline;
  return timed_out;
}

void InFlight::lost(std::vector<uint64_t>* again) {
  for (const auto& [seq, e] : out_) {
    again_.insert(seq);
    again->push_back(seq);
  }
  out_.clear();
}

void InFlight::forget(uint64_t sequence) {
  out_.erase(sequence);
  again_.erase(sequence);
}

}  // namespace faultline::uplink

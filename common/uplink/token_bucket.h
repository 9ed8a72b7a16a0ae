// Byte-rate cap for the link to the aggregator (low-bandwidth edge mode). Pure; time comes from
// the caller (steady ns), so tests drive it without sleeping. Not thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>

namespace faultline::uplink {

class TokenBucket {
 public:
  // rate 0 = unlimited. A message larger than `burst` is let through when the bucket is full
  // (the balance goes negative), so nothing is stuck forever.
  TokenBucket(uint64_t bytes_per_sec, uint64_t burst_bytes, int64_t now_ns)
      : rate_(bytes_per_sec), burst_(static_cast<double>(std::max<uint64_t>(burst_bytes, 1))),
        tokens_(burst_), last_(now_ns) {}

  bool unlimited() const { return rate_ == 0; }

  // Takes `bytes` if allowed now.
  bool tryTake(uint64_t bytes, int64_t now_ns) {
    if (unlimited()) return true;
    refill(now_ns);
    double need = std::min(static_cast<double>(bytes), burst_);
    if (tokens_ < need) return false;
    tokens_ -= static_cast<double>(bytes);
    return true;
  }
  // Takes `bytes` unconditionally (after a send that waitNs() allowed).
  void take(uint64_t bytes, int64_t now_ns) {
    if (unlimited()) return;
    refill(now_ns);
    tokens_ -= static_cast<double>(bytes);
  }
  // Nanoseconds until tryTake(bytes) can succeed (0 = now).
  int64_t waitNs(uint64_t bytes, int64_t now_ns) {
    if (unlimited()) return 0;
    refill(now_ns);
    double need = std::min(static_cast<double>(bytes), burst_) - tokens_;
    if (need <= 0) return 0;
    return static_cast<int64_t>(need * 1e9 / static_cast<double>(rate_)) + 1;
  }

 private:
  void refill(int64_t now_ns) {
    if (now_ns > last_) {
      tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_) * static_cast<double>(rate_) / 1e9);
      last_ = now_ns;
    }
  }
  uint64_t rate_;
  double burst_;
  double tokens_;
  int64_t last_;
};

}  // namespace faultline::uplink

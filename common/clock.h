// Time behind an interface so tests set it by hand and never sleep (agent and aggregator).
//
// nowNs() is UTC wall-clock time (stamps, windows, heartbeat ages); steadyNs() is monotonic
// (timeouts, token bucket, latency). Both implementations are thread-safe (a test may move a
// ManualClock while a server thread reads it).
#pragma once

#include <atomic>
#include <cstdint>
#include <ctime>

namespace faultline::common {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual int64_t nowNs() const = 0;
  virtual int64_t steadyNs() const = 0;
};

class SystemClock final : public Clock {
 public:
  int64_t nowNs() const override { return read(CLOCK_REALTIME); }
  int64_t steadyNs() const override { return read(CLOCK_MONOTONIC); }

 private:
  static int64_t read(clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
  }
};

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ns = 1'700'000'000'000'000'000, int64_t steady_ns = 1'000'000'000)
      : now_(now_ns), steady_(steady_ns) {}
  int64_t nowNs() const override { return now_.load(); }
  int64_t steadyNs() const override { return steady_.load(); }
  void advance(int64_t ns) {
    now_ += ns;
    steady_ += ns;
  }

 private:
  std::atomic<int64_t> now_;
  std::atomic<int64_t> steady_;
};

}  // namespace faultline::common

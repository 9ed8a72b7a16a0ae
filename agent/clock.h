// Time as the agent sees it, behind an interface so tests drive it by hand and never sleep.
//
// nowNs() is UTC wall-clock time (stamps, symptom windows); steadyNs() is monotonic (timeouts,
// token bucket). Implementations are cheap and thread-compatible; ManualClock is not thread-safe.
#pragma once

#include <cstdint>
#include <ctime>

namespace faultline::agent {

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

// Starts at the given instant; moves only when the test says so.
class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t now_ns = 1'700'000'000'000'000'000, int64_t steady_ns = 1'000'000'000)
      : now_(now_ns), steady_(steady_ns) {}
  int64_t nowNs() const override { return now_; }
  int64_t steadyNs() const override { return steady_; }
  void advance(int64_t ns) {
    now_ += ns;
    steady_ += ns;
  }

 private:
  int64_t now_;
  int64_t steady_;
};

}  // namespace faultline::agent

// A daemon's own logging (the agent, the relay uplink): one line per event on stderr with an
// sd-daemon priority prefix (journald adds the unit and the time), rate-limited so a storm of bad
// input cannot turn the daemon into a log source.
//
// Not thread-safe: used from the io_context thread only. Lines over the budget of the current
// minute are counted and summarised in the first line of the next minute.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>

#include "common/clock.h"

namespace faultline::uplink {

using common::Clock;

class Logger {
 public:
  // `per_minute` lines at most; 0 disables logging entirely (tests).
  Logger(const Clock& clock, int per_minute, std::string name = "faultline-agent")
      : clock_(clock), per_minute_(per_minute), name_(std::move(name)) {}

  template <typename... Args>
  void info(fmt::format_string<Args...> f, Args&&... args) {
    write(6, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void warn(fmt::format_string<Args...> f, Args&&... args) {
    write(4, fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args>
  void error(fmt::format_string<Args...> f, Args&&... args) {
    write(3, fmt::format(f, std::forward<Args>(args)...));
  }
  uint64_t suppressed() const { return suppressed_total_; }

 private:
  void write(int priority, const std::string& line);

  const Clock& clock_;
  int per_minute_;
  std::string name_;
  int64_t minute_start_ = 0;
  int used_ = 0;
  uint64_t suppressed_ = 0;
  uint64_t suppressed_total_ = 0;
};

}  // namespace faultline::uplink

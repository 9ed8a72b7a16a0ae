#include "common/uplink/log.h"

#include <cstdio>

namespace faultline::uplink {

void Logger::write(int priority, const std::string& line) {
  if (per_minute_ <= 0) return;
  int64_t now = clock_.steadyNs();
  if (now - minute_start_ >= 60'000'000'000) {
    minute_start_ = now;
    used_ = 0;
    if (suppressed_ > 0) {
      // "<N>" prefixes are sd-daemon priorities: journald reads them from a service's stderr.
      std::fprintf(stderr, "<4>%s: %llu log lines suppressed by the rate limit\n", name_.c_str(),
                   static_cast<unsigned long long>(suppressed_));
      suppressed_ = 0;
    }
  }
  if (used_ >= per_minute_) {
    ++suppressed_;
    ++suppressed_total_;
    return;
  }
  ++used_;
  std::fprintf(stderr, "<%d>%s\n", priority, line.c_str());
}

}  // namespace faultline::uplink

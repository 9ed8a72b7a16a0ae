// The aggregator uses the shared clock interface (common/clock.h).
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace faultline::aggregator {

using common::Clock;
using common::ManualClock;
using common::SystemClock;

inline constexpr int64_t kSecondNs = 1'000'000'000;

}  // namespace faultline::aggregator

// The agent uses the shared clock interface (common/clock.h).
#pragma once

#include "common/clock.h"

namespace faultline::agent {

using common::Clock;
using common::ManualClock;
using common::SystemClock;

}  // namespace faultline::agent

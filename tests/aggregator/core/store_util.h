// Store helpers for the aggregator core tests (test_util.h is shared with the agent's tests, which
// do not link the store).
#pragma once

#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "aggregator/store/store.h"

namespace faultline::aggregator::testing {

inline std::unique_ptr<Store> openStore(const std::string& path, const Clock& clock) {
  std::string error;
  auto store = Store::open(path, clock, {}, &error);
  INFO(error);
  REQUIRE(store);
  return store;
}

}  // namespace faultline::aggregator::testing

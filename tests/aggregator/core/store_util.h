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

// Records a job (start/end 0 and nodes "" keep what is stored) as the prolog/epilog would.
inline void recordTestJob(Store& store, const std::string& id, const std::string& nodes, int64_t start, int64_t end,
                          const std::string& state) {
  JobUpdate u;
  u.job_id = id;
  u.nodelist = nodes;
  u.start_ns = start;
  u.end_ns = end;
  u.state = state;
  u.source = "test";
  std::string error;
  auto row = store.recordJob(u, &error);
  INFO(error);
  REQUIRE(row);
}

}  // namespace faultline::aggregator::testing

#include <catch2/catch.hpp>

#include "common/uplink/token_bucket.h"

using namespace faultline::uplink;

TEST_CASE("token bucket: caps the byte rate, lets an oversized message through when full", "[protocol]") {
  int64_t t = 0;
  TokenBucket b(1000, 2000, t);
  CHECK(b.tryTake(1500, t));
  CHECK_FALSE(b.tryTake(1000, t));
  CHECK(b.waitNs(1000, t) == 500'000'001);
  t += 500'000'001;
  CHECK(b.tryTake(1000, t));
  t += 10'000'000'000;
  CHECK(b.tryTake(5000, t));  // > burst: allowed once the bucket is full
  CHECK_FALSE(b.tryTake(1, t));
  TokenBucket unlimited(0, 0, 0);
  CHECK(unlimited.tryTake(1 << 30, 0));
}

// Inputs the fuzz targets (tests/fuzz, docs/testing.md) found in the aggregator, as unit tests.
#include <catch2/catch.hpp>

#include "aggregator/http/api.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

TEST_CASE("fuzz: GET /jobs?offset= checks the number's end inside the live string (fuzz_http)", "[fuzz]") {
  // The check read strtoull's end pointer inside a destroyed temporary: stack-use-after-scope
  // under ASan (`make test-asan`), garbage answers otherwise.
  TempDir dir;
  ManualClock clock;
  std::string error;
  auto store = Store::open(dir.file("f.db"), clock, {}, &error);
  REQUIRE(store);
  Metrics metrics;
  Api api(*store, nullptr, metrics, clock, ApiOptions{});
  api.setStoreFile(dir.file("f.db"));
  CHECK(api.handle({"GET", "/jobs?offset=10&since=2024-06-01T00:00:00Z", "", ""}).status == 200);
  CHECK(api.handle({"GET", "/jobs?offset=10x", "", ""}).status == 400);
  CHECK(api.handle({"GET", "/jobs?offset=", "", ""}).status == 200);
}

TEST_CASE("fuzz: a query parameter that is not UTF-8 gets a JSON answer, not an exception (fuzz_http)", "[fuzz]") {
  // nlohmann::json::dump threw type_error 316 on the echoed bytes; the server answered 500.
  TempDir dir;
  ManualClock clock;
  std::string error;
  auto store = Store::open(dir.file("f.db"), clock, {}, &error);
  REQUIRE(store);
  Metrics metrics;
  Api api(*store, nullptr, metrics, clock, ApiOptions{});
  for (const char* target : {"/symptoms?node=%F2%F2gpu-a02&since=30m", "/nodes/gpu%FF", "/jobs/%C3"}) {
    INFO(target);
    HttpResponse r;
    REQUIRE_NOTHROW(r = api.handle({"GET", target, "", ""}));
    CHECK(r.status < 500);
    CHECK_FALSE(nlohmann::json::parse(r.body, nullptr, false).is_discarded());
  }
}

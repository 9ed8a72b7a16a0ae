// Inputs the fuzz targets (tests/fuzz, docs/testing.md) found in the aggregator, as unit tests.
#include <catch2/catch.hpp>

#include "aggregator/http/api.h"
#include "aggregator/query/query.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

// The API over an empty store file, with the dashboard's reads.
struct EmptyApi {
  TempDir dir;
  ManualClock clock;
  Metrics metrics;
  std::unique_ptr<Store> store;
  std::unique_ptr<Api> api;
  EmptyApi() {
    std::string error;
    store = Store::open(dir.file("f.db"), clock, {}, &error);
    REQUIRE(store);
    api = std::make_unique<Api>(*store, nullptr, metrics, clock, ApiOptions{});
    api->setStoreFile(dir.file("f.db"));
  }
  HttpResponse get(const std::string& target) { return api->handle({"GET", target, "", ""}); }
};

}  // namespace

TEST_CASE("fuzz: GET /jobs?offset= checks the number's end inside the live string (fuzz_http)", "[fuzz]") {
  // The check read strtoull's end pointer inside a destroyed temporary: stack-use-after-scope
  // under ASan (`make test-asan`), garbage answers otherwise.
  EmptyApi a;
  CHECK(a.get("/jobs?offset=10&since=2024-06-01T00:00:00Z").status == 200);
  CHECK(a.get("/jobs?offset=10x").status == 400);
  CHECK(a.get("/jobs?offset=").status == 200);
}

TEST_CASE("fuzz: a path or query parameter that is not UTF-8 gets a 400, not an exception (fuzz_http)", "[fuzz]") {
  // The store's JSON writer (nlohmann::json::dump) threw type_error 316 on such a node name; the
  // server answered 500.
  EmptyApi a;
  for (const char* target : {"/symptoms?node=%F2%F2gpu-a02&since=30m", "/nodes/gpu%FF", "/jobs/%C3"}) {
    INFO(target);
    HttpResponse r;
    REQUIRE_NOTHROW(r = a.get(target));
    CHECK(r.status == 400);
    CHECK(nlohmann::json::parse(r.body)["error"] == "the path or a query parameter is not UTF-8");
  }
  CHECK(a.get("/nodes/gpu-%C3%A9").status == 404);  // UTF-8 is fine: an unknown node
}

TEST_CASE("fuzz: a relative since longer than the epoch is the epoch, not an overflow (fuzz_http)", "[fuzz]") {
  // since=3111110d: 3111110 x 86400 s fits in 64 bits, its nanoseconds did not (signed overflow
  // under UBSan). It reaches back before 1970: every row.
  const int64_t now = 1'700'000'000LL * 1'000'000'000;
  CHECK(parseSince("3111110d", now) == 0);
  CHECK(parseSince("99999999999w", now) == 0);
  CHECK(parseSince("7d", now) == now - 7LL * 86400 * 1'000'000'000);
  EmptyApi a;
  CHECK(a.get("/nodes?rank=1&since=3111110d&min_jobs=2").status == 200);
}

// libFuzzer target for the HTTP API (aggregator/http/api.h): the request's method, target (path
// and query string) and body, handed to Api::handle as the server does after reading them off
// the socket. Input: "METHOD TARGET\nBODY" (no newline: a GET of that target, no body); writes
// carry the write token. A real store behind it (fuzz_aggregator.h), seeded with a failed job.
//
// Properties: no crash, hang, leak or sanitizer report; no exception out of handle() (the server
// would answer 500 "internal error" to a client's bad input); every status a 2xx/3xx/4xx or the
// store's 503; every JSON answer parses.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_aggregator.h"

namespace {

using faultline::fuzz::fail;

void seedJob(faultline::fuzz::Aggregator& a) {
  a.call("POST", "/jobs/4812345/start", R"({"nodes": "gpu-a[01-02]", "time": "2024-06-01T10:00:00Z", "ntasks_per_node": 4})");
  a.call("POST", "/jobs/4812345/end", R"({"exit_code": "1:0", "time": "2024-06-01T10:42:51Z"})");
}

faultline::fuzz::Aggregator aggregator;

}  // namespace

// The rules, the store and the seeded job, before the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aggregator.next(seedJob);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& a = aggregator.next(seedJob);
  const std::string_view in = faultline::fuzz::bytes(data, size);
  const size_t eol = in.find('\n');
  const std::string_view line = in.substr(0, eol);
  const std::string body(eol == std::string_view::npos ? std::string_view() : in.substr(eol + 1));
  const size_t sp = line.find(' ');
  std::string method = sp == std::string_view::npos ? "GET" : std::string(line.substr(0, sp));
  std::string target(sp == std::string_view::npos ? line : line.substr(sp + 1));

  faultline::aggregator::HttpResponse r;
  try {
    r = a.call(method, target, body);
  } catch (const std::exception& e) {
    fail("%s %s: exception out of Api::handle: %s", method.c_str(), target.c_str(), e.what());
  }
  if (r.status < 200 || (r.status >= 500 && r.status != 503))
    fail("%s %s: status %d: %s", method.c_str(), target.c_str(), r.status, r.body.c_str());
  if (r.content_type == "application/json" && nlohmann::json::parse(r.body, nullptr, false).is_discarded())
    fail("%s %s: the JSON answer does not parse", method.c_str(), target.c_str());
  return 0;
}

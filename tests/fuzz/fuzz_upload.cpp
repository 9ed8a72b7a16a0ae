// libFuzzer target for the job-output upload (POST /jobs/{id}/output, docs/api.md): the body
// `faultline job output` sends, validated by jobOutputFromJson, stored, and judged with the
// failed job it belongs to (a new verdict revision). The input is the body; a real store behind
// it (fuzz_aggregator.h) with the job already ended in a failure.
//
// Properties: no crash, hang, leak or sanitizer report; no exception; the answer is 200 (stored)
// or 400 with a reason (refused as malformed) or the store's 503, and it parses as JSON.
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/fuzz/fuzz_aggregator.h"

namespace {

using faultline::fuzz::fail;

void seedJob(faultline::fuzz::Aggregator& a) {
  a.call("POST", "/jobs/4812345/end",
         R"({"nodes": "gpu-a[01-02]", "exit_code": "1:0", "ntasks_per_node": 4,
             "start_time": "2024-06-01T10:00:00Z", "time": "2024-06-01T10:42:51Z"})");
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
  const std::string body(faultline::fuzz::bytes(data, size));
  faultline::aggregator::HttpResponse r;
  try {
    r = a.call("POST", "/jobs/4812345/output", body);
  } catch (const std::exception& e) {
    fail("exception out of Api::handle: %s", e.what());
  }
  if (r.status != 200 && r.status != 400 && r.status != 503) fail("status %d: %s", r.status, r.body.c_str());
  auto answer = nlohmann::json::parse(r.body, nullptr, false);
  if (answer.is_discarded()) fail("the answer does not parse as JSON");
  if (r.status == 400 && (!answer.contains("error") || answer["error"].get<std::string>().empty()))
    fail("refused without a reason");
  return 0;
}

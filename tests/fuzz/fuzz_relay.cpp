// libFuzzer target for the relay wire (common/relay_wire.h) as the central aggregator meets it:
// Ingestor::ingestRelayBytes decodes a site relay's RelayBatch and stores its verdicts (with
// their diagnosis JSON), node events and symptom summaries in a real store (fuzz_aggregator.h).
// The input is the batch's bytes; the site is the one it claims, so accepted batches reach the
// store.
//
// Properties: no crash, hang, leak or sanitizer report, no exception; a refusal has a reason; an
// accepted batch re-encodes to bytes that decode to the same items.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/relay_wire.h"
#include "tests/fuzz/fuzz_aggregator.h"

using faultline::fuzz::fail;

namespace {

faultline::fuzz::Aggregator aggregator;
void nothing(faultline::fuzz::Aggregator&) {}

}  // namespace

// The rules and the store, before the first input.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aggregator.next(nothing);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto& a = aggregator.next(nothing);
  std::string reason;
  auto batch = faultline::common::decodeRelayBatch(data, size, &reason);
  if (!batch) {
    if (reason.empty()) fail("relay batch refused without a reason");
    return 0;
  }
  std::string again = faultline::common::encodeRelayBatch(*batch);
  auto round = faultline::common::decodeRelayBatch(again.data(), again.size(), &reason);
  if (!round || round->verdicts != batch->verdicts || round->node_events != batch->node_events ||
      round->symptoms.size() != batch->symptoms.size())
    fail("accepted relay batch does not survive its re-encoding: %s", reason.c_str());
  faultline::aggregator::IngestResult r;
  try {
    r = a.ingestor().ingestRelayBytes(faultline::fuzz::bytes(data, size), batch->site_id);
  } catch (const std::exception& e) {
    fail("exception out of ingestRelayBytes: %s", e.what());
  }
  if (r.status == faultline::aggregator::IngestResult::Status::kRejected && r.reason.empty())
    fail("relay batch rejected by the store without a reason");
  return 0;
}

// libFuzzer target for the ingest's message validation: common::decodeBatch (agents' batches),
// common::decodeRelayBatch (site relays' batches) and common::decodeHeartbeat, all run on every
// input with the aggregator's limits, must never crash, hang, leak, run out of memory or read out
// of bounds on any bytes, and what it accepts must survive a re-encode (that property found the
// NUL-in-text case, now refused by the decoders themselves; a 20 s run in CI found a batch whose
// list of zero-sized `sources` decoded to 1+ GiB, now bounded by DecodeLimits::max_node_list).
// Built with clang++ -fsanitize=fuzzer,address,undefined (tests/fuzz/CMakeLists.txt);
// `ctest -R fuzz_decode` runs it for 20 s over seeds/.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/protocol.h"
#include "common/relay_wire.h"
#include "common/wire.h"

namespace {

void relay(const uint8_t* data, size_t size, const faultline::common::DecodeLimits& limits) {
  std::string reason;
  auto batch = faultline::common::decodeRelayBatch(data, size, &reason, limits);
  if (!batch) {
    if (reason.empty()) std::abort();
    return;
  }
  std::string again = faultline::common::encodeRelayBatch(*batch);
  faultline::common::DecodeLimits relaxed = limits;
  relaxed.max_bytes = size_t{1} << 30;
  relaxed.traversal_words = uint64_t{1} << 30;
  auto round = faultline::common::decodeRelayBatch(again.data(), again.size(), &reason, relaxed);
  if (!round || round->items() != batch->items() || round->sequence != batch->sequence) {
    std::fprintf(stderr, "relay batch accepted, but its re-encoding is refused: %s\n", reason.c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  faultline::common::DecodeLimits limits;
  limits.max_bytes = 1 << 20;  // keep each run small; the limit check itself is part of the target
  relay(data, size, limits);
  {
    std::string why;
    auto hb = faultline::common::decodeHeartbeat(std::string_view(reinterpret_cast<const char*>(data), size), &why);
    if (!hb && why.empty()) std::abort();
  }
  std::string reason;
  auto batch = faultline::common::decodeBatch(data, size, &reason, limits);
  if (!batch) {
    if (reason.empty()) std::abort();  // every refusal says why (it becomes a metric label)
    return 0;
  }
  std::string again = faultline::common::encodeBatch(*batch);
  // The re-encoding may be larger than the input (packing is input-dependent): no byte limit.
  faultline::common::DecodeLimits relaxed = limits;
  relaxed.max_bytes = size_t{1} << 30;
  relaxed.traversal_words = uint64_t{1} << 30;
  auto round = faultline::common::decodeBatch(again.data(), again.size(), &reason, relaxed);
  if (!round || round->symptoms.size() != batch->symptoms.size() || round->header.sequence != batch->header.sequence)
  {
    std::fprintf(stderr, "accepted, but its re-encoding is refused: %s\n", reason.c_str());
    std::abort();
  }
  return 0;
}

// What a Shipper sends from: a durable, ordered queue of encoded messages that stay until the
// receiver acknowledges them. The agent's spool (agent/spool.h) and the site relay's outbox in
// the aggregator's store (aggregator/relay/) implement it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/symptom.h"

namespace faultline::uplink {

struct OutboundBatch {
  uint64_t sequence = 0;  // per sender, strictly increasing, never reused
  common::Severity max_severity = common::Severity::kInfo;
  uint32_t items = 0;     // symptoms (agent) or relayed records (site relay)
  std::string payload;    // the packed Cap'n Proto message, its header carrying `sequence`
};

class Outbox {
 public:
  virtual ~Outbox() = default;
  // Unacknowledged messages, most severe first when `by_severity`, then by sequence; skips the
  // sequences in `exclude` (in flight). At most `limit`.
  virtual std::vector<OutboundBatch> unacked(size_t limit, bool by_severity,
                                             const std::vector<uint64_t>& exclude = {}) const = 0;
  // Forgets an acknowledged message. Unknown sequences (already acked, dropped) are fine.
  virtual bool ack(uint64_t sequence) = 0;
};

}  // namespace faultline::uplink

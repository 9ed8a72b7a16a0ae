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
  // Around every send of a message (resends too). beforeSend notes, durably, that the message
  // may leave; false: it could not, and the message is not sent now. afterSend says whether it
  // went to the socket. An outbox that evicts messages tells by these the ones that never left
  // (certainly lost) from the ones that may have arrived. Default: nothing to note.
  virtual bool beforeSend(uint64_t sequence) {
    (void)sequence;
    return true;
  }
  virtual void afterSend(uint64_t sequence, bool went_out) {
    (void)sequence;
    (void)went_out;
  }
};

}  // namespace faultline::uplink

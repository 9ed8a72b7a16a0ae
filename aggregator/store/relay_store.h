// The site relay's state. Owns the tables relay_pending and relay_outbox, the relay's trigger on
// verdicts and its meta keys (relay.*) (relay_store.cpp); the receiving side writes the site's
// verdicts, jobs, symptoms and node rows under the central's ids in the batch's transaction.
// Part of the Store facade (store.h): every method takes the write connection's lock
// (store_core.h) for one transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class RelayStore : protected StorePart {
 public:
  // Site relay, sending side. On: every new verdict revision is queued (in the transaction that
  // stores it) for the central, and the first time also every revision already stored. Off: the
  // queue is dropped and nothing more is queued.
  bool setRelayCapture(bool on, std::string* error);
  // Packs what is new since the last call (queued verdict revisions, node events, and symptom
  // summaries when asked) into one RelayBatch in the outbox, in one transaction with the
  // watermarks, so a crash neither loses nor repeats an item.
  std::optional<RelayCollectResult> relayCollect(const RelayCollectOptions& o, std::string* error);
  std::vector<RelayOutboxBatch> relayUnacked(size_t limit, bool by_severity, const std::vector<uint64_t>& exclude);
  bool relayAck(uint64_t sequence);
  RelayOutboxStats relayOutboxStats();
  // Site relay, receiving side (the central aggregator): stores a site's batch once, keyed by
  // (site, sequence). Verdicts keep the site's revision numbers under the job id "SITE:JOBID".
  IngestResult ingestRelay(const common::RelayBatchData& batch, std::string_view authenticated_site);

 protected:
  explicit RelayStore(StoreCore& core) : StorePart(core) {}
};

}  // namespace faultline::aggregator

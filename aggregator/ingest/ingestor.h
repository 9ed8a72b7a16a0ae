// The transport-independent half of ingest: bytes of a SymptomBatch from an authenticated agent
// -> validated (common::decodeBatch with size/traversal/nesting limits) -> stored once -> counted.
// The ZeroMQ endpoint (zmq_endpoint.h) calls this for each "batch" frame and acks when the result
// is stored or duplicate.
//
// Threading: thread-safe as the Store and Metrics are. Never throws; a bad message is a
// rejected result with a reason, counted in faultline_rejects_total{reason}.
#pragma once

#include <optional>
#include <string_view>

#include "aggregator/clock.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/store/store.h"
#include "common/relay_wire.h"
#include "common/wire.h"

namespace faultline::aggregator {

class Ingestor {
 public:
  // All references must outlive the Ingestor.
  Ingestor(Store& store, Metrics& metrics, const Clock& clock, common::DecodeLimits limits = {});
  // `authenticated_host`, when not empty, is the hostname the transport authenticated (the
  // allow-list entry of the agent's key): a batch claiming another hostname is rejected with
  // reason "hostname mismatch". `sequence` (optional) gets the batch's sequence once decoded.
  IngestResult ingestBytes(std::string_view payload, std::string_view authenticated_agent,
                           std::string_view authenticated_host = {}, uint64_t* sequence = nullptr);
  IngestResult ingest(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
  // The two halves of ingestBytes for the grouped writer (ZmqEndpoint, docs/aggregator.md
  // "Ingest"): decodeBatch needs no store (decoding, limits and the hostname check happen before
  // the group takes the store lock); nullopt + *rejected (already counted) on a bad batch.
  // ingestGrouped stores through Store::ingestBatchGrouped: inside a group, a store failure fails
  // the whole group (no acks).
  std::optional<common::SymptomBatchData> decodeBatch(std::string_view payload, std::string_view authenticated_host,
                                                      uint64_t* sequence, IngestResult* rejected);
  IngestResult ingestGrouped(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
  // A run of decoded batches through Store::ingestBatches (a few statements per table for the
  // whole run); each result counted as ingestGrouped counts one.
  std::vector<IngestResult> ingestRun(const std::vector<Store::IngestInput>& batches);
  // A decoded batch's payloads for ingestRun (Store::payloadsFor), made off the store's lock.
  Store::Payloads payloadsFor(const common::SymptomBatchData& batch) const { return store_.payloadsFor(batch); }
  // A site relay's RelayBatch ("relay" frames): `authenticated_site` is the site name of the
  // relay's key (relays/SITE.pub); a batch claiming another site is rejected ("relay: site
  // mismatch"). `sequence` gets the batch's sequence once decoded.
  IngestResult ingestRelayBytes(std::string_view payload, std::string_view authenticated_site,
                                uint64_t* sequence = nullptr);
  bool heartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason);
  // Counts a message rejected before it reached decoding (frame count, size, unknown type, ...).
  void countReject(const std::string& reason);
  // Group commit of the calls in between (Store::beginGroup): the ingest loop wraps one pass
  // over its queued messages and sends the acks only after endGroup() returned true.
  bool beginGroup();
  bool endGroup();
  bool othersWaiting() const;

 private:
  IngestResult reject(std::string reason, std::string detail = "");
  IngestResult counted(int64_t t0, IngestResult r);
  // A stored batch's unmatched templates (and those its agent left out): counted.
  IngestResult countUnmatched(const common::SymptomBatchData& batch, IngestResult r);

  Store& store_;
  Metrics& metrics_;
  const Clock& clock_;
  common::DecodeLimits limits_;
};

}  // namespace faultline::aggregator

#include "aggregator/ingest/ingestor.h"

namespace faultline::aggregator {

Ingestor::Ingestor(Store& store, Metrics& metrics, const Clock& clock, common::DecodeLimits limits)
    : store_(store), metrics_(metrics), clock_(clock), limits_(limits) {
  metrics_.describe("faultline_batches_total", "symptom batches received, by result");
  metrics_.describe("faultline_symptoms_total", "symptoms stored");
  metrics_.describe("faultline_rejects_total", "messages rejected, by reason");
  metrics_.describe("faultline_unmatched_templates_total",
                    "templates of error lines no rule matched stored (issue 30), and those agents left out of "
                    "their batches (over unmatched_per_batch), by state");
}

IngestResult Ingestor::countUnmatched(const common::SymptomBatchData& batch, IngestResult r) {
  if (r.status != IngestResult::Status::kStored) return r;
  if (!batch.unmatched.empty())
    metrics_.add("faultline_unmatched_templates_total", "state", "stored", batch.unmatched.size());
  if (batch.unmatched_left_out)
    metrics_.add("faultline_unmatched_templates_total", "state", "left_out", batch.unmatched_left_out);
  return r;
}

IngestResult Ingestor::reject(std::string reason, std::string detail) {
  metrics_.add("faultline_rejects_total", "reason", reason);
  metrics_.add("faultline_batches_total", "result", "rejected");
  IngestResult r;
  r.status = IngestResult::Status::kRejected;
  r.reason = std::move(reason);
  r.detail = std::move(detail);
  return r;
}

void Ingestor::countReject(const std::string& reason) { metrics_.add("faultline_rejects_total", "reason", reason); }

bool Ingestor::beginGroup() {
  std::string error;
  if (store_.beginGroup(&error)) return true;
  metrics_.add("faultline_ingest_group_errors_total", "step", "begin");
  return false;
}

bool Ingestor::othersWaiting() const { return store_.othersWaiting(); }

bool Ingestor::endGroup() {
  std::string error;
  if (store_.endGroup(&error)) return true;
  metrics_.add("faultline_ingest_group_errors_total", "step", "commit");
  return false;
}

IngestResult Ingestor::ingestBytes(std::string_view payload, std::string_view authenticated_agent,
                                   std::string_view authenticated_host, uint64_t* sequence) {
  uint64_t seq = 0;
  IngestResult rejected;
  auto batch = decodeBatch(payload, authenticated_host, &seq, &rejected);
  if (sequence) *sequence = seq;
  if (!batch) return rejected;
  return ingest(*batch, authenticated_agent);
}

IngestResult Ingestor::ingestRelayBytes(std::string_view payload, std::string_view authenticated_site,
                                        uint64_t* sequence) {
  std::string reason;
  auto batch = common::decodeRelayBatch(payload.data(), payload.size(), &reason, limits_);
  if (!batch) return reject("relay: decode: " + reason);
  if (sequence) *sequence = batch->sequence;
  if (batch->site_id != authenticated_site)
    return reject("relay: site mismatch", "batch names site " + batch->site_id + ", key filed as relays/" +
                                              std::string(authenticated_site) + ".pub");
  int64_t t0 = clock_.steadyNs();
  auto r = store_.ingestRelay(*batch, authenticated_site);
  if (r.status == IngestResult::Status::kRejected) return reject(r.reason);
  metrics_.observe("faultline_relay_ingest_seconds", double(clock_.steadyNs() - t0) / 1e9);
  metrics_.add("faultline_relay_batches_total", "result", std::string(ingestStatusName(r.status)));
  if (r.status == IngestResult::Status::kStored) {
    metrics_.add("faultline_relay_verdicts_total", "", "", batch->verdicts.size());
    if (r.symptoms) metrics_.add("faultline_relay_symptoms_total", "", "", r.symptoms);
    // A revision that repeats one this aggregator never got (the site's outbox dropped it): its
    // verdict arrives with the site's next changed revision.
    if (r.unresolved_confirms)
      metrics_.add("faultline_relay_unresolved_revisions_total", "", "", r.unresolved_confirms);
  }
  return r;
}

std::optional<common::SymptomBatchData> Ingestor::decodeBatch(std::string_view payload,
                                                             std::string_view authenticated_host, uint64_t* sequence,
                                                             IngestResult* rejected) {
  std::string reason;
  auto batch = common::decodeBatch(payload.data(), payload.size(), &reason, limits_);
  if (!batch) {
    *rejected = reject("decode: " + reason);
    return std::nullopt;
  }
  *sequence = batch->header.sequence;
  if (!authenticated_host.empty() && batch->header.hostname != authenticated_host) {
    *rejected = reject("hostname mismatch", "batch claims " + batch->header.hostname);
    return std::nullopt;
  }
  return batch;
}

IngestResult Ingestor::ingestGrouped(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  int64_t t0 = clock_.steadyNs();
  return countUnmatched(batch, counted(t0, store_.ingestBatchGrouped(batch, authenticated_agent)));
}

std::vector<IngestResult> Ingestor::ingestRun(const std::vector<Store::IngestInput>& batches) {
  int64_t t0 = clock_.steadyNs();
  auto results = store_.ingestBatches(batches);
  for (size_t i = 0; i < results.size(); ++i)  // each batch waited for the whole run
    results[i] = countUnmatched(*batches[i].batch, counted(t0, std::move(results[i])));
  return results;
}

IngestResult Ingestor::ingest(const common::SymptomBatchData& batch, std::string_view authenticated_agent) {
  int64_t t0 = clock_.steadyNs();
  return countUnmatched(batch, counted(t0, store_.ingestBatch(batch, authenticated_agent)));
}

IngestResult Ingestor::counted(int64_t t0, IngestResult r) {
  if (r.status == IngestResult::Status::kRejected) return reject(r.reason);
  metrics_.observe("faultline_ingest_seconds", double(clock_.steadyNs() - t0) / 1e9);
  metrics_.add("faultline_batches_total", "result", std::string(ingestStatusName(r.status)));
  if (r.symptoms) metrics_.add("faultline_symptoms_total", "", "", r.symptoms);
  return r;
}

bool Ingestor::heartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason) {
  if (store_.recordHeartbeat(hb, authenticated_agent, reason)) {
    metrics_.add("faultline_heartbeats_total");
    return true;
  }
  metrics_.add("faultline_rejects_total", "reason", "heartbeat: " + *reason);
  return false;
}

}  // namespace faultline::aggregator

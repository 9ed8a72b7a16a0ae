// Symptoms: the ingest of agents' batches, the verdict's window reads, the decoded-symptom cache
// and the group commit. Owns the tables symptoms and batches (symptom_store.cpp, batch_ingest.cpp)
// and unmatched_templates (template_store.cpp); a batch also writes its sender's rows through
// NodeStore's helpers (node_store.h) in the same transaction. Part of the Store facade (store.h):
// every method takes the write connection's lock (store_core.h), which a group holds from
// beginGroup to endGroup.
//
// Payload column: what no other column of the row holds (symptom_codec.h, encodeSymptomPayload),
// packed with the store's current zstd dictionary (symptom_dictionary.h; table
// symptom_dictionaries, symptom_pack.cpp) once it has one: the writer trains it from the first
// dictionary_train_rows payloads it writes (StoreOptions), migration 10 from the rows stored
// before it. Rows written before a dictionary stay compact, rows written before migration 9 hold
// the whole symptom as JSON. Reads put the columns and the payload together, any form.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class SymptomStore : protected StorePart {
 public:
  // Stores a batch in one transaction: the (agent, boot, sequence) key, its symptoms, the
  // node's source coverage. A key already stored is a duplicate (nothing written). Rejected:
  // agent id differs from the authenticated one, empty host/agent, a symptom for another node,
  // the hostname already bound to another agent, or a store failure.
  IngestResult ingestBatch(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
  // The same checks and rows as ingestBatch, for the ingest writer, and inside a group
  // (beginGroup) no savepoint per batch — a store failure after the checks fails the whole group
  // instead (endGroup rolls back and returns false, so nothing of it is acked and the agents
  // resend). Outside a group: its own transaction, like ingestBatch. ingestBatches of one.
  IngestResult ingestBatchGrouped(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
  // A batch's symptoms as the payloads ingestBatches writes, made before the store is taken:
  // the ingest endpoint makes them on its socket thread while the store thread writes the pass
  // before. `error` not empty: a symptom's text is not UTF-8 and the batch is refused with it.
  // Thread-safe (it reads only the current dictionary).
  struct Payloads {
    std::vector<std::string> texts;
    std::string error;
  };
  Payloads payloadsFor(const common::SymptomBatchData& batch) const;
  // A run of batches for the grouped writer (one pass of the ingest loop): the results
  // ingestBatchGrouped on each in turn would give, and the same rows, written with a few
  // multi-row statements per table (batch_ingest.cpp) instead of a dozen statements per batch —
  // on PostgreSQL one round trip per table and chunk. Inside a group a store failure fails the
  // group; outside, the run is one transaction and a store failure rejects all of it.
  struct IngestInput {
    const common::SymptomBatchData* batch;
    std::string_view agent;              // the authenticated agent id
    const Payloads* payloads = nullptr;  // payloadsFor(*batch), or null: made by ingestBatches
  };
  std::vector<IngestResult> ingestBatches(const std::vector<IngestInput>& batches);

  // Symptoms of `nodes` with last_ns in [from, to] (untimed ones: received in [from, to_received]),
  // in (node, id) order. `max_id` (if non-null) gets the highest id returned. For a verdict: each
  // as common::copyForCorrelation gives it (its evidence cut to the first line).
  std::vector<common::Symptom> symptomsForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                 int64_t to_ns, int64_t to_received_ns, int64_t* max_id);
  std::vector<StoredSymptom> symptoms(const SymptomFilter& filter);
  // Per node: min first_ns / max last_ns of symptoms with id > after_id (for late-symptom checks).
  struct NewSymptomSpan {
    std::string node;
    int64_t first_ns = 0, last_ns = 0, max_id = 0;
    bool untimed = false;
  };
  std::vector<NewSymptomSpan> symptomsSince(int64_t after_id, int64_t upto_id = INT64_MAX);
  // The highest symptom id below which nothing is still being written: ids are taken when a row
  // is inserted but become visible at commit, and with several replicas on one PostgreSQL a
  // later id can commit first — a watermark at MAX(id) would pass over the earlier one for good.
  // On PostgreSQL it waits for the symptom writes in flight (holdSymptomWrites). -1 on error.
  int64_t settledSymptomId();
  int64_t maxSymptomId();

  // ---- issue 30: unmatched templates (template_store.h, defined in template_store.cpp) ----
  // The templates `nodes` shipped with a stamp (or read time) in [from_ns, to_ns], one per (node,
  // template, kind, timed or not) with the lines summed and the earliest line; in (node, time)
  // order, at most `limit`.
  std::vector<UnmatchedSighting> unmatchedForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                    int64_t to_ns, size_t limit);
  // Per node: the span of stamps (or read times) and the highest id of the template rows with
  // id > after_id — sightings are news for a verdict as symptoms are (a batch of templates alone,
  // after the final revision, changes the verdict's `unrecognized` list).
  std::vector<NewSymptomSpan> templatesSince(int64_t after_id);

  // Group commit, for the ingest loop: between beginGroup() and endGroup() every write made by
  // this thread joins one transaction (each call still atomic on its own, as a savepoint) that
  // endGroup() commits — one fsync for a whole burst of batches instead of one per batch. The
  // write connection stays locked for other threads meanwhile (verdict reads are not: they have
  // their own connection), so keep a group short (one pass over what is queued). Nothing written
  // in a group is durable before endGroup() returns true: acks wait for it. false from
  // beginGroup: no group (calls commit on their own).
  bool beginGroup(std::string* error);
  bool endGroup(std::string* error);
  // Another thread waits for the write connection: a group should end now (the HTTP API and the
  // verdict engine must not queue behind a burst). beginGroup lets such waiters go first.
  bool othersWaiting() const { return core_.waiters.load(std::memory_order_relaxed) > 0; }

 protected:
  explicit SymptomStore(StoreCore& core) : StorePart(core) {}

 private:
  // A symptom's payload as written now: compact, packed with the current dictionary if any.
  std::string packedPayload(const common::Symptom& s, std::string_view row_boot_id) const;
  // Under the lock, inside the transaction that wrote `payloads`: while no dictionary is current,
  // they are kept as samples, and once there are enough a dictionary is trained and inserted
  // (pending). settleDictionary: the transaction ended; a pending dictionary becomes current if it
  // committed, else is forgotten.
  void learnDictionary(const std::vector<const std::string*>& payloads);
  void settleDictionary(bool committed);
  // Under the lock: what this transaction packs with (the pending dictionary, else the current
  // one; null: none). Payloads made compact before it (on the socket thread) are packed with it.
  std::shared_ptr<const PayloadDictionary> packingDictionary() const;
};

}  // namespace faultline::aggregator

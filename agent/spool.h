// The agent's local, durable spool: a SQLite database in WAL mode holding
//   - batches of symptoms not yet acknowledged by the aggregator (payload = wire bytes),
//   - each source's checkpoint,
//   - the aggregation groups still open (so a restart resumes them instead of re-reading logs),
//   - counters (dropped and evicted-in-flight symptoms, next sequence number).
// commit() writes new batches, the open groups and the checkpoints in ONE transaction: a source
// position is never durable before the symptoms read up to it are (STYLE.md rule 7).
//
// Bounded by bytes: when the unacknowledged payloads exceed max_bytes, whole batches are dropped,
// lowest severity first, oldest first within a severity, and their symptoms counted (occurrences:
// an aggregated symptom of count N counts N, as the aggregator would have stored it): a batch
// never sent in `dropped_*` (certainly lost), one sent and not yet acknowledged in
// `evicted_in_flight_*` (it may still arrive and be stored). Each batch notes durably, before
// its first send, that it may have left (beforeSend).
// Not thread-safe; used from the io_context thread. Blocking (local disk). Errors are returned
// as false + reason, never thrown.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/symptom.h"
#include "common/uplink/outbox.h"
#include "common/wire.h"

struct sqlite3;
struct sqlite3_stmt;

namespace faultline::agent {

struct SpoolOptions {
  uint64_t max_bytes = 64ull << 20;
  // true: synchronous=FULL, the WAL is fsynced on each commit (survives power loss).
  // false: synchronous=NORMAL, fsync only at WAL checkpoints. In WAL mode that is still atomic
  // and durable against the process dying (kill -9, OOM kill, crash): a committed transaction is
  // in the OS page cache. A power cut or kernel panic may lose the last commits — batches AND
  // the checkpoints that went with them, together, so those log lines are read again, never
  // half-recorded. The agent defaults to false (spool_synchronous: normal).
  bool synchronous_full = true;
};

// payload = encodeBatch bytes with header.sequence == sequence; items = its symptoms.
using SpooledBatch = uplink::OutboundBatch;

struct SpoolStats {
  uint64_t batches = 0;
  uint64_t bytes = 0;
  uint64_t dropped_symptoms = 0;
  uint64_t dropped_batches = 0;
  uint64_t evicted_in_flight_symptoms = 0;  // evicted after a send: may have been stored
  uint64_t evicted_in_flight_batches = 0;
  uint64_t next_sequence = 1;
};

// One atomic step of the agent.
struct SpoolCommit {
  // Batches to append; the spool assigns header.sequence (strictly increasing, never reused).
  std::vector<common::SymptomBatchData> batches;
  // Aggregation groups still open after this commit (replaces the stored ones).
  std::vector<common::Symptom> open_groups;
  // Source name -> checkpoint; sources not named keep their stored checkpoint.
  std::map<std::string, std::string> checkpoints;
};

class Spool : public uplink::Outbox {
 public:
  // Opens or creates the spool at `path` (":memory:" for throwaway). A file SQLite cannot read
  // (corrupt, not a database) is renamed to "<path>.corrupt-<n>" and a fresh spool is created;
  // `note` then says so. Returns nullptr and `error` when even that fails.
  static std::unique_ptr<Spool> open(const std::string& path, SpoolOptions options,
                                     std::string* error, std::string* note = nullptr);
  ~Spool() override;
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // The atomic step (see SpoolCommit). Returns the sequences assigned, or nullopt + error (the
  // transaction is rolled back; nothing is stored, checkpoints unchanged).
  std::optional<std::vector<uint64_t>> commit(const SpoolCommit& c, std::string* error);

  std::map<std::string, std::string> checkpoints() const;
  std::vector<common::Symptom> openGroups() const;

  // Unacknowledged batches, critical first when `by_severity`, then by sequence; skips the
  // sequences in `exclude` (in flight). At most `limit`.
  std::vector<SpooledBatch> unacked(size_t limit, bool by_severity,
                                    const std::vector<uint64_t>& exclude = {}) const override;
  // Deletes an acknowledged batch. Unknown sequences (already acked, dropped) are fine.
  bool ack(uint64_t sequence) override;
  // Notes the batch as sent (durably, before it leaves); afterSend(seq, false) takes a note
  // beforeSend just wrote back when the send did not go out.
  bool beforeSend(uint64_t sequence) override;
  void afterSend(uint64_t sequence, bool went_out) override;
  SpoolStats stats() const;

 private:
  Spool(sqlite3* db, SpoolOptions options) : db_(db), options_(options) {}
  bool migrate(std::string* error);
  bool exec(const char* sql, std::string* error);
  bool enforceBound(std::string* error);
  int64_t counter(const char* name) const;
  bool setCounter(const char* name, int64_t value, std::string* error);

  // The statements every commit, ack and shipper wake runs, prepared once (by their SQL text's
  // address: string literals).
  sqlite3_stmt* prepared(const char* sql) const;

  sqlite3* db_;
  SpoolOptions options_;
  uint64_t fresh_mark_ = 0;  // the batch the last beforeSend noted as sent (0: none)
  mutable std::unordered_map<const char*, sqlite3_stmt*> stmts_;
};

}  // namespace faultline::agent

// The store's row types: what the per-table stores (store.h lists them) take and give back.
// Plain values, no behaviour beyond a few predicates; shared by every part of the store and its
// callers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/template_store.h"
#include "common/diagnosis.h"
#include "common/job.h"
#include "common/protocol.h"
#include "common/relay_wire.h"
#include "common/symptom.h"
#include "common/wire.h"

namespace faultline::aggregator {

struct StoreOptions {
  bool read_only = false;         // for `faultline --db`: no migrations, no writes
  bool synchronous_full = false;  // fsync every commit (NORMAL: durable across kill -9, not power loss)
  int busy_timeout_ms = 2000;
  // Decoded symptoms this process stored lately, for verdicts (symptom_cache.h); 0: none.
  size_t symptom_cache_bytes = size_t{256} << 20;
  // How many symptom payloads the writer keeps to train the store's zstd dictionary from, when it
  // has none (symptom_dictionary.h); after it, payloads are packed. 0: never (rows stay compact).
  size_t dictionary_train_rows = 2048;
};

struct IngestResult {
  enum class Status { kStored, kDuplicate, kRejected };
  Status status = Status::kRejected;
  std::string reason;         // why rejected ("agent id mismatch", "store: disk I/O error", ...)
  std::string detail;         // what the message claimed, for the log ("batch names site edge2"); not a metric label
  size_t symptoms = 0;        // stored by this call
  int64_t last_symptom_id = 0;  // the highest symptom id the call wrote (ingestBatches: the whole run's)
  size_t unresolved_confirms = 0;  // relay: revisions repeating one this store never got (not stored)
};
std::string_view ingestStatusName(IngestResult::Status s);

// A scheduler job id as the aggregator accepts it: 1-64 of [A-Za-z0-9_.+-] (Slurm's "4242",
// "4242_7", "4242+1", "4242.batch"). Never ':' — relayed jobs are "SITE:JOBID" and cannot
// collide with local ones.
bool validJobId(std::string_view id);

// Slurm states of a job that has not finished (RUNNING, PENDING, COMPLETING, ...).
bool isActiveJobState(std::string_view slurm_state);

struct SourceStatusInfo {
  std::string source;
  std::string format;
  std::string status = "ok";  // ok | partial | error
  std::string reason;
  uint64_t records = 0;
  uint64_t skipped = 0;
  uint64_t lost = 0;
};

// What a heartbeat tells (decoded from the wire by the ingest layer).
struct HeartbeatInfo {
  std::string agent_id;
  std::string hostname;
  std::string boot_id;
  std::string agent_version;
  std::string ruleset_version;
  int64_t created_ns = 0;  // the node's clock when it sent the heartbeat
  int64_t started_ns = 0;
  std::vector<SourceStatusInfo> sources;
  uint64_t spool_batches = 0;
  uint64_t spool_bytes = 0;
  uint64_t dropped_symptoms = 0;
  uint64_t next_sequence = 0;
  // Set when the heartbeat carried the node's inventory (it changed, or every Nth beat); unset
  // means "unchanged", so the stored one stays.
  std::optional<common::NodeInventory> inventory;
};

// What the verdict engine takes from a node's stored inventory: its GPU count (unset when the
// agent could not read the GPU list: that says nothing about how many there are) and its
// network addresses.
struct InventoryFacts {
  std::optional<int> gpu_count;
  std::vector<std::string> addresses;
};

struct AgentRow {
  std::string agent_id, hostname, boot_id, agent_version, ruleset_version;
  int64_t first_seen_ns = 0, last_seen_ns = 0, last_heartbeat_ns = 0, last_batch_ns = 0;
  int64_t reported_ns = 0;  // created_ns of the newest heartbeat: how far the node has reported
  int64_t started_ns = 0;
  uint64_t spool_batches = 0, spool_bytes = 0, dropped_symptoms = 0, next_sequence = 0;
  uint64_t batches = 0, symptoms = 0;
  std::vector<SourceStatusInfo> sources;
};

struct NodeRow {
  std::string hostname, agent_id, boot_id;
  int64_t first_seen_ns = 0, last_seen_ns = 0, last_heartbeat_ns = 0, reported_ns = 0;
  uint64_t spool_batches = 0;
  uint64_t symptoms = 0;
  std::vector<SourceStatusInfo> sources;
};

struct StoredSymptom {
  int64_t id = 0;
  std::string agent_id;
  int64_t received_ns = 0;
  common::Symptom symptom;
};

struct SymptomFilter {
  std::vector<std::string> nodes;  // any of; empty = all
  std::string rule_id;             // exact or prefix ending in '*'
  int64_t since_ns = 0;            // symptom last_ns (or received, untimed) >= since
  int64_t until_ns = 0;            // 0 = open
  int64_t after_id = 0;
  size_t limit = 1000;
};

// Symptoms from one job-wide log no agent follows (the job's output file), extracted where the
// file is by `faultline job output`. Symptoms keep node "" unless the file is one node's: the
// verdict maps their ranks to nodes through the job's layout when it judges the job.
struct JobOutput {
  std::string job_id;
  std::string source;  // the file's path where it was read
  int64_t received_ns = 0;
  common::CoverageEntry coverage;
  std::vector<common::Symptom> symptoms;
  // Issue 30: the file's error lines no rule matched, as templates (template_store.h).
  std::vector<common::TemplateSighting> unmatched;
};

// A job as recorded from any of its sources (prolog/epilog, HTTP, sacct poll, import).
struct JobRow {
  common::JobInfo info;
  std::string nodelist;        // as given (Slurm hostlist), or joined names
  std::string terminal_state;  // "" while running, else terminalStateOf(state)
  std::string source;          // who last updated it: cli|http|sacct|import
  int64_t updated_ns = 0;
  int64_t end_recorded_ns = 0;  // aggregator clock when the end was first recorded
  std::string site;             // "" = this aggregator's own job; else relayed from that site
  JobWorkload workload;         // name, user, partition (template_store.h)
  bool ended() const { return !terminal_state.empty(); }
  bool failed() const { return ended() && terminal_state != "success"; }
};

// A partial update: fields left empty/0 keep their stored value.
struct JobUpdate {
  std::string job_id;
  std::string state;            // Slurm state word; "" keeps; RUNNING/PENDING = not ended
  std::string exit_code;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  std::vector<std::string> nodes;
  std::string nodelist;
  int64_t time_limit_sec = 0;
  int ntasks_per_node = 0;
  std::string source;
  JobWorkload workload;         // each field: "" keeps
};

struct JobFilter {
  int64_t since_ns = 0;  // ended (or started, if running) at or after
  std::string state;     // terminal state (fail, timeout, ...), Slurm word, "running", or "failed" (any non-success)
  std::string sub_domain;
  std::string node;
  size_t limit = 500;
};

struct VerdictRow {
  std::string job_id;
  int revision = 0;
  int64_t created_ns = 0;
  std::string status;  // provisional | final
  std::string reason;  // job_end | settle | late_symptoms | late_templates | late_coverage | reported | timeout | job_output | job_update | metrics
  int64_t max_symptom_id = 0;
  size_t symptoms = 0;
  std::vector<std::string> missing_nodes;
  common::Diagnosis diagnosis;
};

// A latest verdict without its diagnosis: what the verdict tick asks of it (is a revision due?).
// terminal_state is the diagnosis's, read by the database's JSON functions (a 10,000-node job's
// diagnosis is megabytes; parsing it whole every tick while it was open starved the HTTP API).
struct VerdictHead {
  std::string job_id;
  int revision = 0;
  int64_t created_ns = 0;
  std::string status;
  int64_t max_symptom_id = 0;
  size_t symptoms = 0;
  std::string terminal_state;
};

// A node's record in other jobs' verdicts (Store::recentFailures).
struct NodeFailures {
  size_t failures = 0;               // failed jobs whose latest verdict names the node responsible,
                                     // one per event: jobs inheriting one lasting fault count once
  std::vector<std::string> job_ids;  // the newest of them (by job end), newest first
};

struct NodeEvent {
  std::string node;
  int64_t time_ns = 0;
  std::string kind;    // agent_seen | boot | source | blamed
  std::string detail;
  std::string job_id;
};

// ---- site relay (aggregator/relay/) ----

struct RelayCollectOptions {
  std::string site_id;
  std::string ruleset_version;
  bool symptoms = false;            // also forward per-node symptom summaries
  // A revision that repeats the verdict before it goes as a reference to that revision
  // (RelayVerdict.confirms); false: every revision whole, for a central older than references.
  bool revision_refs = true;
  size_t max_items = 500;           // per relay batch
  size_t max_verdict_bytes = 4u << 20;  // diagnoses per batch (at least one always goes)
  uint64_t max_outbox_bytes = 256ull << 20;  // bound: lowest-severity, oldest batches go first
  // Every batch names the site's nodes with a live agent (a heartbeat within agent_timeout_ns),
  // and when nothing else is new for live_every_ns a batch of only those goes anyway, so the
  // central shows the site's nodes — and the relay — live (0: never on its own).
  int64_t agent_timeout_ns = 90'000'000'000;
  int64_t live_every_ns = 30'000'000'000;
};

struct RelayCollectResult {
  uint64_t sequence = 0;  // 0 = nothing new
  size_t verdicts = 0, node_events = 0, symptoms = 0;
  size_t confirmed = 0;  // of the verdicts: revisions sent as a reference to the one they repeat
  size_t bytes = 0;
  uint64_t dropped_batches = 0;  // by the bound, in this call
  bool more = false;             // a limit was hit: call again to drain
};

struct RelayOutboxStats {
  uint64_t batches = 0, bytes = 0, dropped_batches = 0, dropped_items = 0, next_sequence = 1;
};

struct RelayOutboxBatch {
  uint64_t sequence = 0;
  int max_severity = 0;  // common::Severity
  uint32_t items = 0;
  std::string payload;
};

struct StoreCounts {
  uint64_t agents = 0, nodes = 0, symptoms = 0, batches = 0, jobs = 0, verdicts = 0;
};

}  // namespace faultline::aggregator

// The aggregator's durable store: one SQLite file in WAL mode (docs/aggregator.md lists the
// tables). Schema by numbered migrations (PRAGMA user_version); bound parameters only.
//
// Threading: every public method takes an internal mutex, so a Store may be shared by the
// ingest loop, the HTTP server and the sacct poller; each call blocks for one short transaction.
// Failures of the environment (disk full, SQLITE_BUSY past the busy timeout) come back as a
// rejected IngestResult or a false/empty result with *error; nothing throws.
//
// Durability: each write is one transaction; WAL with synchronous=NORMAL (FULL optional) means
// a kill -9 at any moment leaves either the whole batch or none of it.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/clock.h"
#include "aggregator/store/symptom_cache.h"
#include "aggregator/store/template_store.h"
#include "common/diagnosis.h"
#include "common/job.h"
#include "common/protocol.h"
#include "common/relay_wire.h"
#include "common/symptom.h"
#include "common/wire.h"

namespace faultline::aggregator {

namespace sql {
class Db;
}

struct StoreOptions {
  bool read_only = false;         // for `faultline --db`: no migrations, no writes
  bool synchronous_full = false;  // fsync every commit (NORMAL: durable across kill -9, not power loss)
  int busy_timeout_ms = 2000;
  // Decoded symptoms this process stored lately, for verdicts (symptom_cache.h); 0: none.
  size_t symptom_cache_bytes = size_t{256} << 20;
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
  std::string reason;  // job_end | settle | late_symptoms | reported | timeout | job_output | job_update | metrics
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

class Store {
 public:
  // Opens or creates the database and runs pending migrations. `clock` must outlive the Store.
  static std::unique_ptr<Store> open(const std::string& path, const Clock& clock, StoreOptions options,
                                     std::string* error);
  ~Store();

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
  // A batch's symptoms as the payload texts ingestBatches writes, made before the store is taken:
  // the ingest endpoint makes them on its socket thread while the store thread writes the pass
  // before. `error` not empty: a symptom's text is not UTF-8 and the batch is refused with it.
  struct Payloads {
    std::vector<std::string> texts;
    std::string error;
  };
  static Payloads payloadsFor(const common::SymptomBatchData& batch);
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
  // Records the agent's liveness, spool state and per-source status. false + *reason on reject.
  bool recordHeartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason);

  // Merges a job update; returns the merged row (nullopt + *error on a bad update).
  std::optional<JobRow> recordJob(const JobUpdate& update, std::string* error);
  std::optional<JobRow> job(const std::string& job_id);
  // Relayed jobs whose site-local id is `local_id` ("edge1:4242" for "4242"), at most `limit`:
  // what an operator at the central probably meant by a bare id.
  std::vector<std::string> relayedJobIds(const std::string& local_id, size_t limit = 5);
  std::vector<JobRow> jobs(const JobFilter& filter);
  // Ended jobs in a failure state that have no verdict yet, oldest end first.
  std::vector<JobRow> jobsAwaitingVerdict(size_t limit = 100);
  // Jobs on `node` whose window [start - pre, end + post] (end open while running) overlaps
  // [from_ns, to_ns]: how a symptom maps to the jobs it may concern. `site`: "" for this
  // aggregator's own jobs; a site's name for the jobs relayed from it (its relayed symptoms map to
  // those, under their central ids "SITE:JOBID").
  std::vector<std::string> jobsAt(const std::string& node, int64_t from_ns, int64_t to_ns, int64_t pre_ns,
                                  int64_t post_ns, const std::string& site = "");

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

  // Job-wide output (see JobOutput): stores or replaces (job, source). Job ids need not be known
  // yet: the epilog may upload the output before the job's end is recorded.
  bool putJobOutput(const JobOutput& output, std::string* error);
  std::vector<JobOutput> jobOutputs(const std::string& job_id);
  // Jobs with an output stored after row `after_id`; *newest_id gets the highest row id.
  std::vector<std::string> jobsWithOutputSince(int64_t after_id, int64_t* newest_id);

  // Appends revision n+1 (history kept); returns the revision number, 0 on failure.
  int addVerdict(const VerdictRow& v, std::string* error);
  std::optional<VerdictRow> latestVerdict(const std::string& job_id);
  std::vector<VerdictRow> verdictHistory(const std::string& job_id);
  // Latest revision of every job whose latest verdict is provisional.
  std::vector<VerdictRow> openVerdicts();
  // The same two without the diagnosis (VerdictHead).
  std::optional<VerdictHead> latestVerdictHead(const std::string& job_id);
  std::vector<VerdictHead> openVerdictHeads();
  // Latest revision of every job that ended in [since, until].
  std::vector<VerdictRow> latestVerdicts(int64_t since_ns, int64_t until_ns);

  std::vector<AgentRow> agents();
  std::vector<NodeRow> nodes();
  std::optional<NodeRow> node(const std::string& hostname);
  // The rows (with their sources) of those of `hostnames` that have one: two queries for a whole
  // job's nodes (the verdict's coverage) instead of two per node.
  std::map<std::string, NodeRow> nodes(const std::vector<std::string>& hostnames);
  // Of those, how far each has reported (NodeRow::reported_ns) and nothing else: the tick's
  // "every node reported" check for an open verdict.
  std::map<std::string, int64_t> reportedUpTo(const std::vector<std::string>& hostnames);
  std::vector<NodeEvent> nodeHistory(const std::string& hostname, int64_t since_ns, size_t limit = 200);
  // The latest inventory stored for each of `nodes` that has one (from agents' heartbeats).
  std::map<std::string, common::NodeInventory> inventories(const std::vector<std::string>& nodes);
  // What the verdict takes from those inventories, without reading them whole.
  std::map<std::string, InventoryFacts> inventoryFacts(const std::vector<std::string>& nodes);
  // Per node of `nodes` named in responsible_nodes of the latest verdict of a failed job (other
  // than `exclude_job_id`, of the same `site`) that ended in [since_ns, until_ns]: how many such
  // jobs and up to `max_job_ids` of them. Nodes never named are left out.
  std::map<std::string, NodeFailures> recentFailures(const std::vector<std::string>& nodes, int64_t since_ns,
                                                     int64_t until_ns, const std::string& exclude_job_id,
                                                     const std::string& site, size_t max_job_ids);
  bool addNodeEvent(const NodeEvent& e);

  // ---- issue 30: unmatched templates (template_store.h, defined in template_store.cpp) ----
  // The templates `nodes` shipped with a stamp (or read time) in [from_ns, to_ns], one per (node,
  // template, kind, timed or not) with the lines summed and the earliest line; in (node, time)
  // order, at most `limit`.
  std::vector<UnmatchedSighting> unmatchedForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                    int64_t to_ns, size_t limit);
  // Earlier successful jobs of `job`'s workload (same name, user and partition, same site) that
  // ended in [since_ns, job's end] and all of whose nodes had an agent by then; newest first, at
  // most `limit`. None when the job has no workload name.
  std::vector<JobRow> workloadBaselines(const JobRow& job, int64_t since_ns, size_t limit);

  // Small key/value state (engine watermarks).
  int64_t metaInt(const std::string& key, int64_t fallback);
  bool setMetaInt(const std::string& key, int64_t value);

  // Deletes at most `max_rows` symptoms/batches/events older than `cutoff_ns` and jobs (with
  // their verdicts) that ended before `job_cutoff_ns`, in one short transaction. Returns the rows
  // deleted; call again while it returns max_rows so ingest can interleave. Each table is walked
  // by a cursor on its time index that the steps of one pass share (a pass ends with a step that
  // deleted fewer than max_rows): a step starts where the last one stopped instead of walking
  // again over the index entries its predecessors deleted, which PostgreSQL keeps until vacuum.
  size_t pruneStep(int64_t cutoff_ns, int64_t job_cutoff_ns, size_t max_rows);

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

  // Group commit, for the ingest loop: between beginGroup() and endGroup() every write made by
  // this thread joins one transaction (each call still atomic on its own, as a savepoint) that
  // endGroup() commits — one fsync for a whole burst of batches instead of one per batch. The
  // store stays locked for other threads meanwhile, so keep a group short (one pass over what
  // is queued). Nothing written in a group is durable before endGroup() returns true: acks wait
  // for it. false from beginGroup: no group (calls commit on their own).
  bool beginGroup(std::string* error);
  bool endGroup(std::string* error);
  // Another thread waits for the store: a group should end now (the HTTP API and the verdict
  // engine must not queue behind a burst). beginGroup lets such waiters go first.
  bool othersWaiting() const { return waiters_.load(std::memory_order_relaxed) > 0; }

  StoreCounts counts();
  int schemaVersion();
  static int latestSchemaVersion();

 private:
  Store(std::unique_ptr<sql::Db> db, const Clock& clock);
  bool migrate(std::string* error);
  bool migratePostgres(std::string* error);
  int migrateFrom(std::string* error);
  std::optional<JobRow> jobLocked(const std::string& job_id);
  std::vector<SourceStatusInfo> sourcesLocked(const std::string& node);
  void addNodeEventLocked(const NodeEvent& e);
  bool recordSenderLocked(const common::SymptomBatchData& batch, int64_t now);
  // Inside a transaction that writes symptoms: PostgreSQL advisory lock 7146603 held shared until
  // it ends, so settledSymptomId() can wait for it. No-op on SQLite.
  bool holdSymptomWrites(std::string* error = nullptr);
  bool putInventoryLocked(const std::string& node, const std::string& agent_id, const common::NodeInventory& inv,
                          int64_t now_ns);

  // Recursive: a group commit holds it from beginGroup to endGroup while the calls inside lock it
  // again. `waiters_` counts threads queued for it, so a group can end early and let them in.
  std::recursive_mutex mu_;
  std::atomic<int> waiters_{0};
  bool in_group_ = false;
  // Where the running prune pass stands, per table: the next time stamp to look at.
  struct PruneCursor {
    int64_t symptoms = INT64_MIN, batches = INT64_MIN, node_events = INT64_MIN, unmatched = INT64_MIN;
  } prune_cursor_;
  bool group_failed_ = false;  // a write inside the group failed: endGroup rolls back
  SymptomCache cache_{0};
  // Symptoms written in the open group, cached when endGroup commits.
  std::vector<std::pair<int64_t, common::Symptom>> cache_pending_;
  struct Lock {
    explicit Lock(Store& s) : store(s) {
      ++store.waiters_;
      store.mu_.lock();
      --store.waiters_;
    }
    ~Lock() { store.mu_.unlock(); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;
    Store& store;
  };
  std::unique_ptr<sql::Db> db_;
  const Clock& clock_;
};

// Symptom <-> JSON as kept in the store and served by the API.
nlohmann::json symptomToJson(const common::Symptom& s);
// The same text as symptomToJson(s).dump(), written directly (no json tree): the ingest
// writer's payload column.
std::string symptomJsonText(const common::Symptom& s);
// symptomFromJson(json::parse(payload)), reading the text symptomJsonText writes directly (the
// verdict's window read); any other text is parsed with nlohmann::json.
common::Symptom symptomFromPayload(std::string_view payload);
common::Symptom symptomFromJson(const nlohmann::json& j);
std::optional<common::SourceKind> parseSourceKind(std::string_view s);

}  // namespace faultline::aggregator

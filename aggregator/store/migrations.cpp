#include "aggregator/store/migrations.h"

#include <iterator>

namespace faultline::aggregator {

const char* const kStoreMigrations[] = {
    // 1: initial schema.
    R"sql(
CREATE TABLE agents(
  agent_id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  boot_id TEXT NOT NULL DEFAULT '',
  agent_version TEXT NOT NULL DEFAULT '',
  ruleset_version TEXT NOT NULL DEFAULT '',
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL,
  last_heartbeat_ns INTEGER NOT NULL DEFAULT 0,
  last_batch_ns INTEGER NOT NULL DEFAULT 0,
  reported_ns INTEGER NOT NULL DEFAULT 0,
  started_ns INTEGER NOT NULL DEFAULT 0,
  spool_batches INTEGER NOT NULL DEFAULT 0,
  spool_bytes INTEGER NOT NULL DEFAULT 0,
  dropped_symptoms INTEGER NOT NULL DEFAULT 0,
  next_sequence INTEGER NOT NULL DEFAULT 0,
  batches INTEGER NOT NULL DEFAULT 0,
  symptoms INTEGER NOT NULL DEFAULT 0);
CREATE UNIQUE INDEX agents_by_host ON agents(hostname);

CREATE TABLE nodes(
  hostname TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL DEFAULT '',
  boot_id TEXT NOT NULL DEFAULT '',
  first_seen_ns INTEGER NOT NULL,
  last_seen_ns INTEGER NOT NULL,
  last_heartbeat_ns INTEGER NOT NULL DEFAULT 0,
  reported_ns INTEGER NOT NULL DEFAULT 0,
  spool_batches INTEGER NOT NULL DEFAULT 0,
  symptoms INTEGER NOT NULL DEFAULT 0);

CREATE TABLE source_status(
  node TEXT NOT NULL,
  source TEXT NOT NULL,
  format TEXT NOT NULL DEFAULT '',
  status TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  records INTEGER NOT NULL DEFAULT 0,
  skipped INTEGER NOT NULL DEFAULT 0,
  lost INTEGER NOT NULL DEFAULT 0,
  updated_ns INTEGER NOT NULL,
  PRIMARY KEY(node, source));

CREATE TABLE batches(
  agent_id TEXT NOT NULL,
  boot_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  received_ns INTEGER NOT NULL,
  symptoms INTEGER NOT NULL,
  PRIMARY KEY(agent_id, boot_id, sequence)) WITHOUT ROWID;
CREATE INDEX batches_by_received ON batches(received_ns);

CREATE TABLE symptoms(
  id INTEGER PRIMARY KEY,
  agent_id TEXT NOT NULL,
  boot_id TEXT NOT NULL,
  sequence INTEGER NOT NULL,
  node TEXT NOT NULL,
  rule_id TEXT NOT NULL,
  sub_domain TEXT NOT NULL,
  role TEXT NOT NULL,
  severity TEXT NOT NULL,
  device TEXT NOT NULL,
  first_ns INTEGER NOT NULL,
  last_ns INTEGER NOT NULL,
  time_known INTEGER NOT NULL,
  count INTEGER NOT NULL,
  received_ns INTEGER NOT NULL,
  payload TEXT NOT NULL);
CREATE INDEX symptoms_by_node_time ON symptoms(node, last_ns);
CREATE INDEX symptoms_by_received ON symptoms(received_ns);
CREATE INDEX symptoms_by_rule ON symptoms(rule_id, last_ns);

CREATE TABLE jobs(
  job_id TEXT PRIMARY KEY,
  state TEXT NOT NULL DEFAULT '',
  terminal_state TEXT NOT NULL DEFAULT '',
  exit_code TEXT NOT NULL DEFAULT '',
  start_ns INTEGER NOT NULL DEFAULT 0,
  end_ns INTEGER NOT NULL DEFAULT 0,
  nodelist TEXT NOT NULL DEFAULT '',
  time_limit_sec INTEGER NOT NULL DEFAULT 0,
  ntasks_per_node INTEGER NOT NULL DEFAULT 0,
  source TEXT NOT NULL DEFAULT '',
  updated_ns INTEGER NOT NULL,
  end_recorded_ns INTEGER NOT NULL DEFAULT 0);
CREATE INDEX jobs_by_end ON jobs(end_ns);

CREATE TABLE job_nodes(
  node TEXT NOT NULL,
  job_id TEXT NOT NULL,
  position INTEGER NOT NULL,
  PRIMARY KEY(node, job_id)) WITHOUT ROWID;
CREATE INDEX job_nodes_by_job ON job_nodes(job_id, position);

CREATE TABLE verdicts(
  job_id TEXT NOT NULL,
  revision INTEGER NOT NULL,
  created_ns INTEGER NOT NULL,
  status TEXT NOT NULL,
  reason TEXT NOT NULL,
  sub_domain TEXT NOT NULL,
  max_symptom_id INTEGER NOT NULL,
  symptoms INTEGER NOT NULL,
  missing_nodes TEXT NOT NULL DEFAULT '[]',
  diagnosis TEXT NOT NULL,
  latest INTEGER NOT NULL DEFAULT 1,
  PRIMARY KEY(job_id, revision)) WITHOUT ROWID;
CREATE INDEX verdicts_latest ON verdicts(latest, status);

CREATE TABLE node_events(
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL,
  time_ns INTEGER NOT NULL,
  kind TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  job_id TEXT NOT NULL DEFAULT '');
CREATE INDEX node_events_by_node ON node_events(node, time_ns);
CREATE INDEX node_events_by_time ON node_events(time_ns);

CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);
)sql",
    // 2: site relay. At a central aggregator, jobs relayed from a site carry the site's name (the
    // central never judges them itself). At a site, verdict revisions wait in relay_pending
    // (filled by a trigger while the relay is on) until they are packed into relay_outbox, whose
    // batches stay until the central acknowledges them.
    R"sql(
ALTER TABLE jobs ADD COLUMN site TEXT NOT NULL DEFAULT '';
CREATE TABLE relay_pending(
  id INTEGER PRIMARY KEY,
  job_id TEXT NOT NULL,
  revision INTEGER NOT NULL);
CREATE TABLE relay_outbox(
  seq INTEGER PRIMARY KEY,
  created_ns INTEGER NOT NULL,
  max_severity INTEGER NOT NULL,
  items INTEGER NOT NULL,
  payload BLOB NOT NULL);
)sql",
    // 3: job output. Symptoms from a job-wide log that no agent follows (the job's output file,
    // slurm-%j.out on a shared filesystem), extracted by `faultline job output` and posted to
    // /jobs/{id}/output: one row per (job, source), replaced by a repeated upload. The id only
    // grows (AUTOINCREMENT), so the verdict engine can watch it with a watermark.
    R"sql(
CREATE TABLE job_outputs(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  job_id TEXT NOT NULL,
  source TEXT NOT NULL,
  received_ns INTEGER NOT NULL,
  coverage TEXT NOT NULL,
  symptoms TEXT NOT NULL,
  UNIQUE(job_id, source));
)sql",
    // 4: node inventory. The latest inventory each node's agent sent in a heartbeat (GPUs, HCA
    // ports, network addresses), replaced when a newer one arrives: the verdict engine resolves
    // peer addresses to nodes and counts a node's GPUs with it.
    R"sql(
CREATE TABLE node_inventory(
  node TEXT PRIMARY KEY,
  agent_id TEXT NOT NULL,
  collected_ns INTEGER NOT NULL,
  received_ns INTEGER NOT NULL,
  inventory TEXT NOT NULL);
)sql",
    // 5: symptoms_by_rule goes. No query can use it (the API's rule filter is one of several
    // optional terms, `?2 = '' OR rule_id = ?2 ...`, which neither engine's planner answers from an
    // index; EXPLAIN QUERY PLAN: a rowid range), and every symptom written paid for its entry:
    // ~5.5 k of SQLite's instructions a row, more than the row's own insert into the table.
    R"sql(
DROP INDEX IF EXISTS symptoms_by_rule;
)sql",
    // 6: the verdict's window read (Store::symptomsForWindow) answered from the index alone. The
    // window's terms need first_ns, time_known and received_ns besides (node, last_ns); with only
    // those two in the index every row of the job's nodes was looked up in the table (~900-byte
    // rows), more than half the read's instructions. The wider entries cost the grouped ingest 1.6 %.
    R"sql(
DROP INDEX IF EXISTS symptoms_by_node_time;
CREATE INDEX symptoms_by_node_time ON symptoms(node, last_ns, first_ns, time_known, received_ns);
)sql",
    // 7: what the verdict takes from a node's inventory, in columns of its own, written with the
    // inventory: the GPU count (-1: the agent could not read the GPU list; -2: a row stored before
    // this migration, whose inventory text is read instead) and the addresses (a JSON array).
    // Parsing every node's whole inventory was half of a 2,000-node job's verdict.
    R"sql(
ALTER TABLE node_inventory ADD COLUMN gpu_count INTEGER NOT NULL DEFAULT -2;
ALTER TABLE node_inventory ADD COLUMN addresses TEXT NOT NULL DEFAULT '[]';
)sql",
    // 8: issue 30, evidence without rules. The templates of the error lines no rule matched, as
    // agents ship them with their batches (one row per template and batch: text, lines, first
    // line and time, kind of source; aggregator/store/template_store.h), pruned with the symptoms;
    // each job's workload (name, user, partition), so a verdict can take the same workload's
    // earlier successful jobs as its baseline; and a job output's templates (`faultline job
    // output` mines the job's output file as agents mine their logs).
    R"sql(
CREATE TABLE unmatched_templates(
  id INTEGER PRIMARY KEY,
  node TEXT NOT NULL,
  seen_ns INTEGER NOT NULL,
  time_known INTEGER NOT NULL,
  received_ns INTEGER NOT NULL,
  source_kind TEXT NOT NULL,
  count INTEGER NOT NULL,
  template TEXT NOT NULL,
  first_line TEXT NOT NULL);
CREATE INDEX unmatched_templates_by_node_time ON unmatched_templates(node, seen_ns);
CREATE INDEX unmatched_templates_by_received ON unmatched_templates(received_ns);
ALTER TABLE jobs ADD COLUMN name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN user_name TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN partition_name TEXT NOT NULL DEFAULT '';
CREATE INDEX jobs_by_workload ON jobs(name, user_name, partition_name, end_ns);
ALTER TABLE job_outputs ADD COLUMN unmatched TEXT NOT NULL DEFAULT '[]';
)sql",
    // 9: compact symptom rows. A symptom's payload held the whole symptom as JSON, repeating the
    // row's columns beside it (rule, node, device, times, severity ...): ~900 bytes a row. It now
    // holds only what no column does, in a small length-prefixed encoding (symptom_codec.h). No
    // DDL: the stored rows are rewritten (compactSymptomPayloads, maintenance_store.cpp); the
    // column stays TEXT on both engines (the encoding is UTF-8 text without NUL).
    "",
    // 10: packed symptom rows. The compact payload is still mostly log text (evidence lines, the
    // source's path, the summary: ~510 of a row's ~700 bytes), alike from row to row but for host
    // names, numbers and times. Each row's is now compressed on its own with a zstd dictionary
    // trained from the store's own payloads (symptom_dictionary.h), kept here and never changed:
    // a packed payload names its dictionary. The rows are rewritten after this SQL
    // (packSymptomPayloads, symptom_pack.cpp); on PostgreSQL the payload column becomes BYTEA
    // there (a packed payload is binary; SQLite keeps its TEXT column and stores blobs in it).
    R"sql(
CREATE TABLE symptom_dictionaries(
  id INTEGER PRIMARY KEY,
  dictionary BLOB NOT NULL);
)sql",
    // 11: when each source began to count for the verdicts' coverage (records read, ok or
    // partial; 0 while it does not): a node's log first counted after its job's final revision
    // changes what the verdict may say (which nodes printed a line, of those with that kind of
    // log), and the verdict engine's tick finds such sources by this column (`late_coverage`).
    // Sources counting before the upgrade count from long ago (1): not news to any verdict.
    R"sql(
ALTER TABLE source_status ADD COLUMN counted_ns INTEGER NOT NULL DEFAULT 0;
UPDATE source_status SET counted_ns = 1 WHERE records > 0 AND status IN ('ok', 'partial');
CREATE INDEX source_status_by_counted ON source_status(counted_ns);
)sql",
};

const size_t kStoreMigrationCount = std::size(kStoreMigrations);

}  // namespace faultline::aggregator

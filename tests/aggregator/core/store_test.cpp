#include "aggregator/store/store.h"
#include "aggregator/store/migrations.h"
#include "aggregator/store/store_internal.h"

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

TEST_CASE("store: migrations set user_version and reopen is idempotent", "[store][sqlite]") {
  TempDir dir;
  ManualClock clock(kT0);
  {
    auto store = openStore(dir.file("a.db"), clock);
    CHECK(store->schemaVersion() == Store::latestSchemaVersion());
  }
  auto again = openStore(dir.file("a.db"), clock);
  CHECK(again->schemaVersion() == Store::latestSchemaVersion());
  // A file from a newer aggregator is refused rather than misread.
  {
    sqlite3* db = nullptr;
    sqlite3_open(dir.file("a.db").c_str(), &db);
    sqlite3_exec(db, "PRAGMA user_version=99", nullptr, nullptr, nullptr);
    sqlite3_close(db);
  }
  again.reset();
  std::string error;
  CHECK_FALSE(Store::open(dir.file("a.db"), clock, {}, &error));
  CHECK_THAT(error, Catch::Contains("newer"));
}

TEST_CASE("store: a database of the previous schema is upgraded in place, its rows kept", "[store][sqlite]") {
  TempDir dir;
  ManualClock clock(kT0);
  // The schema as the previous release left it (every migration but the newest), with a job in it.
  {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(dir.file("old.db").c_str(), &db) == SQLITE_OK);
    REQUIRE(kStoreMigrationCount >= 3);
    for (size_t i = 0; i < kStoreMigrationCount - 1; ++i)
      REQUIRE(sqlite3_exec(db, kStoreMigrations[i], nullptr, nullptr, nullptr) == SQLITE_OK);
    // And an inventory as migrations 4-6 stored it: the text alone.
    const std::string fill = "INSERT INTO jobs(job_id, state, terminal_state, end_ns, nodelist, updated_ns) "
                             "VALUES('41', 'FAILED', 'fail', 1, 'gpu-01', 1); "
                             "INSERT INTO node_inventory(node, agent_id, collected_ns, received_ns, inventory) "
                             "VALUES('gpu-02', 'agent-gpu-02', 1, 1, '{\"addresses\":[\"10.0.0.2\",\"fd00::2\"],"
                             "\"collected_ns\":1,\"gpu_error\":\"\",\"gpus\":[{\"index\":0},{\"index\":1}],"
                             "\"hca_error\":\"\",\"hcas\":[]}'); "
                             "INSERT INTO node_inventory(node, agent_id, collected_ns, received_ns, inventory) "
                             "VALUES('gpu-03', 'agent-gpu-03', 1, 1, '{\"addresses\":[],\"gpu_error\":\"nvidia-smi: "
                             "exit status 9\",\"gpus\":[]}'); PRAGMA user_version=" +
                             std::to_string(kStoreMigrationCount - 1);
    REQUIRE(sqlite3_exec(db, fill.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
  }
  auto store = openStore(dir.file("old.db"), clock);
  CHECK(store->schemaVersion() == Store::latestSchemaVersion());
  REQUIRE(store->job("41"));
  CHECK(store->job("41")->info.state == "FAILED");
  // The new table works in the upgraded file.
  JobOutput o;
  o.job_id = "41";
  o.source = o.coverage.source = "/shared/slurm-41.out";
  o.symptoms = {makeSymptom("", "python.exception", kT0, common::SubDomain::kApplication)};
  std::string error;
  REQUIRE(store->putJobOutput(o, &error));
  REQUIRE(store->jobOutputs("41").size() == 1);
  CHECK(store->jobOutputs("41")[0].symptoms.at(0).rule_id == "python.exception");
  // Migration 4: node inventories.
  HeartbeatInfo hb;
  hb.agent_id = "agent-gpu-01";
  hb.hostname = "gpu-01";
  hb.inventory = common::NodeInventory{};
  hb.inventory->addresses = {"10.0.0.1"};
  REQUIRE(store->recordHeartbeat(hb, hb.agent_id, &error));
  CHECK(store->inventories({"gpu-01"}).at("gpu-01").addresses == std::vector<std::string>{"10.0.0.1"});
  // Migration 7: the verdict's facts, from the new columns, and from the text for a row stored
  // before them.
  auto facts = store->inventoryFacts({"gpu-01", "gpu-02", "gpu-03", "gpu-04"});
  REQUIRE(facts.size() == 3);
  CHECK(facts.at("gpu-01").gpu_count == 0);
  CHECK(facts.at("gpu-01").addresses == std::vector<std::string>{"10.0.0.1"});
  CHECK(facts.at("gpu-02").gpu_count == 2);
  CHECK(facts.at("gpu-02").addresses == std::vector<std::string>{"10.0.0.2", "fd00::2"});
  CHECK_FALSE(facts.at("gpu-03").gpu_count);
  CHECK(facts.at("gpu-03").addresses.empty());
}

TEST_CASE("store: a batch is stored once, replays are duplicates, bad batches are rejected", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  auto b = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid79", kT0), makeSymptom("gpu-01", "gpu.xid48", kT0)});
  b.sources.push_back({"gpu-01", "kmsg", "kmsg", 10, 1, "ok", ""});

  auto r = store->ingestBatch(b, "agent-gpu-01");
  CHECK(r.status == IngestResult::Status::kStored);
  CHECK(r.symptoms == 2);
  CHECK(store->ingestBatch(b, "agent-gpu-01").status == IngestResult::Status::kDuplicate);
  CHECK(store->counts().symptoms == 2);
  CHECK(store->counts().batches == 1);

  // Same sequence after a reboot is a new batch.
  auto rebooted = b;
  rebooted.header.boot_id = "boot-2";
  CHECK(store->ingestBatch(rebooted, "agent-gpu-01").status == IngestResult::Status::kStored);
  CHECK(store->counts().symptoms == 4);

  SECTION("agent id must match the authenticated one") {
    auto bad = makeBatch("gpu-01", 7, {makeSymptom("gpu-01", "x", kT0)});
    auto rr = store->ingestBatch(bad, "agent-gpu-02");
    CHECK(rr.status == IngestResult::Status::kRejected);
    CHECK(rr.reason == "agent id mismatch");
  }
  SECTION("symptoms must be about the agent's own node") {
    auto bad = makeBatch("gpu-01", 8, {makeSymptom("gpu-02", "x", kT0)});
    CHECK(store->ingestBatch(bad, "agent-gpu-01").reason == "symptom for another node");
  }
  SECTION("a hostname belongs to one agent") {
    auto bad = makeBatch("gpu-01", 9, {});
    bad.header.agent_id = "intruder";
    CHECK(store->ingestBatch(bad, "intruder").reason == "hostname bound to another agent");
  }
  CHECK(store->counts().symptoms == 4);
  auto nodes = store->nodes();
  REQUIRE(nodes.size() == 1);
  CHECK(nodes[0].hostname == "gpu-01");
  REQUIRE(nodes[0].sources.size() == 1);
  CHECK(nodes[0].sources[0].records == 10);
  auto history = store->nodeHistory("gpu-01", 0);
  REQUIRE(history.size() == 2);  // agent_seen, then boot change
  CHECK(history[0].kind == "boot");
}

TEST_CASE("store: symptoms round-trip with every field", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  auto s = makeSymptom("n1", "ib.link_down", kT0 + 5 * kSec, common::SubDomain::kNetwork, common::Role::kCascade,
                       "mlx5_0/1");
  s.fields = {{"port", "1"}, {"peer", "sw1/7"}};
  s.count = 12;
  s.last_ns = kT0 + 9 * kSec;
  s.boot_id = "b";
  REQUIRE(store->ingestBatch(makeBatch("n1", 1, {s}), "agent-n1").status == IngestResult::Status::kStored);
  int64_t max_id = 0;
  auto got = store->symptomsForWindow({"n1"}, kT0, kT0 + 60 * kSec, kT0 + 60 * kSec, &max_id);
  REQUIRE(got.size() == 1);
  CHECK(max_id > 0);
  CHECK(symptomToJson(got[0]) == symptomToJson(s));
  // Outside the window or on another node: nothing.
  CHECK(store->symptomsForWindow({"n1"}, kT0 + 10 * kSec, kT0 + 60 * kSec, 0, nullptr).empty());
  CHECK(store->symptomsForWindow({"n2"}, kT0, kT0 + 60 * kSec, 0, nullptr).empty());
  SymptomFilter f;
  f.rule_id = "ib.*";
  CHECK(store->symptoms(f).size() == 1);
  f.rule_id = "gpu.*";
  CHECK(store->symptoms(f).empty());
}

TEST_CASE("store: new symptoms as spans per node, for the verdict tick", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  // Nodes interleaved in id order; an untimed symptom counts by when it arrived.
  auto late = makeSymptom("n2", "gpu.xid79", kT0 + 30 * kSec);
  late.last_ns = kT0 + 40 * kSec;
  auto untimed = makeSymptom("n1", "python.exception", 0, common::SubDomain::kApplication);
  untimed.time_known = false;
  REQUIRE(store->ingestBatch(makeBatch("n2", 1, {makeSymptom("n2", "gpu.xid48", kT0 + 20 * kSec)}), "agent-n2").status ==
          IngestResult::Status::kStored);
  const int64_t first_id = store->maxSymptomId();
  REQUIRE(store->ingestBatch(makeBatch("n1", 1, {makeSymptom("n1", "gpu.xid48", kT0 + 10 * kSec)}), "agent-n1").status ==
          IngestResult::Status::kStored);
  REQUIRE(store->ingestBatch(makeBatch("n2", 2, {late}), "agent-n2").status == IngestResult::Status::kStored);
  clock.advance(100 * kSec);
  REQUIRE(store->ingestBatch(makeBatch("n1", 2, {untimed}), "agent-n1").status == IngestResult::Status::kStored);
  REQUIRE(store->ingestBatch(makeBatch("n3", 1, {makeSymptom("n3", "gpu.xid48", kT0)}), "agent-n3").status ==
          IngestResult::Status::kStored);
  const int64_t last_id = store->maxSymptomId();

  auto spans = store->symptomsSince(0, last_id - 1);  // the bounds: after 0, up to the one before n3's
  REQUIRE(spans.size() == 2);
  CHECK(spans[0].node == "n1");
  CHECK(spans[0].first_ns == kT0 + 10 * kSec);
  CHECK(spans[0].last_ns == kT0 + 100 * kSec);  // the untimed one, received then
  CHECK(spans[0].max_id == last_id - 1);
  CHECK(spans[0].untimed);
  CHECK(spans[1].node == "n2");
  CHECK(spans[1].first_ns == kT0 + 20 * kSec);
  CHECK(spans[1].last_ns == kT0 + 40 * kSec);
  CHECK(spans[1].max_id == last_id - 2);
  CHECK_FALSE(spans[1].untimed);
  spans = store->symptomsSince(first_id);
  REQUIRE(spans.size() == 3);
  CHECK(spans[1].node == "n2");
  CHECK(spans[1].first_ns == kT0 + 30 * kSec);  // its first symptom is at or before the bound
  CHECK(spans[2].node == "n3");
  CHECK(spans[2].max_id == last_id);
  CHECK(store->symptomsSince(last_id).empty());
}

TEST_CASE("store: heartbeats record liveness, reported-up-to and source status", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  HeartbeatInfo hb;
  hb.agent_id = "agent-n1";
  hb.hostname = "n1";
  hb.boot_id = "b1";
  hb.created_ns = kT0 - kSec;
  hb.sources = {{"journal", "journal", "ok", "", 100, 0, 0}, {"kmsg", "kmsg", "error", "EACCES", 0, 0, 0}};
  std::string reason;
  REQUIRE(store->recordHeartbeat(hb, "agent-n1", &reason));
  auto n = store->node("n1");
  REQUIRE(n);
  CHECK(n->reported_ns == kT0 - kSec);
  CHECK(n->last_heartbeat_ns == kT0);
  REQUIRE(n->sources.size() == 2);
  CHECK(n->sources[1].status == "error");
  // With batches still spooled, the node has not reported up to its heartbeat time.
  hb.created_ns = kT0 + 100 * kSec;
  hb.spool_batches = 3;
  REQUIRE(store->recordHeartbeat(hb, "agent-n1", &reason));
  CHECK(store->node("n1")->reported_ns == kT0 - kSec);
  CHECK_FALSE(store->recordHeartbeat(hb, "agent-other", &reason));
  CHECK(reason == "agent id mismatch");
  auto agents = store->agents();
  REQUIRE(agents.size() == 1);
  CHECK(agents[0].spool_batches == 3);
}

TEST_CASE("store: job updates merge, a late start never reopens an ended job", "[store][jobs]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  std::string error;
  JobUpdate start;
  start.job_id = "42";
  start.state = "RUNNING";
  start.start_ns = kT0;
  start.nodelist = "gpu-[01-03]";
  start.source = "cli";
  auto j = store->recordJob(start, &error);
  REQUIRE(j);
  CHECK(j->info.nodes == std::vector<std::string>{"gpu-01", "gpu-02", "gpu-03"});
  CHECK_FALSE(j->ended());
  JobUpdate end;
  end.job_id = "42";
  end.state = "FAILED";
  end.exit_code = "1:0";
  end.end_ns = kT0 + 600 * kSec;
  end.source = "cli";
  j = store->recordJob(end, &error);
  REQUIRE(j);
  CHECK(j->terminal_state == "fail");
  CHECK(j->info.start_ns == kT0);
  CHECK(j->end_recorded_ns == kT0);
  CHECK(store->recordJob(start, &error)->terminal_state == "fail");
  CHECK(store->jobsAwaitingVerdict().size() == 1);
  CHECK(store->jobsAt("gpu-02", kT0 + 700 * kSec, kT0 + 700 * kSec, 0, 120 * kSec) == std::vector<std::string>{"42"});
  CHECK(store->jobsAt("gpu-02", kT0 + 800 * kSec, kT0 + 800 * kSec, 0, 120 * kSec).empty());
  CHECK(store->jobsAt("gpu-04", kT0 + 10 * kSec, kT0 + 10 * kSec, 0, 0).empty());
  JobFilter f;
  f.node = "gpu-03";
  CHECK(store->jobs(f).size() == 1);
  f.state = "success";
  CHECK(store->jobs(f).empty());

  JobUpdate bad;
  bad.job_id = "bad id; drop";
  CHECK_FALSE(store->recordJob(bad, &error));
  bad.job_id = "43";
  bad.nodelist = "gpu-[01-";
  CHECK_FALSE(store->recordJob(bad, &error));
  bad.nodelist = "";
  bad.start_ns = kT0;
  bad.end_ns = kT0 - 1;
  CHECK_FALSE(store->recordJob(bad, &error));
}

TEST_CASE("store: verdict revisions keep history", "[store][verdicts]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  VerdictRow v;
  v.job_id = "7";
  v.status = "provisional";
  v.reason = "job_end";
  v.diagnosis.job_id = "7";
  v.diagnosis.sub_domain = common::SubDomain::kHardware;
  v.diagnosis.responsible = {{"gpu-01", "0000:3b:00.0", 0.9}};
  v.diagnosis.terminal_state = "fail";
  v.max_symptom_id = 41;
  v.symptoms = 12;
  std::string error;
  CHECK(store->addVerdict(v, &error) == 1);
  // The tick's view of it: the row and the diagnosis's terminal state, without the diagnosis.
  auto open = store->openVerdictHeads();
  REQUIRE(open.size() == 1);
  CHECK(open[0].job_id == "7");
  CHECK(open[0].revision == 1);
  CHECK(open[0].status == "provisional");
  CHECK(open[0].terminal_state == "fail");
  CHECK(open[0].max_symptom_id == 41);
  CHECK(open[0].symptoms == 12);
  v.status = "final";
  v.diagnosis.sub_domain = common::SubDomain::kNetwork;
  v.diagnosis.terminal_state = "node_fail";
  CHECK(store->addVerdict(v, &error) == 2);
  CHECK(store->openVerdictHeads().empty());
  REQUIRE(store->latestVerdictHead("7"));
  CHECK(store->latestVerdictHead("7")->revision == 2);
  CHECK(store->latestVerdictHead("7")->terminal_state == "node_fail");
  CHECK_FALSE(store->latestVerdictHead("8"));
  auto latest = store->latestVerdict("7");
  REQUIRE(latest);
  CHECK(latest->revision == 2);
  CHECK(latest->diagnosis.sub_domain == common::SubDomain::kNetwork);
  auto history = store->verdictHistory("7");
  REQUIRE(history.size() == 2);
  CHECK(history[0].diagnosis.sub_domain == common::SubDomain::kHardware);
  CHECK(store->openVerdicts().empty());
  CHECK(store->nodeHistory("gpu-01", 0).size() == 2);
}

namespace {
// Ten symptoms of node n1 (rules r0..r9) stamped kT0: one batch of the pruning tests.
std::vector<common::Symptom> tenSymptoms() {
  std::vector<common::Symptom> ss;
  for (int i = 0; i < 10; ++i) ss.push_back(makeSymptom("n1", "r" + std::to_string(i), kT0));
  return ss;
}
}  // namespace

TEST_CASE("store: the verdict's window read is answered from the index alone", "[store][sqlite]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("w.db"), clock);
  for (uint64_t seq = 1; seq <= 3; ++seq)
    REQUIRE(store->ingestBatch(makeBatch("n1", seq, tenSymptoms()), "agent-n1").status == IngestResult::Status::kStored);
  store.reset();
  std::string error;
  auto db = sql::Db::open(dir.file("w.db"), true, &error);
  REQUIRE(db);
  // The plan of the ids-and-nodes read (a verdict whose symptoms the cache holds): no row of the
  // table is looked up, every term is in symptoms_by_node_time.
  sql::Stmt plan(db->get(), "EXPLAIN QUERY PLAN " + windowQuery("id, node", db->jsonList(1)));
  std::string details;
  while (plan.step() == sql::kRow) details += plan.text(3) + "\n";
  INFO(details);
  CHECK_THAT(details, Catch::Contains("USING COVERING INDEX symptoms_by_node_time"));
  // The read with payloads needs the table, through the same index.
  sql::Stmt full(db->get(), "EXPLAIN QUERY PLAN " + windowQuery("id, node, payload", db->jsonList(1)));
  details.clear();
  while (full.step() == sql::kRow) details += full.text(3) + "\n";
  INFO(details);
  CHECK_THAT(details, Catch::Contains("USING INDEX symptoms_by_node_time"));
}

TEST_CASE("store: pruning deletes old rows in bounded steps", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  for (uint64_t seq = 1; seq <= 50; ++seq) {
    std::vector<common::Symptom> ss = tenSymptoms();
    REQUIRE(store->ingestBatch(makeBatch("n1", seq, ss), "agent-n1").status == IngestResult::Status::kStored);
  }
  clock.advance(10 * kSec);
  REQUIRE(store->ingestBatch(makeBatch("n1", 51, {makeSymptom("n1", "fresh", kT0 + 10 * kSec)}), "agent-n1").status ==
          IngestResult::Status::kStored);
  size_t steps = 0, total = 0;
  while (true) {
    size_t n = store->pruneStep(kT0 + 5 * kSec, 0, 64);
    CHECK(n <= 64);
    total += n;
    ++steps;
    if (n < 64) break;
  }
  CHECK(steps > 5);
  CHECK(total >= 550);
  auto c = store->counts();
  CHECK(c.symptoms == 1);
  CHECK(c.batches == 1);
}

TEST_CASE("store: a prune pass walks on from where its last step stopped, the next pass starts over", "[store]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("s.db"), clock);
  // Received at kT0, kT0 + 1 s, ...: 20 batches of 10, and in batch 3 one symptom stamped 100 s
  // ahead (a node clock ahead): not old enough for a cutoff before kT0 + 100 s.
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    std::vector<common::Symptom> ss = tenSymptoms();
    if (seq == 3) ss.back() = makeSymptom("n1", "ahead", kT0 + 100 * kSec);
    REQUIRE(store->ingestBatch(makeBatch("n1", seq, ss), "agent-n1").status == IngestResult::Status::kStored);
    clock.advance(kSec);
  }
  // Pass 1: steps of 7 rows split the batches that share a receive time; all but the row ahead go.
  size_t steps = 0, total = 0;
  for (size_t n = 7; n == 7; ++steps) {
    n = store->pruneStep(kT0 + 50 * kSec, 0, 7);
    CHECK(n <= 7);
    total += n;
  }
  CHECK(steps > 20);
  CHECK(store->counts().symptoms == 1);
  CHECK(store->counts().batches == 0);
  // Pass 2, later: the row left behind the cursor is old enough now and goes.
  total = 0;
  for (size_t n = 7; n == 7;) total += n = store->pruneStep(kT0 + 200 * kSec, 0, 7);
  CHECK(total == 1);
  CHECK(store->counts().symptoms == 0);
}

// The aggregator's prune timer against a job event stamped further back than the job retention
// (the agents e2e tests replay samples that ended in 2024; a site relay catching up or a backfill
// does the same): the end is acknowledged, the next prune pass runs, the CLI reads the job.
TEST_CASE("store: a job event is kept for the job retention after it was acknowledged, however long ago the "
          "job ended",
          "[store]") {
  TempDir dir;
  constexpr int64_t kDay = 86400 * kSec;
  const int64_t ended = kT0 + 3600 * kSec;
  ManualClock clock(kT0 + 900 * kDay);  // two and a half years after the job ended
  auto store = openStore(dir.file("s.db"), clock);
  // The aggregator's pruning (AggregatorService::pruneStep) with its default retentions.
  auto prunePass = [&] {
    size_t total = 0;
    for (size_t n = 500; n == 500;)
      total += n = store->pruneStep(clock.nowNs() - 30 * kDay, clock.nowNs() - 180 * kDay, 500);
    return total;
  };
  // A job that ended and was recorded long ago goes, as before.
  {
    ManualClock then(ended);
    auto old = openStore(dir.file("s.db"), then);
    recordTestJob(*old, "41", "gpu-[01-02]", kT0, ended, "FAILED");
  }
  // `faultline job end 42 --time <2024>` now: acknowledged (recordJob returned the row: HTTP 200).
  recordTestJob(*store, "42", "gpu-[01-02]", kT0, ended, "FAILED");
  VerdictRow v;
  v.job_id = "42";
  v.created_ns = clock.nowNs();
  v.status = "provisional";
  v.reason = "job_end";
  std::string error;
  REQUIRE(store->addVerdict(v, &error) == 1);
  clock.advance(60 * kSec);  // the prune timer's first pass
  CHECK(prunePass() > 0);
  // Read as the CLI and the e2e tests read: a store opened read-only for the read.
  auto readJob = [&](const std::string& id) {
    StoreOptions o;
    o.read_only = true;
    auto reader = Store::open(storeTarget(dir.file("s.db")), clock, o, &error);
    INFO(error);
    REQUIRE(reader);
    return reader->job(id);
  };
  CHECK_FALSE(readJob("41"));
  auto row = readJob("42");
  REQUIRE(row);
  CHECK(row->info.nodes == std::vector<std::string>{"gpu-01", "gpu-02"});
  CHECK(store->latestVerdict("42"));
  // Retention still ends it: the job retention after the event, the next pass deletes it.
  clock.advance(180 * kDay);
  CHECK(prunePass() > 0);
  CHECK_FALSE(readJob("42"));
  CHECK_FALSE(store->latestVerdict("42"));
}

// The child process ingests batches as fast as it can and reports each commit on a pipe; the
// parent kills it with SIGKILL mid-stream and checks the file: intact, and every batch either
// wholly present or wholly absent.
TEST_CASE("store: survives kill -9 during writes", "[store][crash][sqlite]") {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  constexpr int kPerBatch = 20;
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    SystemClock clock;
    std::string error;
    auto store = Store::open(path, clock, {}, &error);
    if (!store) _exit(3);
    for (uint64_t seq = 1;; ++seq) {
      std::vector<common::Symptom> ss;
      for (int i = 0; i < kPerBatch; ++i) ss.push_back(makeSymptom("n1", "r" + std::to_string(i), kT0 + int64_t(seq)));
      if (store->ingestBatch(makeBatch("n1", seq, ss), "agent-n1").status != IngestResult::Status::kStored) _exit(4);
      char c = 'x';
      if (write(fds[1], &c, 1) != 1) _exit(5);
    }
  }
  close(fds[1]);
  // Wait for a few hundred commits, then kill while it is writing the next ones.
  int committed = 0;
  char buf[64];
  while (committed < 300) {
    ssize_t n = read(fds[0], buf, sizeof buf);
    REQUIRE(n > 0);
    committed += static_cast<int>(n);
  }
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  close(fds[0]);
  CHECK(WIFSIGNALED(status));

  ManualClock clock(kT0);
  auto store = openStore(path, clock);
  sqlite3* raw = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &raw) == SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  sqlite3_prepare_v2(raw, "PRAGMA integrity_check", -1, &st, nullptr);
  REQUIRE(sqlite3_step(st) == SQLITE_ROW);
  CHECK(std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, 0))) == "ok");
  sqlite3_finalize(st);
  sqlite3_close(raw);
  auto c = store->counts();
  CHECK(c.batches >= 300);
  CHECK(c.symptoms == c.batches * kPerBatch);
  // The agent resends what it did not get acked: the stored ones are duplicates, the rest land.
  auto replay = makeBatch("n1", 1, {makeSymptom("n1", "r0", kT0)});
  CHECK(store->ingestBatch(replay, "agent-n1").status == IngestResult::Status::kDuplicate);
}

// `faultline store migrate` (the real binary): a SQLite store filled from the samples into a
// PostgreSQL database started by ctest (FAULTLINE_TEST_PG, the [pg] pass).
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "aggregator/http/api.h"
#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/offline/bundle.h"
#include "aggregator/store/db.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "common/rule_engine.h"
#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;
namespace fs = std::filesystem;

namespace {

// Every row of `table`, each rendered as one string (columns by the SQLite declared type), sorted.
std::vector<std::string> dumpTable(sql::Db& db, const std::string& table,
                                   const std::vector<std::pair<std::string, std::string>>& columns) {
  std::string names;
  for (const auto& [name, type] : columns) names += (names.empty() ? "" : ", ") + name;
  sql::Stmt s(db.get(), "SELECT " + names + " FROM " + table);
  std::vector<std::string> rows;
  int rc;
  while ((rc = s.step()) == sql::kRow) {
    std::string row;
    for (size_t c = 0; c < columns.size(); ++c) {
      const int col = static_cast<int>(c);
      const std::string& type = columns[c].second;
      if (s.isNull(col)) row += "NULL";
      else if (type.find("INT") != std::string::npos) row += std::to_string(s.i64(col));
      else if (type == "REAL") row += fmt::format("{}", s.f64(col));
      else if (type == "BLOB") {
        for (unsigned char ch : s.view(col)) row += fmt::format("{:02x}", ch);
      } else row += "'" + std::string(s.view(col)) + "'";
      row += "|";
    }
    rows.push_back(std::move(row));
  }
  REQUIRE(rc == sql::kDone);
  std::sort(rows.begin(), rows.end());
  return rows;
}

int64_t maxOf(sql::Db& db, const std::string& table, const std::string& column) {
  sql::Stmt s(db.get(), "SELECT COALESCE(MAX(" + column + "), 0) FROM " + table);
  REQUIRE(s.step() == sql::kRow);
  return s.i64(0);
}

VerdictOptions testVerdictOptions() {
  VerdictOptions o;
  o.settle_ns = 60 * kSec;
  o.window_margin_ns = 30 * kSec;
  o.agent_timeout_ns = 90 * kSec;
  o.final_timeout_ns = 1800 * kSec;
  return o;
}

// Every sample with an end into one store, as the aggregator gets it: inventories by heartbeat,
// node symptoms by agent batches, job-wide logs by `faultline job output`, the job's end, the
// verdict. Job ids carry the sample's name (several samples share ids). Returns the jobs judged.
std::vector<std::string> fillFromSamples(Store& store, ManualClock& clock, VerdictEngine& engine,
                                         const common::RuleEngine& rules) {
  std::vector<fs::path> samples;
  for (const auto& e : fs::directory_iterator(FAULTLINE_SOURCE_DIR "/samples"))
    if (fs::exists(e.path() / "expected.json")) samples.push_back(e.path());
  std::sort(samples.begin(), samples.end());
  REQUIRE(samples.size() >= 10);
  std::vector<std::string> judged;
  uint64_t sequence = 0;
  for (const auto& dir : samples) {
    std::string error;
    auto bundle = offline::loadBundle(dir.string(), rules, &error);
    INFO(dir.string() << ": " << error);
    REQUIRE(bundle);
    if (!bundle->job.end_ns) continue;
    const std::string job_id = dir.filename().string() + "-" + (bundle->job.job_id.empty() ? "job" : bundle->job.job_id);
    for (const auto& [node, info] : bundle->nodes) {
      if (!info.gpu_count && info.addresses.empty()) continue;
      HeartbeatInfo hb;
      hb.inventory.emplace();
      hb.inventory->addresses = info.addresses;
      for (int i = 0; i < info.gpu_count.value_or(0); ++i) hb.inventory->gpus.push_back({uint32_t(i), "", "", ""});
      hb.agent_id = "agent-" + node;
      hb.hostname = node;
      hb.boot_id = "boot-1";
      hb.created_ns = clock.nowNs();
      hb.sources = {{"kmsg", "kmsg", "ok", "", 10, 0, 0}};
      REQUIRE(store.recordHeartbeat(hb, hb.agent_id, &error));
    }
    std::map<std::string, common::SymptomBatchData> batches;
    std::map<std::string, JobOutput> outputs;
    for (const auto& s : bundle->symptoms) {
      // Not under nodes/ (the job's output; a Kubernetes bundle's kube/ events and pods/ logs): an upload.
      if (fs::path(s.source).lexically_relative(dir).string().rfind("nodes/", 0) != 0) {
        auto& o = outputs[s.source];
        o.job_id = job_id;
        o.source = o.coverage.source = s.source;
        o.symptoms.push_back(s);
        continue;
      }
      auto& b = batches[s.node];
      if (b.header.hostname.empty()) b = makeBatch(s.node, ++sequence, {});
      b.symptoms.push_back(s);
    }
    // The error lines no rule matched, as the nodes' agents would ship them (issue 30).
    for (const auto& t : bundle->unmatched)
      for (const auto& [node, count] : t.nodes) {
        if (!bundle->nodes.count(node)) continue;
        auto& b = batches[node];
        if (b.header.hostname.empty()) b = makeBatch(node, ++sequence, {});
        b.unmatched.push_back({t.text, count, t.first_line, t.time_known ? t.first_ns : bundle->job.end_ns,
                               t.time_known, t.kinds.empty() ? common::SourceKind::kApplication : *t.kinds.begin()});
      }
    for (auto& [node, b] : batches)
      REQUIRE(store.ingestBatch(b, b.header.agent_id).status == IngestResult::Status::kStored);
    for (auto& [source, o] : outputs) REQUIRE(store.putJobOutput(o, &error));
    JobUpdate u = jobUpdateOf(bundle->job, job_id);
    u.source = "test";
    u.workload = {dir.filename().string(), "tester", "gpu"};
    REQUIRE(store.recordJob(u, &error));
    clock.advance(kSec);
    if (!store.job(job_id)->failed()) continue;
    REQUIRE(engine.onJobEnded(job_id));
    judged.push_back(job_id);
  }
  return judged;
}

// What a store shows of its symptoms, as text: the API's symptom, job, node and agent answers and
// each judged job's verdict evaluated afresh (its window read: every payload decoded, no cache).
std::vector<std::string> shownByStore(Store& store, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
                                      const std::vector<std::string>& judged) {
  Metrics metrics;
  VerdictEngine engine(store, clock, rules, testVerdictOptions());
  Api api(store, &engine, metrics, clock, ApiOptions{});
  std::vector<std::string> shown;
  auto get = [&](const std::string& target) {
    auto r = api.handle({"GET", target, "", ""});
    shown.push_back(target + " " + std::to_string(r.status) + " " + r.body);
  };
  get("/symptoms?since=36500d&limit=100000");
  get("/nodes");
  get("/agents");
  std::set<std::string> nodes;
  for (const auto& id : judged) {
    get("/jobs/" + id);
    get("/jobs/" + id + "/diagnosis");
    auto job = store.job(id);
    REQUIRE(job);
    nodes.insert(job->info.nodes.begin(), job->info.nodes.end());
    const VerdictRow v = engine.evaluate(*job, "test");
    shown.push_back(id + " evaluated: " + std::to_string(v.symptoms) + " " + std::to_string(v.max_symptom_id) + " " +
                    common::toJson(v.diagnosis).dump());
  }
  // A node's page (its symptoms, history and record) for one node in eight: each takes ~10 ms.
  size_t k = 0;
  for (const auto& node : nodes)
    if (k++ % 8 == 0) get("/nodes/" + node + "?since=36500d");
  return shown;
}

// The symptom rows' payloads: how many begin with `tag` (kCompactPayloadTag, kPackedPayloadTag),
// how many there are, and their bytes.
std::pair<size_t, size_t> payloadsTagged(sql::Db& db, char tag, size_t* bytes) {
  sql::Stmt s(db.get(), "SELECT payload FROM symptoms");
  size_t tagged = 0, rows = 0;
  *bytes = 0;
  while (s.step() == sql::kRow) {
    const auto p = s.view(0);
    ++rows;
    *bytes += p.size();
    if (!p.empty() && p[0] == tag) ++tagged;
  }
  return {tagged, rows};
}

// The store as the schema before migration 10 held it: no dictionaries, every packed payload
// compact again, the payload column TEXT on PostgreSQL. With `to_json`, also as before migration
// 9: every payload the whole symptom as JSON (`stored`: the store's symptoms, read before).
// The store must have been filled without packing (StoreOptions::dictionary_train_rows 0).
void rewindSchema(sql::Db& raw, const std::vector<StoredSymptom>* to_json = nullptr) {
  size_t bytes = 0;
  REQUIRE(payloadsTagged(raw, kPackedPayloadTag, &bytes).first == 0);
  sql::Transaction tx(raw);
  // Migration 11's column (with its index), then 10's table.
  REQUIRE(raw.exec("DROP INDEX source_status_by_counted"));
  REQUIRE(raw.exec("ALTER TABLE source_status DROP COLUMN counted_ns"));
  REQUIRE(raw.exec("DROP TABLE symptom_dictionaries"));
  if (raw.postgres())
    REQUIRE(raw.exec("ALTER TABLE symptoms ALTER COLUMN payload TYPE TEXT USING convert_from(payload, 'UTF8')"));
  if (to_json) {
    sql::Stmt legacy(raw, "UPDATE symptoms SET payload = ? WHERE id = ?");
    for (const auto& s : *to_json) {
      legacy.reset();
      legacy.bind(1, symptomJsonText(s.symptom)).bind(2, s.id);
      REQUIRE(legacy.step() == sql::kDone);
    }
  }
  const int version = to_json ? 8 : 9;
  REQUIRE(raw.exec(raw.postgres() ? fmt::format("DELETE FROM faultline_schema WHERE version > {}", version)
                                  : fmt::format("PRAGMA user_version={}", version)));
  REQUIRE(tx.commit());
}

// A store at `target` filled from the samples (fillFromSamples) by a writer with `options`; the
// jobs judged into *judged.
std::unique_ptr<Store> filledStore(const std::string& target, ManualClock& clock, const StoreOptions& options,
                                   std::shared_ptr<const common::RuleSet> rules, std::vector<std::string>* judged) {
  common::RuleEngine engine_rules(rules);
  std::string error;
  auto store = Store::open(target, clock, options, &error);
  INFO(error);
  REQUIRE(store);
  VerdictEngine engine(*store, clock, rules, testVerdictOptions());
  *judged = fillFromSamples(*store, clock, engine, engine_rules);
  REQUIRE(judged->size() >= 20);
  return store;
}

// The store at `target` opened again (its migrations run): every symptom row packed; their
// payloads' bytes into *packed_bytes.
std::unique_ptr<Store> reopenPacked(const std::string& target, const Clock& clock, const StoreOptions& options,
                                    size_t* packed_bytes) {
  std::string error;
  auto store = Store::open(target, clock, options, &error);
  INFO(error);
  REQUIRE(store);
  CHECK(store->schemaVersion() == Store::latestSchemaVersion());
  auto raw = sql::Db::open(target, false, &error);
  REQUIRE(raw);
  const auto [packed, rows] = payloadsTagged(*raw, kPackedPayloadTag, packed_bytes);
  CHECK(packed == rows);
  return store;
}

// The shipped rules (rules/).
std::shared_ptr<const common::RuleSet> rulesForSamples() {
  auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  return loaded.rules;
}

// A test over a store filled from the samples: the shipped rules, the store's target in a
// temporary directory, its clock, and the jobs the verdict tick judged with what the store showed
// for them before the migration.
struct SampleStoreCase {
  explicit SampleStoreCase(const std::string& file) : target(storeTarget(dir.file(file))) {}
  std::shared_ptr<const common::RuleSet> rules = rulesForSamples();
  TempDir dir;
  ManualClock clock{kT0};
  std::string target;
  std::string error;
  std::vector<std::string> judged, before;
};

// A writer as before migration 10 (compact rows, no dictionary) whose reads decode every payload
// (no cache).
StoreOptions compactNoCache() {
  StoreOptions o;
  o.symptom_cache_bytes = 0;
  o.dictionary_train_rows = 0;
  return o;
}

// Two stores' shownByStore, byte for byte.
void checkSameShown(const std::vector<std::string>& before, const std::vector<std::string>& after) {
  REQUIRE(after.size() == before.size());
  for (size_t i = 0; i < before.size(); ++i) {
    INFO(before[i].substr(0, 200));
    CHECK(after[i] == before[i]);
  }
}

}  // namespace

TEST_CASE("store: migration 9 compacts the symptom rows of a store filled from the samples, and the API and "
          "the verdicts read the same, byte for byte",
          "[store][migrate]") {
  SampleStoreCase c("compact.db");
  auto& [rules, dir, clock, target, error, judged, before] = c;
  StoreOptions no_cache = compactNoCache();
  size_t json_bytes = 0;
  {
    auto store = filledStore(target, clock, no_cache, rules, &judged);
    // The rows as a store of schema 8 holds them: the whole symptom as JSON in the payload.
    auto raw = sql::Db::open(target, false, &error);
    REQUIRE(raw);
    SymptomFilter all;
    all.limit = 1'000'000;
    const auto stored = store->symptoms(all);
    REQUIRE(stored.size() > 200);
    before = shownByStore(*store, clock, rules, judged);
    store.reset();
    rewindSchema(*raw, &stored);
    CHECK(payloadsTagged(*raw, kCompactPayloadTag, &json_bytes).first == 0);
  }
  // Opened again: migration 9 rewrites the rows (and 10 packs them).
  no_cache.dictionary_train_rows = 2048;
  size_t packed_bytes = 0;
  auto store = reopenPacked(target, clock, no_cache, &packed_bytes);
  CHECK(packed_bytes * 3 < json_bytes * 2);  // under two thirds of the JSON (compact alone: 54 %)
  checkSameShown(before, shownByStore(*store, clock, rules, judged));
  // And the rows the new writer makes read the same as the JSON ones did: a symptom with every
  // field set, its own boot id, several evidence lines and fields.
  auto s = makeSymptom("gpu-99", "gpu.xid.79", kT0, common::SubDomain::kHardware, common::Role::kRoot, "0000:3b:00.0");
  s.category = "gpu";
  s.fallback_root = true;
  s.source = "/var/log/kern.log";
  s.source_kind = common::SourceKind::kKernel;
  s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "second \"line\"", "third"};
  s.fields = {{"xid", "79"}, {"pci", "0000:3b:00"}, {"empty", ""}};
  s.summary = "GPU 0000:3b:00.0 fell off the bus";
  s.boot_id = "another-boot";
  s.count = 7;
  REQUIRE(store->ingestBatch(makeBatch("gpu-99", 1, {s}), "agent-gpu-99").status == IngestResult::Status::kStored);
  SymptomFilter one;
  one.nodes = {"gpu-99"};
  auto back = store->symptoms(one);
  REQUIRE(back.size() == 1);
  CHECK(symptomJsonText(back[0].symptom) == symptomJsonText(s));
}

TEST_CASE("store: migration 10 packs the compact symptom rows of a store filled from the samples, and the API "
          "and the verdicts read the same, byte for byte",
          "[store][migrate]") {
  SampleStoreCase c("packed.db");
  auto& [rules, dir, clock, target, error, judged, before] = c;
  StoreOptions options = compactNoCache();  // the writer of schema 9
  size_t compact_bytes = 0;
  {
    auto store = filledStore(target, clock, options, rules, &judged);
    before = shownByStore(*store, clock, rules, judged);
    store.reset();
    auto raw = sql::Db::open(target, false, &error);
    REQUIRE(raw);
    rewindSchema(*raw);
    const auto [compact, rows] = payloadsTagged(*raw, kCompactPayloadTag, &compact_bytes);
    CHECK(compact == rows);
    REQUIRE(rows > 200);
  }
  // Opened again (by a writer that would train its own dictionary much later): migration 10
  // trains one from the stored rows and packs them all.
  options.dictionary_train_rows = 1'000'000;
  size_t packed_bytes = 0;
  auto store = reopenPacked(target, clock, options, &packed_bytes);
  auto raw = sql::Db::open(target, false, &error);
  REQUIRE(raw);
  {
    sql::Stmt dicts(raw->get(), "SELECT COUNT(*) FROM symptom_dictionaries");
    REQUIRE(dicts.step() == sql::kRow);
    CHECK(dicts.i64(0) == 1);
  }  // done: an open read would keep SQLite's snapshot from seeing the row written below
  // The samples' rows: 44 % of the compact payloads' bytes (one dictionary trained from ~300 rows).
  CHECK(packed_bytes * 2 < compact_bytes);
  checkSameShown(before, shownByStore(*store, clock, rules, judged));
  // A new row is packed with the migration's dictionary and reads back as written.
  auto s = makeSymptom("gpu-99", "gpu.xid.79", kT0, common::SubDomain::kHardware, common::Role::kRoot, "0000:3b:00.0");
  s.source = "/var/log/kern.log";
  s.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "second \"line\""};
  s.fields = {{"xid", "79"}, {"pci", "0000:3b:00"}};
  s.summary = "GPU 0000:3b:00.0 fell off the bus";
  REQUIRE(store->ingestBatch(makeBatch("gpu-99", 1, {s}), "agent-gpu-99").status == IngestResult::Status::kStored);
  sql::Stmt last(raw->get(), "SELECT payload FROM symptoms WHERE node = 'gpu-99'");
  REQUIRE(last.step() == sql::kRow);
  CHECK(last.view(0)[0] == kPackedPayloadTag);
  SymptomFilter one;
  one.nodes = {"gpu-99"};
  auto back = store->symptoms(one);
  REQUIRE(back.size() == 1);
  CHECK(symptomJsonText(back[0].symptom) == symptomJsonText(s));
}

TEST_CASE("store: a writer that trains its dictionary after a few rows shows the same as one that never packs",
          "[store][migrate]") {
  const auto rules = rulesForSamples();
  TempDir dir;
  std::vector<std::string> shown[2];
  size_t packed[2] = {0, 0};
  for (int packing = 0; packing < 2; ++packing) {
    ManualClock clock{kT0};
    const std::string target = storeTarget(dir.file(packing ? "packing.db" : "compact.db"));
    StoreOptions options = compactNoCache();
    options.dictionary_train_rows = packing ? 64 : 0;
    std::string error;
    std::vector<std::string> judged;
    auto store = filledStore(target, clock, options, rules, &judged);
    shown[packing] = shownByStore(*store, clock, rules, judged);
    auto raw = sql::Db::open(target, false, &error);
    REQUIRE(raw);
    size_t bytes = 0;
    packed[packing] = payloadsTagged(*raw, kPackedPayloadTag, &bytes).first;
  }
  CHECK(packed[0] == 0);
  CHECK(packed[1] > 100);  // the rows after the first 64 (batches are whole: a few more stay compact)
  checkSameShown(shown[0], shown[1]);
}

TEST_CASE("store migrate: a SQLite store filled from the samples into PostgreSQL, every row and id kept",
          "[pg][migrate]") {
  const char* pg = std::getenv("FAULTLINE_TEST_PG");
  if (!pg || !*pg) {
    SUCCEED("FAULTLINE_TEST_PG is unset: the migration test runs in the [pg] pass (ctest starts the server)");
    return;
  }
  auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  common::RuleEngine rules(loaded.rules);
  TempDir dir;
  ManualClock clock{kT0};
  const std::string source = dir.file("source.db");
  const std::string target = storeTarget(dir.file("target"));
  std::vector<std::string> judged;
  {
    std::string error;
    StoreOptions packing;
    packing.dictionary_train_rows = 64;  // packed rows and a dictionary to copy
    auto store = Store::open(source, clock, packing, &error);
    REQUIRE(store);
    // The site relay on: verdict revisions queue in relay_pending, a small collect packs some of
    // them into relay_outbox (a BLOB payload), the rest stay pending.
    REQUIRE(store->setRelayCapture(true, &error));
    VerdictEngine engine(*store, clock, loaded.rules, testVerdictOptions());
    judged = fillFromSamples(*store, clock, engine, rules);
    RelayCollectOptions collect;
    collect.site_id = "site-a";
    collect.ruleset_version = "rules-test";
    collect.max_items = 3;
    REQUIRE(store->relayCollect(collect, &error));
    REQUIRE(store->relayCollect(collect, &error));
    REQUIRE(store->addNodeEvent({"gpu-01", kT0, "boot", "boot-2", ""}));
    REQUIRE(store->setMetaInt("verdicts.watermark", 4242));
  }
  REQUIRE(judged.size() >= 20);

  const std::string cli = FAULTLINE_CLI_BIN;
  auto out = runCommand(cli + " store migrate --from sqlite:" + source + " --to '" + target + "' 2>&1", 1 << 20);
  INFO(out.out);
  REQUIRE(out.status == 0);
  CHECK(out.out.find("copied ") != std::string::npos);
  CHECK(out.out.find("symptoms") != std::string::npos);

  std::string error;
  auto src = sql::Db::open(source, true, &error);
  auto dst = sql::Db::open(target, false, &error);
  INFO(error);
  REQUIRE(src);
  REQUIRE(dst);
  // Every table, every row, every column.
  std::vector<std::string> tables;
  {
    sql::Stmt t(src->get(), "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'");
    while (t.step() == sql::kRow) tables.push_back(t.text(0));
  }
  REQUIRE(tables.size() >= 14);
  std::map<std::string, size_t> rows_of;
  for (const auto& table : tables) {
    std::vector<std::pair<std::string, std::string>> columns;
    sql::Stmt c(src->get(), "SELECT name, type FROM pragma_table_info(?) ORDER BY cid");
    c.bind(1, table);
    while (c.step() == sql::kRow) columns.emplace_back(c.text(0), c.text(1));
    auto want = dumpTable(*src, table, columns);
    auto got = dumpTable(*dst, table, columns);
    INFO(table);
    CHECK(got.size() == want.size());
    CHECK(got == want);
    rows_of[table] = want.size();
    // The CLI's count for it.
    CHECK(out.out.find(fmt::format("  {:<16} {}\n", table, want.size())) != std::string::npos);
  }
  for (const char* t : {"agents", "nodes", "source_status", "batches", "symptoms", "jobs", "job_nodes", "verdicts",
                        "node_events", "meta", "relay_pending", "relay_outbox", "job_outputs", "node_inventory",
                        "unmatched_templates", "symptom_dictionaries"}) {
    INFO(t);
    CHECK(rows_of[t] > 0);  // the fill reached every table, so the comparison covers it
  }

  // The migrated store reads the same, and new rows get ids past the copied ones.
  const int64_t max_symptom = maxOf(*dst, "symptoms", "id"), max_event = maxOf(*dst, "node_events", "id"),
                max_output = maxOf(*dst, "job_outputs", "id"), max_pending = maxOf(*dst, "relay_pending", "id"),
                max_seq = maxOf(*dst, "relay_outbox", "seq");
  {
    auto srcStore = Store::open(source, clock, {}, &error);
    auto store = Store::open(target, clock, {}, &error);
    REQUIRE(srcStore);
    REQUIRE(store);
    CHECK(store->counts().symptoms == srcStore->counts().symptoms);
    CHECK(store->counts().verdicts == srcStore->counts().verdicts);
    CHECK(store->metaInt("verdicts.watermark", 0) == 4242);
    for (const auto& id : judged) {
      auto a = srcStore->latestVerdict(id), b = store->latestVerdict(id);
      INFO(id);
      REQUIRE(a);
      REQUIRE(b);
      CHECK(a->revision == b->revision);
      CHECK(common::toJson(a->diagnosis).dump() == common::toJson(b->diagnosis).dump());
    }

    REQUIRE(store->setRelayCapture(true, &error));
    auto s = makeSymptom("gpu-new", "gpu.xid.79", kT0 + 100 * kSec, common::SubDomain::kHardware,
                         common::Role::kRoot, "0000:3b:00.0");
    s.symptom = "gpu_fell_off_bus";
    REQUIRE(store->ingestBatch(makeBatch("gpu-new", 1, {s}), "agent-gpu-new").status ==
            IngestResult::Status::kStored);
    JobOutput o;
    o.job_id = "after-migration";
    o.source = o.coverage.source = "/shared/slurm-1.out";
    o.symptoms = {s};
    REQUIRE(store->putJobOutput(o, &error));
    recordTestJob(*store, "after-migration", "gpu-new", kT0 + 50 * kSec, kT0 + 150 * kSec, "FAILED");
    VerdictEngine engine(*store, clock, loaded.rules, testVerdictOptions());
    auto v = engine.onJobEnded("after-migration");
    REQUIRE(v);
    CHECK(v->max_symptom_id > max_symptom);
    CHECK(maxOf(*dst, "relay_pending", "id") > max_pending);  // queued by the trigger, id from the sequence
    REQUIRE(store->addNodeEvent({"gpu-new", kT0 + 200 * kSec, "boot", "boot-9", ""}));
    RelayCollectOptions collect;
    collect.site_id = "site-a";
    collect.ruleset_version = "rules-test";
    auto packed = store->relayCollect(collect, &error);
    REQUIRE(packed);
    CHECK(packed->sequence > static_cast<uint64_t>(max_seq));
  }
  CHECK(maxOf(*dst, "symptoms", "id") == max_symptom + 1);
  CHECK(maxOf(*dst, "node_events", "id") > max_event);
  CHECK(maxOf(*dst, "job_outputs", "id") == max_output + 1);

  // A second run finds data there and refuses, naming it; the target is unchanged.
  auto again = runCommand(cli + " store migrate --from " + source + " --to '" + target + "' 2>&1", 1 << 20);
  CHECK(again.status == 1);
  CHECK(again.out.find("already holds data") != std::string::npos);
  CHECK(again.out.find("symptoms " + std::to_string(rows_of["symptoms"] + 1)) != std::string::npos);
  // A source that does not exist is an error, not a new empty store copied.
  auto missing = runCommand(cli + " store migrate --from " + dir.file("missing.db") + " --to '" + target + "' 2>&1",
                            1 << 20);
  CHECK(missing.status == 1);
  CHECK(missing.out.find("no such store") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.file("missing.db")));
}

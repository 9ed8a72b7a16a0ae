// store_ingest: the store's write path alone, in process (no ZeroMQ, no decoding): how many
// symptoms/s each way of writing batches stores, on a fresh SQLite file and (with --pg URL) on a
// fresh PostgreSQL database. What aggregator_load.sh measures end to end, minus the transport, so
// a change to the store can be judged without the noise of 2,048 simulated agents.
//
// The batches are the cascade sample's symptoms (--sample, default samples/cascade64-xid79, the
// real rule engine over its logs, bench/cascade_sample.h) spread over --agents hosts, --batches
// per agent with --per-batch symptoms each, in the order a fleet-wide cascade sends them (every
// agent's first batch, then every second one ...). Modes, each on its own fresh store:
//   legacy   Store::ingestBatch per batch (one transaction each): the previous path, the peer;
//   grouped  Store::ingestBatches over runs of --run batches, --group batches per group commit:
//            what the ingest loop does with one pass.
// Printed per mode and engine: symptoms/s (wall), CPU seconds of this process, and the ratio to
// legacy on the same engine. The middle agent replays the sample's root node, the others its
// other nodes in turn (as aggregator_load does); after the grouped mode, with --verdict, every
// agent's host is one job's node list and the job's first verdict is timed: what the aggregator
// does between a 10,000-node job's end POST and its stored verdict (VerdictEngine::onJobEnded).
// With --prune, retention then deletes every row in the aggregator's steps (Store::pruneStep,
// 5,000 rows each, one short transaction per step so ingest interleaves): rows/s and the longest
// step, which is how long ingest can wait behind it.
//
//   build/bench/store_ingest --agents 2048 --batches 4
//   build/bench/store_ingest --pg 'postgresql:///bench?host=/tmp/pg&port=54331&user=postgres'
#include <dlfcn.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "aggregator/store/db.h"
#include "aggregator/store/store.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "bench/cascade_sample.h"
#include "common/rule_set.h"

namespace {

using namespace faultline;
using namespace faultline::aggregator;

double cpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// The process's kernel CPU and minor page faults so far: a first touch of a fresh page is a minor
// fault, and the kernel zeroes the page (most of a verdict's kernel time here).
struct KernelUsage {
  double sys = 0;
  long minflt = 0;
};
KernelUsage kernelUsage() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {double(ru.ru_stime.tv_sec) + double(ru.ru_stime.tv_usec) / 1e6, ru.ru_minflt};
}

struct Result {
  double wall = 0, cpu = 0;
  size_t symptoms = 0;
  bool ok = true;
};

// What the symptoms take on disk in `target`'s store: the table's bytes and its indexes' per row
// (SQLite: its pages, dbstat; PostgreSQL: pg_table_size with TOAST, pg_indexes_size) and the
// payload column's average. Printed; false when it cannot be read.
bool printSymptomRowBytes(const std::string& target) {
  std::string err;
  auto db = faultline::aggregator::sql::Db::open(target, false, &err);
  if (!db) {
    std::fprintf(stderr, "store_ingest: %s\n", err.c_str());
    return false;
  }
  const bool pg = db->postgres();
  faultline::aggregator::sql::Stmt s(
      db->get(), pg ? "SELECT pg_table_size('symptoms'), pg_indexes_size('symptoms'), "
                      "(SELECT COUNT(*) FROM symptoms), (SELECT COALESCE(SUM(octet_length(payload)), 0) FROM symptoms)"
                    : "SELECT (SELECT SUM(pgsize) FROM dbstat WHERE name = 'symptoms'), "
                      "(SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name IN (SELECT name FROM sqlite_master "
                      "WHERE type = 'index' AND tbl_name = 'symptoms')), (SELECT COUNT(*) FROM symptoms), "
                      "(SELECT COALESCE(SUM(length(CAST(payload AS BLOB))), 0) FROM symptoms)");
  if (s.step() != faultline::aggregator::sql::kRow || s.i64(2) == 0) {
    std::fprintf(stderr, "store_ingest: symptom row bytes: %s\n", db->errmsg().c_str());
    return false;
  }
  const double rows = double(s.i64(2));
  std::printf("           rows     symptom row on disk: %.0f bytes (table), %.0f bytes with its indexes; payload "
              "%.0f bytes (%lld rows)\n",
              double(s.i64(0)) / rows, double(s.i64(0) + s.i64(1)) / rows, double(s.i64(3)) / rows,
              static_cast<long long>(s.i64(2)));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"store_ingest: the store's batch write paths, in process"};
  std::string sample_dir = FAULTLINE_SOURCE_DIR "/samples/cascade64-xid79", rules_dir = FAULTLINE_SOURCE_DIR "/rules";
  std::string pg_url, tmp_dir = "/tmp";
  size_t agents = 2048, batches = 4, per_batch = 8, run = 256, group = 1024;
  std::string modes = "legacy,grouped";
  bool verdict = false, tick = false, prune = false, keep = false;
  size_t cache_mb = defaultSymptomCacheBytes(availableMemoryBytes()) >> 20;  // the aggregator's default
  app.add_option("--sample", sample_dir);
  app.add_option("--rules", rules_dir);
  app.add_option("--agents", agents);
  app.add_option("--batches", batches, "batches per agent");
  app.add_option("--per-batch", per_batch, "symptoms per batch");
  app.add_option("--run", run, "batches per ingestBatches call (the ingest loop's kMaxRun)");
  app.add_option("--group", group, "batches per group commit (the ingest loop's pass)");
  app.add_option("--pg", pg_url, "also on this PostgreSQL database (emptied first: a bench database only)");
  app.add_option("--tmp", tmp_dir, "where the SQLite files go");
  app.add_flag("--keep", keep, "keep the SQLite files (TMP/store_ingest-MODE.db)");
  app.add_option("--modes", modes);
  app.add_flag("--prune", prune, "after the grouped mode (and verdict): every symptom pruned, 5,000 rows a step");
  app.add_option("--symptom-cache-mb", cache_mb, "the store's decoded-symptom cache (0: none, every payload decoded; default the aggregator's)");
  app.add_flag("--verdict", verdict, "after the grouped mode: the job of every agent's host, its first verdict timed");
  app.add_flag("--tick", tick, "after the grouped mode (before --verdict): one verdict tick over every stored symptom "
                               "while that job runs, timed (what a tick does during a cascade)");
  CLI11_PARSE(app, argc, argv);

  std::shared_ptr<const common::RuleSet> rules;
  std::string error;
  auto sample = bench::loadCascadeSampleWithRules(sample_dir, rules_dir, &rules, &error);
  if (!sample) {
    std::fprintf(stderr, "store_ingest: %s\n", error.c_str());
    return 2;
  }
  std::vector<const std::pair<const std::string, std::vector<common::Symptom>>*> others;
  const std::vector<common::Symptom>* root_list = nullptr;
  for (const auto& e : sample->by_node) {
    if (e.first == sample->expected_node) root_list = &e.second;
    else if (!e.second.empty()) others.push_back(&e);
  }
  if (!root_list || others.empty()) {
    std::fprintf(stderr, "store_ingest: %s: no root node with symptoms (expected.json)\n", sample_dir.c_str());
    return 2;
  }
  const size_t root_index = agents / 2;  // 0-based
  // The sample node agent a replays: the root for the middle agent, one of the others otherwise.
  auto sampleEntryOf = [&](size_t a) { return a == root_index ? nullptr : others[a % others.size()]; };
  auto sampleHostOf = [&](size_t a) -> const std::string& {
    return a == root_index ? sample->expected_node : sampleEntryOf(a)->first;
  };

  // Batch b of agent a: the next per_batch symptoms of its sample node, cyclically, one second
  // later per pass.
  std::vector<common::SymptomBatchData> all;
  all.reserve(agents * batches);
  std::vector<std::string> hosts;
  for (size_t b = 0; b < batches; ++b)
    for (size_t a = 0; a < agents; ++a) {
      char host[32];
      std::snprintf(host, sizeof host, "gpu-n%05zu", a + 1);
      if (b == 0) hosts.push_back(host);
      const auto& sample_host = sampleHostOf(a);
      const auto& list = a == root_index ? *root_list : sampleEntryOf(a)->second;
      common::SymptomBatchData d;
      d.header.agent_id = std::string("agent-") + host;
      d.header.hostname = host;
      d.header.boot_id = "boot-1";
      d.header.sequence = b + 1;
      d.header.agent_version = "bench";
      d.header.ruleset_version = "bench";
      for (size_t k = 0; k < per_batch; ++k) {
        size_t i = b * per_batch + k;
        d.symptoms.push_back(
            bench::moveSymptom(list[i % list.size()], sample_host, host, int64_t(i / list.size()) * 1'000'000'000));
      }
      d.sources.push_back({host, "kmsg", "kmsg", 100 * (b + 1), 0, "ok", ""});
      all.push_back(std::move(d));
    }
  const size_t total_symptoms = all.size() * per_batch;
  // The aggregator links mimalloc where the build found it (aggregator/CMakeLists.txt); so does this bench.
  const char* allocator = dlsym(RTLD_DEFAULT, "mi_version") ? "mimalloc" : "glibc malloc";
  std::printf("store_ingest: %zu agents x %zu batches x %zu symptoms = %zu symptoms (%s); run %zu, group %zu; "
              "symptom cache %zu MiB; %s\n",
              agents, batches, per_batch, total_symptoms, sample_dir.c_str(), run, group, cache_mb, allocator);

  SystemClock clock;
  std::function<bool(Store&)> after;  // run on the store after the grouped mode
  auto measure = [&](const std::string& target, const std::string& mode) {
    Result r;
    std::string err;
    StoreOptions options;
    options.symptom_cache_bytes = cache_mb << 20;
    auto store = Store::open(target, clock, options, &err);
    if (!store) {
      std::fprintf(stderr, "store_ingest: %s: %s\n", target.c_str(), err.c_str());
      r.ok = false;
      return r;
    }
    const double c0 = cpuSeconds();
    const auto t0 = std::chrono::steady_clock::now();
    if (mode == "legacy") {
      for (const auto& d : all)
        if (store->ingestBatch(d, d.header.agent_id).status == IngestResult::Status::kStored)
          r.symptoms += d.symptoms.size();
    } else {
      for (size_t g = 0; g < all.size(); g += group) {
        const size_t gend = std::min(all.size(), g + group);
        if (!store->beginGroup(&err)) r.ok = false;
        for (size_t at = g; at < gend; at += run) {
          std::vector<Store::IngestInput> in;
          for (size_t i = at; i < std::min(gend, at + run); ++i) in.push_back({&all[i], all[i].header.agent_id});
          for (const auto& res : store->ingestBatches(in))
            if (res.status == IngestResult::Status::kStored) r.symptoms += res.symptoms;
        }
        if (!store->endGroup(&err)) r.ok = false;
      }
    }
    r.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.cpu = cpuSeconds() - c0;
    if (r.symptoms != total_symptoms) r.ok = false;
    if (mode == "grouped" && !printSymptomRowBytes(target)) r.ok = false;
    if (mode == "grouped" && after && !after(*store)) r.ok = false;
    return r;
  };
  auto empty_pg = [&](const std::string& url) {
    // A fresh schema: drop what an earlier run left (the URL names a bench database).
    std::string err;
    auto db = sql::Db::open(url, false, &err);
    if (!db || !db->exec("DROP SCHEMA public CASCADE; CREATE SCHEMA public;", &err)) {
      std::fprintf(stderr, "store_ingest: %s: %s\n", sql::redactUrl(url).c_str(), err.c_str());
      return false;
    }
    return true;
  };

  // The job over every host, ended as the sample's did; its first verdict, timed.
  auto judge = [&](Store& store) {
    JobUpdate u;
    u.job_id = "900001";
    u.state = sample->job.state.empty() ? "FAILED" : sample->job.state;
    u.exit_code = sample->job.exit_code;
    u.start_ns = sample->job.start_ns;
    u.end_ns = sample->job.end_ns;
    u.nodes = hosts;
    std::string err;
    // Every agent's first heartbeat, with its node's inventory (the aggregator has these when a
    // job ends: the verdict reads them for node facts).
    for (size_t a = 0; a < hosts.size(); ++a) {
      const auto& sample_host = sampleHostOf(a);
      HeartbeatInfo hb;
      hb.agent_id = "agent-" + hosts[a];
      hb.hostname = hosts[a];
      hb.boot_id = "boot-1";
      hb.agent_version = "bench";
      hb.ruleset_version = "bench";
      hb.created_ns = sample->job.end_ns + 1'000'000'000;
      hb.started_ns = sample->job.start_ns;
      hb.sources.push_back({"kmsg", "kmsg", "ok", "", 100 * batches, 0, 0});
      hb.next_sequence = batches + 1;
      if (auto inv = sample->inventory.find(sample_host); inv != sample->inventory.end()) hb.inventory = inv->second;
      if (!store.recordHeartbeat(hb, hb.agent_id, &err)) {
        std::fprintf(stderr, "store_ingest: heartbeat: %s\n", err.c_str());
        return false;
      }
    }
    if (tick) {
      // The job running (started, not ended): the tick maps every new symptom's node and time
      // to the jobs it falls in, and judges none.
      JobUpdate started = u;
      started.state = "RUNNING";
      started.exit_code.clear();
      started.end_ns = 0;
      if (!store.recordJob(started, &err)) {
        std::fprintf(stderr, "store_ingest: job: %s\n", err.c_str());
        return false;
      }
      ManualClock at(sample->job.end_ns);
      VerdictEngine engine(store, at, rules, {});
      const double c0 = cpuSeconds();
      const auto t0 = std::chrono::steady_clock::now();
      const size_t written = engine.tick();
      const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("           tick     over %zu symptoms on %zu nodes (the job running): %.3f s (cpu %.3f s), %zu verdicts\n",
                  total_symptoms, hosts.size(), wall, cpuSeconds() - c0, written);
    }
    if (!store.recordJob(u, &err)) {
      std::fprintf(stderr, "store_ingest: job: %s\n", err.c_str());
      return false;
    }
    ManualClock at(sample->job.end_ns + 1'000'000'000);
    VerdictEngine engine(store, at, rules, {});
    const double c0 = cpuSeconds();
    const KernelUsage k0 = kernelUsage();
    const auto t0 = std::chrono::steady_clock::now();
    auto v = engine.onJobEnded(u.job_id);
    const KernelUsage k1 = kernelUsage();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!v) {
      std::fprintf(stderr, "store_ingest: no verdict\n");
      return false;
    }
    const auto& d = v->diagnosis;
    const std::string node = d.responsible.empty() ? "" : d.responsible[0].node;
    char want_host[32];
    std::snprintf(want_host, sizeof want_host, "gpu-n%05zu", root_index + 1);
    const bool right = node == want_host && d.cause && d.cause->rule_id == sample->expected_rule;
    std::printf("           verdict  %zu-node job over %lld symptoms: %.3f s (cpu %.3f s): %s %s %s: %s\n", hosts.size(),
                static_cast<long long>(v->symptoms), wall, cpuSeconds() - c0, common::subDomainName(d.sub_domain).data(),
                node.c_str(), d.cause ? d.cause->rule_id.c_str() : "-", right ? "RIGHT" : "WRONG");
    std::printf("           verdict  kernel cpu %.3f s (%.0f %% of its cpu), %ld minor page faults (%.0f MiB of fresh "
                "pages zeroed)\n",
                k1.sys - k0.sys, 100.0 * (k1.sys - k0.sys) / std::max(1e-9, cpuSeconds() - c0), k1.minflt - k0.minflt,
                double(k1.minflt - k0.minflt) * 4096 / (1 << 20));
    if (tick) {
      // The next tick, the verdict open (provisional) and nothing new: what every tick costs
      // until the verdict is final.
      const double c1 = cpuSeconds();
      const auto t1 = std::chrono::steady_clock::now();
      const size_t written = engine.tick();
      std::printf("           tick     with that verdict open, nothing new: %.3f s (cpu %.3f s), %zu verdicts\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count(), cpuSeconds() - c1,
                  written);
    }
    return right;
  };

  auto prune_all = [&](Store& store) {
    const auto t0 = std::chrono::steady_clock::now();
    double longest = 0;
    size_t rows = 0, steps = 0;
    const int64_t cutoff = SystemClock().nowNs() + 1'000'000'000;
    for (size_t n = 5000; n == 5000; ++steps) {
      const auto s0 = std::chrono::steady_clock::now();
      n = store.pruneStep(cutoff, 0, 5000);
      longest = std::max(longest, std::chrono::duration<double>(std::chrono::steady_clock::now() - s0).count());
      rows += n;
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto left = store.counts();
    std::printf("           prune    %zu rows in %zu steps, %.2f s: %.0f rows/s, longest step %.1f ms; left %llu symptoms\n",
                rows, steps, wall, wall > 0 ? double(rows) / wall : 0.0, longest * 1e3,
                static_cast<unsigned long long>(left.symptoms));
    return left.symptoms == 0;
  };

  std::map<std::string, double> grouped_us;  // engine -> CPU per symptom of the grouped mode
  std::vector<std::string> engines = {"sqlite"};
  if (!pg_url.empty()) engines.push_back("postgresql");
  int rc = 0;
  for (const auto& eng : engines) {
    double legacy_rate = 0;
    for (size_t m0 = 0; m0 < modes.size();) {
      size_t m1 = modes.find(',', m0);
      if (m1 == std::string::npos) m1 = modes.size();
      const std::string mode = modes.substr(m0, m1 - m0);
      m0 = m1 + 1;
      std::string target;
      if (eng == "sqlite") {
        target = tmp_dir + "/store_ingest-" + mode + ".db";
        for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(target + ext);
      } else {
        if (!empty_pg(pg_url)) return 1;
        target = pg_url;
      }
      after = [&](Store& st) { return (!(verdict || tick) || judge(st)) && (!prune || prune_all(st)); };
      auto r = measure(target, mode);
      if (eng == "sqlite" && !keep)
        for (const char* ext : {"", "-wal", "-shm"}) std::filesystem::remove(target + ext);
      const double rate = r.wall > 0 ? double(r.symptoms) / r.wall : 0;
      if (mode == "legacy") legacy_rate = rate;
      if (mode == "grouped" && r.symptoms) grouped_us[eng] = r.cpu * 1e6 / double(r.symptoms);
      std::printf("%-10s %-8s %9zu symptoms in %6.2f s: %9.0f symptoms/s, cpu %6.2f s (%5.1f us/symptom)%s%s\n",
                  eng.c_str(), mode.c_str(), r.symptoms, r.wall, rate, r.cpu,
                  r.symptoms ? r.cpu * 1e6 / double(r.symptoms) : 0.0,
                  legacy_rate > 0 && mode != "legacy" ? (" | x" + std::to_string(rate / legacy_rate).substr(0, 4) + " of legacy").c_str() : "",
                  r.ok ? "" : " | INCOMPLETE");
      if (!r.ok) rc = 1;
    }
  }
  // CPU time of this process (user + system), not wall: the VM's other load does not count.
  if (grouped_us.count("sqlite"))
    std::printf("cpu        grouped: %.1f us per symptom on SQLite%s\n", grouped_us["sqlite"],
                grouped_us.count("postgresql")
                    ? (" | " + fmt::format("{:.1f}", grouped_us["postgresql"]) + " us on PostgreSQL (client side)").c_str()
                    : "");
  return rc;
}

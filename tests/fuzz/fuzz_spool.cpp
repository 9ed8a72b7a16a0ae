// libFuzzer target for the agent spool's stored records (agent/spool.h): what a restarted agent
// reads back from its SQLite spool, written by a previous (maybe older, maybe crashed) agent or
// damaged on disk. The input becomes the stored open aggregation groups' payload, a source's
// checkpoint and one unacknowledged batch (payload = the input, severity, symptom count and sent
// note from its first bytes); then the agent's start-up reads run: openGroups() into the
// aggregation (and from there into a batch the aggregator must accept), checkpoints(), unacked()
// both orders, stats(), a send noted around the stored batch, and a commit that enforces a small
// byte bound over the stored rows.
//
// Properties: no crash, hang, leak or sanitizer report, no exception; the reads never fail.
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "agent/spool.h"
#include "common/symptom_aggregator.h"
#include "common/wire.h"
#include "tests/fuzz/fuzz_util.h"

using faultline::fuzz::fail;
using namespace faultline;

namespace {

void store(const std::string& file, std::string_view in) {
  sqlite3* db = nullptr;
  if (sqlite3_open(file.c_str(), &db) != SQLITE_OK) fail("sqlite3_open: %s", sqlite3_errmsg(db));
  auto run = [&](const char* sql, auto&& bind) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) fail("%s: %s", sql, sqlite3_errmsg(db));
    bind(s);
    if (sqlite3_step(s) != SQLITE_DONE) fail("%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
  };
  const auto blob = [&](sqlite3_stmt* s, int i) {
    sqlite3_bind_blob(s, i, in.data(), static_cast<int>(in.size()), SQLITE_TRANSIENT);
  };
  run("INSERT OR REPLACE INTO open_groups(id, payload) VALUES (1, ?1)", [&](sqlite3_stmt* s) { blob(s, 1); });
  run("INSERT OR REPLACE INTO checkpoints(source, position) VALUES ('file:/var/log/fabricmanager.log', ?1)",
      [&](sqlite3_stmt* s) { sqlite3_bind_text(s, 1, in.data(), static_cast<int>(in.size()), SQLITE_TRANSIENT); });
  const int64_t severity = in.empty() ? 0 : static_cast<int8_t>(in[0]);
  const int64_t symptoms = in.size() < 2 ? 1 : static_cast<int8_t>(in[1]);
  const int64_t sent = in.size() < 3 ? 0 : static_cast<int8_t>(in[2]);
  run("INSERT OR REPLACE INTO batches(seq, max_severity, symptoms, payload, sent) VALUES (7, ?1, ?2, ?3, ?4)",
      [&](sqlite3_stmt* s) {
        sqlite3_bind_int64(s, 1, severity);
        sqlite3_bind_int64(s, 2, symptoms);
        blob(s, 3);
        sqlite3_bind_int64(s, 4, sent);
      });
  sqlite3_close(db);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)faultline::fuzz::scratchDir();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in = faultline::fuzz::bytes(data, size);
  const std::string file = (faultline::fuzz::scratchDir() / "spool.db").string();
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file + suffix);
  std::string error;
  agent::SpoolOptions options;
  options.synchronous_full = false;
  options.max_bytes = 256;
  {
    auto fresh = agent::Spool::open(file, options, &error);
    if (!fresh) fail("spool: %s", error.c_str());
  }
  store(file, in);
  try {
    auto spool = agent::Spool::open(file, options, &error);
    if (!spool) fail("reopen: %s", error.c_str());
    common::SymptomAggregator aggregator;
    for (auto& g : spool->openGroups()) aggregator.add(std::move(g));
    common::SymptomBatchData batch;
    batch.header = {"agent-fuzz", "gpu-a01", "boot", 1, "fuzz", "rules", int64_t{1717236000} * 1'000'000'000};
    batch.symptoms = aggregator.drainAll();
    if (!batch.symptoms.empty()) {
      std::string wire = common::encodeBatch(batch);
      std::string reason;
      if (!common::decodeBatch(wire.data(), wire.size(), &reason))
        fail("the open groups read back make a batch the aggregator refuses: %s", reason.c_str());
    }
    (void)spool->checkpoints();
    for (bool by_severity : {true, false})
      for (const auto& b : spool->unacked(10, by_severity)) {
        std::string reason;
        (void)common::decodeBatch(b.payload.data(), b.payload.size(), &reason);
      }
    (void)spool->stats();
    if (!spool->beforeSend(7)) fail("noting the stored batch as sent: refused");
    spool->afterSend(7, in.size() > 3 && (in[3] & 1));
    agent::SpoolCommit commit;
    commit.batches.resize(1);
    commit.batches[0].header = batch.header;
    if (!spool->commit(commit, &error)) fail("commit over the stored rows: %s", error.c_str());
    (void)spool->ack(7);
  } catch (const std::exception& e) {
    fail("exception: %s", e.what());
  }
  return 0;
}

#include "agent/spool.h"

#include <sqlite3.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "common/uplink/shipper.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using faultline::agent::testing::Receiver;
using faultline::agent::testing::runUntil;
using faultline::agent::testing::TempDir;

namespace {

common::Symptom symptom(const std::string& rule, common::Severity sev, uint32_t count = 1) {
  common::Symptom s;
  s.rule_id = rule;
  s.severity = sev;
  s.node = "n1";
  s.count = count;
  s.time_known = true;
  s.first_ns = s.last_ns = 1'700'000'000'000'000'000;
  return s;
}

common::SymptomBatchData batchOf(std::vector<common::Symptom> symptoms) {
  common::SymptomBatchData b;
  b.header.agent_id = "a1";
  b.symptoms = std::move(symptoms);
  return b;
}

// A spool bounded to 4000 bytes: a few batches of ~1 KB each overflow it.
std::unique_ptr<Spool> smallSpool(const TempDir& dir) {
  std::string error;
  SpoolOptions opts;
  opts.max_bytes = 4000;
  return Spool::open(dir.file("spool.db"), opts, &error);
}

// A batch of one ~1 KB symptom (900 bytes of evidence that do not compress away): four of them
// overflow smallSpool.
common::SymptomBatchData bigBatch(const std::string& rule, common::Severity sev, uint32_t count) {
  auto s = symptom(rule, sev, count);
  s.evidence = {std::string(900, 'x')};
  for (size_t i = 0; i < s.evidence[0].size(); ++i)
    s.evidence[0][i] = static_cast<char>('a' + (i * 7919 + rule.size() * 31 + count) % 26);
  return batchOf({s});
}

uint64_t commitOne(Spool& spool, const common::SymptomBatchData& b) {
  std::string error;
  SpoolCommit c;
  c.batches = {b};
  auto seqs = spool.commit(c, &error);
  REQUIRE(seqs);
  REQUIRE(seqs->size() == 1);
  return seqs->front();
}

// Commits critical batches until no info batch is left (the bound evicts those first).
void evictInfo(Spool& spool) {
  for (int i = 0; i < 20; ++i) {
    bool info_left = false;
    for (const auto& b : spool.unacked(100, false)) info_left |= b.max_severity == common::Severity::kInfo;
    if (!info_left) return;
    commitOne(spool, bigBatch("crit" + std::to_string(i), common::Severity::kCritical, 1));
  }
  FAIL("info batches still in the spool");
}

// The spool in `dir` opened again (as a restarted agent does), its info batches evicted.
std::unique_ptr<Spool> reopenAndEvict(const TempDir& dir) {
  auto spool = smallSpool(dir);
  REQUIRE(spool);
  evictInfo(*spool);
  return spool;
}

void checkEvicted(const Spool& spool, uint64_t dropped, uint64_t dropped_batches, uint64_t in_flight,
                  uint64_t in_flight_batches) {
  auto st = spool.stats();
  CHECK(st.dropped_symptoms == dropped);
  CHECK(st.dropped_batches == dropped_batches);
  CHECK(st.evicted_in_flight_symptoms == in_flight);
  CHECK(st.evicted_in_flight_batches == in_flight_batches);
}

}  // namespace

TEST_CASE("spool: commit assigns increasing sequences and survives reopen", "[spool]") {
  TempDir dir;
  std::string path = dir.file("spool.db");
  std::string error;
  {
    auto spool = Spool::open(path, {}, &error);
    REQUIRE(spool);
    SpoolCommit c;
    c.batches = {batchOf({symptom("xid.79", common::Severity::kCritical)}),
                 batchOf({symptom("nccl.x", common::Severity::kError)})};
    c.open_groups = {symptom("xid.13", common::Severity::kError, 7)};
    c.checkpoints = {{"kmsg", "boot 42"}, {"journal", "s=abc"}};
    auto seqs = spool->commit(c, &error);
    REQUIRE(seqs);
    CHECK(*seqs == std::vector<uint64_t>{1, 2});
  }
  auto spool = Spool::open(path, {}, &error);
  REQUIRE(spool);
  CHECK(spool->checkpoints() == std::map<std::string, std::string>{{"journal", "s=abc"}, {"kmsg", "boot 42"}});
  auto groups = spool->openGroups();
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].rule_id == "xid.13");
  CHECK(groups[0].count == 7);
  auto pending = spool->unacked(10, false);
  REQUIRE(pending.size() == 2);
  std::string reason;
  auto decoded = common::decodeBatch(pending[1].payload.data(), pending[1].payload.size(), &reason);
  REQUIRE(decoded);
  CHECK(decoded->header.sequence == 2);
  CHECK(spool->ack(1));
  CHECK(spool->unacked(10, false).size() == 1);
  // A sequence is never reused, even after its batch is acknowledged and deleted.
  SpoolCommit c2;
  c2.batches = {batchOf({symptom("x", common::Severity::kInfo)})};
  auto seqs = spool->commit(c2, &error);
  REQUIRE(seqs);
  CHECK(*seqs == std::vector<uint64_t>{3});
  CHECK(spool->checkpoints().at("kmsg") == "boot 42");  // untouched when not named
}

TEST_CASE("spool: checkpoints move only together with the symptoms (rolled back on failure)", "[spool]") {
  TempDir dir;
  std::string path = dir.file("spool.db");
  std::string error;
  auto spool = Spool::open(path, {}, &error);
  REQUIRE(spool);
  SpoolCommit first;
  first.checkpoints = {{"kmsg", "boot 1"}};
  REQUIRE(spool->commit(first, &error));

  // Another writer holds the database: the commit must fail as a whole.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  SpoolCommit c;
  c.batches = {batchOf({symptom("xid.79", common::Severity::kCritical)})};
  c.checkpoints = {{"kmsg", "boot 99"}};
  CHECK_FALSE(spool->commit(c, &error));
  CHECK_FALSE(error.empty());
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);

  CHECK(spool->checkpoints().at("kmsg") == "boot 1");
  CHECK(spool->unacked(10, false).empty());
  CHECK(spool->stats().next_sequence == 1);
  // And succeeds once the lock is gone.
  REQUIRE(spool->commit(c, &error));
  CHECK(spool->checkpoints().at("kmsg") == "boot 99");
  CHECK(spool->unacked(10, false).size() == 1);
}

TEST_CASE("spool: bounded, drops the least severe batches first and counts them", "[spool]") {
  TempDir dir;
  std::string error;
  auto spool = smallSpool(dir);
  REQUIRE(spool);
  auto big = [](const std::string& rule, common::Severity sev) {
    auto s = symptom(rule, sev);
    s.evidence = {std::string(900, 'x')};  // incompressible enough: distinct chars below
    for (size_t i = 0; i < s.evidence[0].size(); ++i) s.evidence[0][i] = static_cast<char>('a' + (i * 7919) % 26);
    return s;
  };
  for (int i = 0; i < 3; ++i) {
    SpoolCommit c;
    c.batches = {batchOf({big("crit" + std::to_string(i), common::Severity::kCritical)}),
                 batchOf({big("info" + std::to_string(i), common::Severity::kInfo)})};
    REQUIRE(spool->commit(c, &error));
  }
  auto st = spool->stats();
  CHECK(st.bytes <= 4000);
  CHECK(st.dropped_symptoms >= 1);
  auto left = spool->unacked(100, true);
  size_t crit = 0, info = 0;
  for (const auto& b : left) (b.max_severity == common::Severity::kCritical ? crit : info)++;
  CHECK(crit == 3);  // only info batches were dropped
  CHECK(info + st.dropped_batches == 3);
  // critical first, then by sequence
  REQUIRE(left.size() >= 3);
  CHECK(left[0].max_severity == common::Severity::kCritical);
  CHECK(left[0].sequence < left[1].sequence);
}

TEST_CASE("spool: a dropped batch counts the occurrences it held, an aggregated symptom of count N as N", "[spool]") {
  TempDir dir;
  std::string error;
  auto spool = smallSpool(dir);
  REQUIRE(spool);
  uint64_t committed = 0;
  for (uint32_t i = 0; i < 6; ++i) {
    auto s = symptom("r" + std::to_string(i), i % 2 ? common::Severity::kInfo : common::Severity::kError, 3 + i);
    s.evidence = {std::string(900, 'x')};
    for (size_t k = 0; k < s.evidence[0].size(); ++k) s.evidence[0][k] = static_cast<char>('a' + (k * 7919 + i) % 26);
    SpoolCommit c;
    c.batches = {batchOf({s})};
    REQUIRE(spool->commit(c, &error));
    committed += s.count;
  }
  auto st = spool->stats();
  REQUIRE(st.dropped_batches >= 1);
  uint64_t left = 0;
  for (const auto& b : spool->unacked(100, false)) {
    std::string reason;
    auto d = common::decodeBatch(b.payload.data(), b.payload.size(), &reason);
    REQUIRE(d);
    for (const auto& s : d->symptoms) left += s.count;
  }
  // Before: one per symptom, so a dropped count of 4 said 1 while 4 occurrences were gone.
  CHECK(st.dropped_symptoms == committed - left);
  CHECK(st.dropped_symptoms > st.dropped_batches);
}

TEST_CASE("spool: a spool that cannot be opened for want of a lock (or disk space) is left as it is", "[spool]") {
  TempDir dir;
  std::string path = dir.file("spool.db");
  std::string error, note;
  {
    auto spool = Spool::open(path, {}, &error);
    REQUIRE(spool);
    SpoolCommit c;
    c.batches = {batchOf({symptom("xid.79", common::Severity::kCritical)})};
    c.checkpoints = {{"kmsg", "boot 7"}};
    REQUIRE(spool->commit(c, &error));
  }
  // Another process holds the spool exclusively: opening it fails (SQLITE_BUSY, as a full disk
  // fails with SQLITE_FULL or SQLITE_IOERR). Before, any failure moved the spool aside and deleted
  // its WAL: the batch, the checkpoint and the sequence numbers were gone.
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  CHECK_FALSE(Spool::open(path, {}, &error, &note));
  CHECK_FALSE(error.empty());
  CHECK(note.empty());
  CHECK_FALSE(std::filesystem::exists(path + ".corrupt-1"));
  sqlite3_exec(other, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  auto spool = Spool::open(path, {}, &error, &note);
  REQUIRE(spool);
  CHECK(spool->checkpoints().at("kmsg") == "boot 7");
  CHECK(spool->unacked(10, false).size() == 1);
  CHECK(spool->stats().next_sequence == 2);
}

TEST_CASE("spool: a corrupt spool file is moved aside and a fresh one created", "[spool]") {
  TempDir dir;
  std::string path = dir.file("spool.db");
  {
    std::ofstream f(path);
    for (int i = 0; i < 1000; ++i) f << "this is not a database\n";
  }
  std::string error, note;
  auto spool = Spool::open(path, {}, &error, &note);
  REQUIRE(spool);
  CHECK(note.find("moved aside") != std::string::npos);
  CHECK(std::filesystem::exists(path + ".corrupt-1"));
  std::string e2;
  SpoolCommit c;
  c.checkpoints = {{"kmsg", "b 1"}};
  CHECK(spool->commit(c, &e2));
}

TEST_CASE("spool: a batch evicted before it was sent counts as dropped, one evicted after a send as evicted in flight, both survive a reopen", "[spool]") {
  TempDir dir;
  {
    auto spool = smallSpool(dir);
    REQUIRE(spool);
    uint64_t unsent = commitOne(*spool, bigBatch("info.unsent", common::Severity::kInfo, 3));
    uint64_t sent = commitOne(*spool, bigBatch("info.sent", common::Severity::kInfo, 5));
    // A send that did not go out (no connection) leaves a batch unsent; a resend that did not go
    // out leaves a batch an earlier send took as sent.
    REQUIRE(spool->beforeSend(unsent));
    spool->afterSend(unsent, false);
    REQUIRE(spool->beforeSend(sent));
    spool->afterSend(sent, true);
    REQUIRE(spool->beforeSend(sent));
    spool->afterSend(sent, false);
    evictInfo(*spool);
    checkEvicted(*spool, 3, 1, 5, 1);
  }
  auto spool = smallSpool(dir);
  REQUIRE(spool);
  checkEvicted(*spool, 3, 1, 5, 1);
}

TEST_CASE("spool: a batch noted as sent stays so when the agent dies before the send returns", "[spool]") {
  TempDir dir;
  {
    auto spool = smallSpool(dir);
    REQUIRE(spool);
    uint64_t seq = commitOne(*spool, bigBatch("info.a", common::Severity::kInfo, 4));
    REQUIRE(spool->beforeSend(seq));
    // no afterSend: the process is gone between noting the send and the send
  }
  checkEvicted(*reopenAndEvict(dir), 0, 0, 4, 1);
}

TEST_CASE("spool: batches of a spool from before the sent note count as sent when evicted", "[spool]") {
  TempDir dir;
  std::string path = dir.file("spool.db");
  {
    auto spool = smallSpool(dir);
    REQUIRE(spool);
    commitOne(*spool, bigBatch("info.old", common::Severity::kInfo, 2));
  }
  // Back to the first schema (as an agent before the note left it): its batch may have been sent.
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db,
                       "ALTER TABLE batches DROP COLUMN sent; DELETE FROM counters WHERE name LIKE 'evicted_in_flight_%'; "
                       "PRAGMA user_version=1",
                       nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
  checkEvicted(*reopenAndEvict(dir), 0, 0, 2, 1);
}

TEST_CASE("spool and shipper: batches a receiver took unacknowledged count as evicted in flight, batches never sent as dropped", "[spool]") {
  TempDir dir;
  std::string error;
  auto spool = smallSpool(dir);
  REQUIRE(spool);
  zmq::context_t ctx;
  Receiver rx(ctx);
  rx.ack = false;
  boost::asio::io_context io;
  common::ManualClock clock;
  uplink::ShipperOptions o;
  o.endpoints = {rx.endpoint()};
  o.agent_id = "a1";
  o.tick_ms = 0;  // nothing is sent but what the test kicks
  o.ack_timeout_ns = 600'000'000'000;
  uplink::Shipper shipper(io, ctx, clock, *spool, o);
  REQUIRE(shipper.start(&error));
  commitOne(*spool, bigBatch("info.sent1", common::Severity::kInfo, 2));
  commitOne(*spool, bigBatch("info.sent2", common::Severity::kInfo, 2));
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    shipper.kick();
    return rx.received == 2;
  }));
  // Spooled after the sends, never kicked: never sent.
  commitOne(*spool, bigBatch("info.unsent", common::Severity::kInfo, 7));
  evictInfo(*spool);
  checkEvicted(*spool, 7, 1, 4, 2);
  CHECK(rx.occurrences() == 4);  // what was evicted in flight did arrive here
  shipper.stop();
}

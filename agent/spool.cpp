#include "agent/spool.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>

namespace faultline::agent {

namespace {

// RAII for a prepared statement; bound parameters only.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  // A statement the spool keeps prepared (Spool::prepared): reset, not finalized, when done.
  explicit Stmt(sqlite3_stmt* kept) : s_(kept), rc_(kept ? SQLITE_OK : SQLITE_ERROR), kept_(true) {}
  ~Stmt() {
    if (!kept_) {
      sqlite3_finalize(s_);
    } else if (s_) {
      sqlite3_reset(s_);
      sqlite3_clear_bindings(s_);
    }
  }
  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return s_; }
  void bind(int i, int64_t v) { sqlite3_bind_int64(s_, i, v); }
  void bind(int i, const std::string& v) { sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void bindBlob(int i, const std::string& v) { sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  int step() { return sqlite3_step(s_); }
  int64_t i64(int c) { return sqlite3_column_int64(s_, c); }
  std::string text(int c) {
    auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
  }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_;
  bool kept_ = false;
};

// Numbered migrations; PRAGMA user_version counts the applied ones.
const char* const kMigrations[] = {
    R"sql(
CREATE TABLE batches(
  seq INTEGER PRIMARY KEY,
  max_severity INTEGER NOT NULL,
  symptoms INTEGER NOT NULL,
  payload BLOB NOT NULL);
CREATE INDEX batches_by_severity ON batches(max_severity DESC, seq);
CREATE TABLE checkpoints(source TEXT PRIMARY KEY, position TEXT NOT NULL);
CREATE TABLE open_groups(id INTEGER PRIMARY KEY CHECK (id = 1), payload BLOB NOT NULL);
CREATE TABLE counters(name TEXT PRIMARY KEY, value INTEGER NOT NULL);
INSERT INTO counters VALUES ('next_seq', 1), ('dropped_symptoms', 0), ('dropped_batches', 0);
)sql",
    // Whether a batch may have left (Spool::beforeSend). A spool from before did not note it:
    // its batches may have been sent, so they count as sent.
    R"sql(
ALTER TABLE batches ADD COLUMN sent INTEGER NOT NULL DEFAULT 0;
UPDATE batches SET sent = 1;
INSERT INTO counters VALUES ('evicted_in_flight_symptoms', 0), ('evicted_in_flight_batches', 0);
)sql",
};

}  // namespace

std::unique_ptr<Spool> Spool::open(const std::string& path, SpoolOptions options, std::string* error,
                                   std::string* note) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    sqlite3* db = nullptr;
    int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    std::unique_ptr<Spool> spool;
    std::string why;
    int code = rc;
    if (rc == SQLITE_OK) {
      spool.reset(new Spool(db, options));
      sqlite3_busy_timeout(db, 200);
      if (spool->exec("PRAGMA journal_mode=WAL", &why) &&
          spool->exec(options.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL", &why) &&
          // Footprint: a 512 KiB page cache (the default is 2 MiB; the spool is written far more
          // than read), and a WAL checkpointed every 256 pages and truncated back to 1 MiB.
          spool->exec("PRAGMA cache_size=-512", &why) && spool->exec("PRAGMA wal_autocheckpoint=256", &why) &&
          spool->exec("PRAGMA journal_size_limit=1048576", &why) &&
          spool->exec("PRAGMA quick_check", &why) && spool->migrate(&why))
        return spool;
      code = why.rfind("quick_check:", 0) == 0 ? SQLITE_CORRUPT : sqlite3_errcode(db);
    } else {
      why = db ? sqlite3_errmsg(db) : "sqlite3_open failed";
      sqlite3_close(db);
    }
    spool.reset();
    // Only a spool SQLite cannot read is replaced. A full disk, an I/O error or another process'
    // lock leaves it as it is (its unacknowledged batches, checkpoints and sequence numbers are
    // still good): the caller fails and tries again later. A new spool would also restart the
    // sequence at 1, which the aggregator takes for batches it already has.
    const bool corrupt = code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
    if (attempt == 1 || path == ":memory:" || !corrupt) {
      *error = path + ": " + why;
      return nullptr;
    }
    // Unreadable spool: keep it for a post-mortem, start empty. What it held is lost; the
    // sources restart from their configured start policy.
    std::string aside;
    for (int n = 1;; ++n) {
      aside = path + ".corrupt-" + std::to_string(n);
      if (!std::filesystem::exists(aside)) break;
    }
    std::error_code ec;
    std::filesystem::rename(path, aside, ec);
    for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(path + suffix, ec);
    if (note) *note = path + ": " + why + "; moved aside to " + aside;
  }
  return nullptr;
}

Spool::~Spool() {
  for (auto& [sql, stmt] : stmts_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* Spool::prepared(const char* sql) const {
  // Every commit and every shipper wake ran the same statements: prepared once (the SQL parser
  // was ~7 % of the agent's CPU at 1,000 lines/s).
  auto it = stmts_.find(sql);
  if (it != stmts_.end()) return it->second;
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt, nullptr) != SQLITE_OK) {
    sqlite3_finalize(stmt);
    return nullptr;
  }
  stmts_.emplace(sql, stmt);
  return stmt;
}

bool Spool::exec(const char* sql, std::string* error) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
    *error = msg ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    return false;
  }
  // quick_check reports problems as rows, not as an error code.
  if (std::string_view(sql) == "PRAGMA quick_check") {
    Stmt s(db_, "PRAGMA quick_check");
    if (s.ok() && s.step() == SQLITE_ROW && s.text(0) != "ok") {
      *error = "quick_check: " + s.text(0);
      return false;
    }
  }
  return true;
}

bool Spool::migrate(std::string* error) {
  Stmt v(db_, "PRAGMA user_version");
  if (!v.ok() || v.step() != SQLITE_ROW) {
    *error = sqlite3_errmsg(db_);
    return false;
  }
  int64_t version = v.i64(0);
  const int64_t target = static_cast<int64_t>(std::size(kMigrations));
  if (version > target) {
    *error = "spool schema version " + std::to_string(version) + " is newer than this agent";
    return false;
  }
  for (int64_t i = version; i < target; ++i) {
    if (!exec("BEGIN IMMEDIATE", error)) return false;
    std::string pragma = "PRAGMA user_version=" + std::to_string(i + 1);
    if (!exec(kMigrations[i], error) || !exec(pragma.c_str(), error)) {
      std::string ignored;
      exec("ROLLBACK", &ignored);
      return false;
    }
    if (!exec("COMMIT", error)) return false;
  }
  return true;
}

int64_t Spool::counter(const char* name) const {
  Stmt s(prepared("SELECT value FROM counters WHERE name = ?1"));
  s.bind(1, std::string(name));
  return s.step() == SQLITE_ROW ? s.i64(0) : 0;
}

bool Spool::setCounter(const char* name, int64_t value, std::string* error) {
  Stmt s(prepared("INSERT INTO counters(name, value) VALUES (?1, ?2) "
              "ON CONFLICT(name) DO UPDATE SET value = excluded.value"));
  s.bind(1, std::string(name));
  s.bind(2, value);
  if (s.step() != SQLITE_DONE) {
    *error = sqlite3_errmsg(db_);
    return false;
  }
  return true;
}

std::optional<std::vector<uint64_t>> Spool::commit(const SpoolCommit& c, std::string* error) {
  if (!exec("BEGIN IMMEDIATE", error)) return std::nullopt;
  std::vector<uint64_t> seqs;
  auto fail = [&](const std::string& why) -> std::optional<std::vector<uint64_t>> {
    *error = why;
    std::string ignored;
    exec("ROLLBACK", &ignored);
    return std::nullopt;
  };
  int64_t next = counter("next_seq");
  for (const auto& b : c.batches) {
    common::SymptomBatchData data = b;
    data.header.sequence = static_cast<uint64_t>(next);
    common::Severity max = common::Severity::kInfo;
    uint64_t occurrences = 0;  // what a drop loses: an aggregated symptom of count N is N
    for (const auto& s : data.symptoms) {
      max = std::max(max, s.severity);
      occurrences += s.count;
    }
    Stmt ins(prepared("INSERT INTO batches(seq, max_severity, symptoms, payload) VALUES (?1, ?2, ?3, ?4)"));
    ins.bind(1, next);
    ins.bind(2, static_cast<int64_t>(max));
    ins.bind(3, static_cast<int64_t>(occurrences));
    ins.bindBlob(4, common::encodeBatch(data));
    if (ins.step() != SQLITE_DONE) return fail(sqlite3_errmsg(db_));
    seqs.push_back(static_cast<uint64_t>(next));
    ++next;
  }
  if (!setCounter("next_seq", next, error)) return fail(*error);
  {
    common::SymptomBatchData groups;
    groups.symptoms = c.open_groups;
    Stmt s(prepared("INSERT INTO open_groups(id, payload) VALUES (1, ?1) "
                "ON CONFLICT(id) DO UPDATE SET payload = excluded.payload"));
    s.bindBlob(1, common::encodeBatch(groups));
    if (s.step() != SQLITE_DONE) return fail(sqlite3_errmsg(db_));
  }
  for (const auto& [source, position] : c.checkpoints) {
    Stmt s(prepared("INSERT INTO checkpoints(source, position) VALUES (?1, ?2) "
                "ON CONFLICT(source) DO UPDATE SET position = excluded.position"));
    s.bind(1, source);
    s.bind(2, position);
    if (s.step() != SQLITE_DONE) return fail(sqlite3_errmsg(db_));
  }
  if (!enforceBound(error)) return fail(*error);
  if (!exec("COMMIT", error)) return fail(*error);
  return seqs;
}

bool Spool::enforceBound(std::string* error) {
  Stmt total(prepared("SELECT COALESCE(SUM(length(payload)), 0) FROM batches"));
  if (total.step() != SQLITE_ROW) {
    *error = sqlite3_errmsg(db_);
    return false;
  }
  int64_t bytes = total.i64(0);
  if (bytes <= static_cast<int64_t>(options_.max_bytes)) return true;
  // Never sent: certainly lost (dropped_*). Sent, not acknowledged: may have arrived and been
  // stored (evicted_in_flight_*).
  int64_t dropped_symptoms = 0, dropped_batches = 0, in_flight_symptoms = 0, in_flight_batches = 0;
  std::vector<int64_t> victims;
  {
    Stmt s(prepared("SELECT seq, symptoms, length(payload), sent FROM batches ORDER BY max_severity ASC, seq ASC"));
    while (bytes > static_cast<int64_t>(options_.max_bytes) && s.step() == SQLITE_ROW) {
      victims.push_back(s.i64(0));
      (s.i64(3) ? in_flight_symptoms : dropped_symptoms) += s.i64(1);
      ++(s.i64(3) ? in_flight_batches : dropped_batches);
      bytes -= s.i64(2);
    }
  }
  for (int64_t seq : victims) {
    Stmt d(prepared("DELETE FROM batches WHERE seq = ?1"));
    d.bind(1, seq);
    if (d.step() != SQLITE_DONE) {
      *error = sqlite3_errmsg(db_);
      return false;
    }
  }
  return setCounter("dropped_symptoms", counter("dropped_symptoms") + dropped_symptoms, error) &&
         setCounter("dropped_batches", counter("dropped_batches") + dropped_batches, error) &&
         setCounter("evicted_in_flight_symptoms", counter("evicted_in_flight_symptoms") + in_flight_symptoms, error) &&
         setCounter("evicted_in_flight_batches", counter("evicted_in_flight_batches") + in_flight_batches, error);
}

std::map<std::string, std::string> Spool::checkpoints() const {
  std::map<std::string, std::string> out;
  Stmt s(prepared("SELECT source, position FROM checkpoints"));
  while (s.step() == SQLITE_ROW) out[s.text(0)] = s.text(1);
  return out;
}

std::vector<common::Symptom> Spool::openGroups() const {
  Stmt s(prepared("SELECT payload FROM open_groups WHERE id = 1"));
  if (s.step() != SQLITE_ROW) return {};
  std::string payload = s.text(0);
  std::string reason;
  auto decoded = common::decodeBatch(payload.data(), payload.size(), &reason);
  if (!decoded) return {};
  return std::move(decoded->symptoms);
}

std::vector<SpooledBatch> Spool::unacked(size_t limit, bool by_severity,
                                         const std::vector<uint64_t>& exclude) const {
  std::vector<SpooledBatch> out;
  Stmt s(prepared(by_severity
                  ? "SELECT seq, max_severity, symptoms, payload FROM batches ORDER BY max_severity DESC, seq ASC"
                  : "SELECT seq, max_severity, symptoms, payload FROM batches ORDER BY seq ASC"));
  while (out.size() < limit && s.step() == SQLITE_ROW) {
    auto seq = static_cast<uint64_t>(s.i64(0));
    if (std::find(exclude.begin(), exclude.end(), seq) != exclude.end()) continue;
    out.push_back({seq, static_cast<common::Severity>(s.i64(1)), static_cast<uint32_t>(s.i64(2)), s.text(3)});
  }
  return out;
}

bool Spool::beforeSend(uint64_t sequence) {
  // Written before the bytes leave, so a batch evicted after a crash between the two still counts
  // as possibly delivered. A resend finds it noted already and writes nothing.
  Stmt u(prepared("UPDATE batches SET sent = 1 WHERE seq = ?1 AND sent = 0"));
  u.bind(1, static_cast<int64_t>(sequence));
  if (u.step() != SQLITE_DONE) return false;
  fresh_mark_ = sqlite3_changes(db_) > 0 ? sequence : 0;
  return true;
}

void Spool::afterSend(uint64_t sequence, bool went_out) {
  // Not on the socket (no connection): the batch never left, unless an earlier send took it.
  if (!went_out && fresh_mark_ == sequence) {
    Stmt u(prepared("UPDATE batches SET sent = 0 WHERE seq = ?1"));
    u.bind(1, static_cast<int64_t>(sequence));
    u.step();  // failing, it stays noted as sent: counted as possibly delivered, never as lost
  }
  fresh_mark_ = 0;
}

bool Spool::ack(uint64_t sequence) {
  Stmt d(prepared("DELETE FROM batches WHERE seq = ?1"));
  d.bind(1, static_cast<int64_t>(sequence));
  return d.step() == SQLITE_DONE;
}

SpoolStats Spool::stats() const {
  SpoolStats st;
  Stmt s(prepared("SELECT COUNT(*), COALESCE(SUM(length(payload)), 0) FROM batches"));
  if (s.step() == SQLITE_ROW) {
    st.batches = static_cast<uint64_t>(s.i64(0));
    st.bytes = static_cast<uint64_t>(s.i64(1));
  }
  st.dropped_symptoms = static_cast<uint64_t>(counter("dropped_symptoms"));
  st.dropped_batches = static_cast<uint64_t>(counter("dropped_batches"));
  st.evicted_in_flight_symptoms = static_cast<uint64_t>(counter("evicted_in_flight_symptoms"));
  st.evicted_in_flight_batches = static_cast<uint64_t>(counter("evicted_in_flight_batches"));
  st.next_sequence = static_cast<uint64_t>(counter("next_seq"));
  return st;
}

}  // namespace faultline::agent

#include "aggregator/store/sqlite.h"

#include <memory>

namespace faultline::aggregator::sql {

Stmt::Stmt(sqlite3* db, std::string_view sql) {
  rc_ = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &s_, nullptr);
}
Stmt::Stmt(Db& db, std::string_view sql) : borrowed_(true) { s_ = db.cached(sql, &rc_); }
Stmt::~Stmt() {
  if (!borrowed_) {
    sqlite3_finalize(s_);
  } else if (s_) {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
}
Stmt& Stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  sqlite3_bind_double(s_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bindRef(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  return *this;
}
Stmt& Stmt::bindBlob(int i, std::string_view v) {
  sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bindNull(int i) {
  sqlite3_bind_null(s_, i);
  return *this;
}
int Stmt::step() { return s_ ? sqlite3_step(s_) : SQLITE_MISUSE; }
void Stmt::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}
int64_t Stmt::i64(int c) const { return sqlite3_column_int64(s_, c); }
double Stmt::f64(int c) const { return sqlite3_column_double(s_, c); }
bool Stmt::isNull(int c) const { return sqlite3_column_type(s_, c) == SQLITE_NULL; }
std::string_view Stmt::view(int c) const {
  auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
  return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string_view();
}
std::string Stmt::text(int c) const {
  auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
  return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string();
}

std::unique_ptr<Db> Db::open(const std::string& path, bool read_only, std::string* error) {
  sqlite3* db = nullptr;
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) |
              SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    *error = path + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return nullptr;
  }
  return std::unique_ptr<Db>(new Db(db));
}

Db::~Db() {
  for (auto& [sql, s] : cache_) sqlite3_finalize(s);
  sqlite3_close(db_);
}

sqlite3_stmt* Db::cached(std::string_view sql, int* rc) {
  auto it = cache_.find(std::string(sql));
  if (it != cache_.end()) {
    *rc = SQLITE_OK;
    return it->second;
  }
  sqlite3_stmt* s = nullptr;
  *rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (*rc != SQLITE_OK) return nullptr;
  cache_.emplace(std::string(sql), s);
  return s;
}

bool Db::exec(std::string_view sql, std::string* error) {
  char* msg = nullptr;
  if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
    if (error) *error = msg ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    return false;
  }
  return true;
}

Transaction::Transaction(Db& db) : db_(db), nested_(sqlite3_get_autocommit(db.get()) == 0) {
  began_ = db_.exec(nested_ ? "SAVEPOINT tx" : "BEGIN IMMEDIATE");
}
Transaction::~Transaction() {
  if (!began_ || done_) return;
  if (nested_) {
    db_.exec("ROLLBACK TO tx");
    db_.exec("RELEASE tx");
  } else {
    db_.exec("ROLLBACK");
  }
}
bool Transaction::commit(std::string* error) {
  if (!began_ || done_) return false;
  done_ = db_.exec(nested_ ? "RELEASE tx" : "COMMIT", error);
  return done_;
}

}  // namespace faultline::aggregator::sql

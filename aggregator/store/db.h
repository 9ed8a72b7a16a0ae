// Thin RAII over the SQLite C API: a connection and prepared statements with bound parameters
// only (no SQL is ever built from data). Not thread-safe: the owner serialises access.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace faultline::aggregator::sql {

class Db;

class Stmt {
 public:
  Stmt(sqlite3* db, std::string_view sql);
  // A statement prepared once per connection and kept (Db::cached): reset and its bindings
  // cleared on destruction instead of finalized. For hot paths (the ingest writer).
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return rc_ == SQLITE_OK; }
  // Binds by 1-based index; returns *this so binds chain.
  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  // Text not copied: `v` must stay unchanged until the statement is reset (hot loops only).
  Stmt& bindRef(int i, std::string_view v);
  // Binary data (packed Cap'n Proto has NULs; SQL length() of TEXT stops at the first one).
  Stmt& bindBlob(int i, std::string_view v);
  Stmt& bindNull(int i);
  // SQLITE_ROW, SQLITE_DONE or an error code.
  int step();
  void reset();
  int64_t i64(int col) const;
  double f64(int col) const;
  std::string text(int col) const;
  // The column's bytes without a copy: valid until the next step() or reset().
  std::string_view view(int col) const;
  bool isNull(int col) const;

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
  bool borrowed_ = false;
};

class Db {
 public:
  // Opens (creating) the file. On failure returns nullopt-like empty Db and sets *error.
  static std::unique_ptr<Db> open(const std::string& path, bool read_only, std::string* error);
  ~Db();
  sqlite3* get() { return db_; }
  // Runs SQL without parameters (pragmas, DDL, BEGIN/COMMIT). false + *error on failure.
  bool exec(std::string_view sql, std::string* error = nullptr);
  std::string errmsg() const { return sqlite3_errmsg(db_); }
  int64_t changes() const { return sqlite3_changes64(db_); }
  int64_t lastRowid() const { return sqlite3_last_insert_rowid(db_); }
  // The statement for `sql`, prepared on first use and kept until the Db closes (nullptr and
  // *rc set when it does not prepare). Keyed by the SQL text.
  sqlite3_stmt* cached(std::string_view sql, int* rc);

 private:
  explicit Db(sqlite3* db) : db_(db) {}
  sqlite3* db_;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() succeeded.
// BEGIN IMMEDIATE .. COMMIT, rolled back unless committed. Inside an open transaction (a group
// commit, Store::beginGroup) it is a SAVEPOINT instead: commit() releases it into the outer
// transaction, and a failure rolls back only its own writes.
class Transaction {
 public:
  explicit Transaction(Db& db);
  ~Transaction();
  bool began() const { return began_; }
  bool commit(std::string* error = nullptr);

 private:
  Db& db_;
  bool nested_ = false;
  bool began_ = false;
  bool done_ = false;
};

}  // namespace faultline::aggregator::sql

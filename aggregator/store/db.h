// The store's database connection: SQLite (the embedded default, a file) or PostgreSQL (a
// `postgresql://` URL, shared by several aggregator replicas), behind one small interface —
// prepared statements with bound parameters only (no SQL is ever built from data). Not
// thread-safe: the owner serialises access.
//
// SQL is written once, in the subset both engines read: `?` / `?N` parameters (PostgreSQL gets
// `$N`), INSERT .. ON CONFLICT, RETURNING, CASE instead of the two-argument MAX(). What differs
// comes from the Db: JSON lists and paths (jsonList, jsonText, jsonArray), the schema's types
// (ddl), transactions (begin).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace faultline::aggregator::sql {

// step() results (the values are SQLite's, so its engine passes them through).
inline constexpr int kOk = 0;
inline constexpr int kError = 1;
inline constexpr int kRow = 100;
inline constexpr int kDone = 101;

enum class Engine { kSqlite, kPostgres };

// Whether `target` names a PostgreSQL database (postgresql:// or postgres://) rather than a file.
bool isPostgresUrl(std::string_view target);
// The URL with its password (if any) replaced by "***", for logs and errors.
std::string redactUrl(std::string_view target);

// One engine's statement. Columns and parameters are 0- and 1-based as in SQLite.
class StmtImpl {
 public:
  virtual ~StmtImpl() = default;
  virtual bool ok() const = 0;
  virtual void bindInt(int i, int64_t v) = 0;
  virtual void bindDouble(int i, double v) = 0;
  // copy=false: `v` stays unchanged until the next reset (hot loops only).
  virtual void bindText(int i, std::string_view v, bool copy) = 0;
  virtual void bindBlob(int i, std::string_view v, bool copy) = 0;
  virtual void bindNull(int i) = 0;
  virtual int step() = 0;
  // Rewinds and clears the bindings.
  virtual void reset() = 0;
  // Rewinds, bindings kept (the next use binds every parameter again; SQLite's clearing walks
  // them all: thousands in a multi-row statement).
  virtual void rewind() { reset(); }
  virtual int64_t i64(int col) const = 0;
  virtual double f64(int col) const = 0;
  virtual std::string_view view(int col) const = 0;
  virtual bool isNull(int col) const = 0;
};

class Db;

class Stmt {
 public:
  // Prepared for this use only.
  Stmt(Db* db, std::string_view sql);
  // A statement prepared once per connection and kept (Db::cached): reset and its bindings
  // cleared on destruction instead of finalized. For statements run often.
  Stmt(Db& db, std::string_view sql);
  // The statement Db::cachedByKey keeps for `key` (`sql()` its text, made on the first use only).
  // Only for statements whose every parameter is bound on each use: rewound, not cleared, on
  // destruction.
  template <class Text>
  static Stmt keptByKey(Db& db, std::string_view key, Text sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return s_ && s_->ok(); }
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
  // Not copied: `v` must stay unchanged until the statement is reset (hot loops only).
  Stmt& bindBlobRef(int i, std::string_view v);
  Stmt& bindNull(int i);
  // kRow, kDone or an error code (the message: Db::errmsg()).
  int step();
  void reset();
  int64_t i64(int col) const;
  double f64(int col) const;
  std::string text(int col) const;
  // The column's bytes without a copy: valid until the next step() or reset().
  std::string_view view(int col) const;
  bool isNull(int col) const;

 private:
  Stmt(StmtImpl* kept, bool rewind_only) : s_(kept), rewind_only_(rewind_only) {}

  std::unique_ptr<StmtImpl> own_;
  StmtImpl* s_ = nullptr;
  bool rewind_only_ = false;
};

class Db {
 public:
  // Opens `target`: a PostgreSQL URL (isPostgresUrl), else a SQLite file (created unless
  // read_only). nullptr + *error on failure.
  static std::unique_ptr<Db> open(const std::string& target, bool read_only, std::string* error);
  virtual ~Db() = default;
  // For the one-shot Stmt constructor: Stmt s(db->get(), "...").
  Db* get() { return this; }
  virtual Engine engine() const = 0;
  bool postgres() const { return engine() == Engine::kPostgres; }
  // Runs SQL without parameters (DDL, several statements allowed). false + *error on failure.
  virtual bool exec(std::string_view sql, std::string* error = nullptr) = 0;
  virtual std::string errmsg() const = 0;
  // Rows changed by the last INSERT/UPDATE/DELETE.
  virtual int64_t changes() const = 0;
  virtual bool inTransaction() const = 0;
  // "BEGIN IMMEDIATE" (SQLite: take the write lock now) or "BEGIN".
  virtual std::string_view beginSql() const = 0;
  // How long a statement waits for another connection's lock (SQLite) before it fails.
  virtual void setBusyTimeout(int /*ms*/) {}
  virtual std::unique_ptr<StmtImpl> prepare(std::string_view sql) = 0;
  // The same, for a statement the connection keeps (PostgreSQL: prepared on the server).
  virtual std::unique_ptr<StmtImpl> prepareKept(std::string_view sql) { return prepare(sql); }
  // The statement for `sql`, prepared on first use and kept until the Db closes. Keyed by the
  // SQL text: only for SQL whose text does not depend on data.
  StmtImpl* cached(std::string_view sql);
  // The same statement, found by a short `key` that always names the same text (`sql()` makes it,
  // on the first use only): a multi-row statement's text is tens of kilobytes, and hashing and
  // comparing it on every use cost about what a 256-row chunk's binds do.
  template <class Text>
  StmtImpl* cachedByKey(std::string_view key, Text sql) {
    if (auto it = by_key_.find(key); it != by_key_.end()) return it->second;
    StmtImpl* s = cached(sql());
    if (s) by_key_.emplace(std::string(key), s);
    return s;
  }

  // ---- what the engines spell differently ----
  // A set of the strings of the JSON array bound to parameter n: "node IN " + jsonList(1).
  virtual std::string jsonList(int n) const = 0;
  // The same for a JSON array of integers, as integers: "id IN " + jsonIntList(1).
  virtual std::string jsonIntList(int n) const = 0;
  // The text (or number, as text) at `path` ("a.b") of the JSON in `expr`; NULL when absent.
  virtual std::string jsonText(std::string_view expr, std::string_view path) const = 0;
  // FROM-clause item: the elements of the array at `path` of the JSON in `expr`, as `alias`;
  // alias.value is each element (jsonField(alias + ".value", key) reads a member of it).
  virtual std::string jsonArray(std::string_view expr, std::string_view path, std::string_view alias) const = 0;
  virtual std::string jsonField(std::string_view element, std::string_view key) const = 0;
  // FROM-clause item: the strings of the JSON array in `expr`, as alias.value.
  virtual std::string jsonStrings(std::string_view expr, std::string_view alias) const = 0;
  // Schema text written for SQLite, in this engine's types (PostgreSQL: BIGINT, BYTEA, identity
  // columns for INTEGER PRIMARY KEY, no WITHOUT ROWID).
  virtual std::string ddl(std::string_view sqlite_ddl) const = 0;

 protected:
  // Engines call this first in their destructor: the cached statements go before the connection.
  void clearCache() {
    by_key_.clear();
    cache_.clear();
  }

 private:
  // Looked up by string_view (no copy of a long multi-row statement's text per lookup).
  struct TextHash {
    using is_transparent = void;
    size_t operator()(std::string_view v) const { return std::hash<std::string_view>()(v); }
  };
  std::unordered_map<std::string, std::unique_ptr<StmtImpl>, TextHash, std::equal_to<>> cache_;
  std::unordered_map<std::string, StmtImpl*, TextHash, std::equal_to<>> by_key_;  // into cache_
};

template <class Text>
Stmt Stmt::keptByKey(Db& db, std::string_view key, Text sql) {
  return Stmt(db.cachedByKey(key, sql), true);
}

// BEGIN (IMMEDIATE) on construction; ROLLBACK on destruction unless commit() succeeded. Inside an
// open transaction (a group commit, Store::beginGroup) it is a SAVEPOINT instead: commit()
// releases it into the outer transaction, and a failure rolls back only its own writes.
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

// The engines (sqlite.cpp, postgres.cpp).
std::unique_ptr<Db> openSqlite(const std::string& path, bool read_only, std::string* error);
std::unique_ptr<Db> openPostgres(const std::string& url, bool read_only, std::string* error);

}  // namespace faultline::aggregator::sql

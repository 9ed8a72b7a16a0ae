// The SQLite engine of sql::Db: a file in WAL mode, statements prepared with sqlite3_prepare_v3.
#include <sqlite3.h>

#include <fmt/format.h>

#include "aggregator/store/db.h"

namespace faultline::aggregator::sql {

namespace {

class SqliteStmt final : public StmtImpl {
 public:
  SqliteStmt(sqlite3* db, std::string_view sql, bool persistent) {
    rc_ = sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()), persistent ? SQLITE_PREPARE_PERSISTENT : 0,
                             &s_, nullptr);
  }
  ~SqliteStmt() override { sqlite3_finalize(s_); }
  bool ok() const override { return rc_ == SQLITE_OK && s_; }
  void bindInt(int i, int64_t v) override { sqlite3_bind_int64(s_, i, v); }
  void bindDouble(int i, double v) override { sqlite3_bind_double(s_, i, v); }
  void bindText(int i, std::string_view v, bool copy) override {
    sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
  }
  void bindBlob(int i, std::string_view v, bool copy) override {
    sqlite3_bind_blob(s_, i, v.data(), static_cast<int>(v.size()), copy ? SQLITE_TRANSIENT : SQLITE_STATIC);
  }
  void bindNull(int i) override { sqlite3_bind_null(s_, i); }
  int step() override { return s_ ? sqlite3_step(s_) : SQLITE_MISUSE; }
  void reset() override {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  void rewind() override { sqlite3_reset(s_); }
  int64_t i64(int c) const override { return sqlite3_column_int64(s_, c); }
  double f64(int c) const override { return sqlite3_column_double(s_, c); }
  std::string_view view(int c) const override {
    auto p = static_cast<const char*>(sqlite3_column_blob(s_, c));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(s_, c))) : std::string_view();
  }
  bool isNull(int c) const override { return sqlite3_column_type(s_, c) == SQLITE_NULL; }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_OK;
};

class SqliteDb final : public Db {
 public:
  explicit SqliteDb(sqlite3* db) : db_(db) {}
  ~SqliteDb() override {
    clearCache();
    sqlite3_close(db_);
  }
  Engine engine() const override { return Engine::kSqlite; }
  bool exec(std::string_view sql, std::string* error) override {
    char* msg = nullptr;
    if (sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &msg) != SQLITE_OK) {
      if (error) *error = msg ? msg : sqlite3_errmsg(db_);
      sqlite3_free(msg);
      return false;
    }
    return true;
  }
  std::string errmsg() const override { return sqlite3_errmsg(db_); }
  int64_t changes() const override { return sqlite3_changes64(db_); }
  bool inTransaction() const override { return sqlite3_get_autocommit(db_) == 0; }
  std::string_view beginSql() const override { return "BEGIN IMMEDIATE"; }
  void setBusyTimeout(int ms) override { sqlite3_busy_timeout(db_, ms); }
  std::unique_ptr<StmtImpl> prepare(std::string_view sql) override {
    return std::make_unique<SqliteStmt>(db_, sql, false);
  }
  std::unique_ptr<StmtImpl> prepareKept(std::string_view sql) override {
    return std::make_unique<SqliteStmt>(db_, sql, true);
  }

  std::string jsonList(int n) const override { return fmt::format("(SELECT value FROM json_each(?{}))", n); }
  std::string jsonIntList(int n) const override { return jsonList(n); }
  std::string jsonText(std::string_view expr, std::string_view path) const override {
    return fmt::format("json_extract({}, '$.{}')", expr, path);
  }
  std::string jsonArray(std::string_view expr, std::string_view path, std::string_view alias) const override {
    return fmt::format("json_each({}, '$.{}') {}", expr, path, alias);
  }
  std::string jsonField(std::string_view element, std::string_view key) const override {
    return fmt::format("json_extract({}, '$.{}')", element, key);
  }
  std::string jsonStrings(std::string_view expr, std::string_view alias) const override {
    return fmt::format("json_each({}) {}", expr, alias);
  }
  std::string ddl(std::string_view sqlite_ddl) const override { return std::string(sqlite_ddl); }

 private:
  sqlite3* db_;
};

}  // namespace

std::unique_ptr<Db> openSqlite(const std::string& path, bool read_only, std::string* error) {
  sqlite3* db = nullptr;
  int flags = (read_only ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    *error = path + ": " + (db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_close(db);
    return nullptr;
  }
  return std::make_unique<SqliteDb>(db);
}

}  // namespace faultline::aggregator::sql

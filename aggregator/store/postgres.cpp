// The PostgreSQL engine of sql::Db (libpq). Parameters go as text (bytea as binary) with their
// types declared (int8, float8, text, bytea), results come back as text. Statements run often
// (Db::cached) are prepared on the server once per connection and type signature; a lost
// connection is re-established on the next statement, and what was prepared is prepared again.
#include <libpq-fe.h>

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "aggregator/store/db.h"
#include "common/wire_detail.h"

namespace faultline::aggregator::sql {

namespace {

// pg_type OIDs (fixed in the catalog).
constexpr Oid kInt8 = 20;
constexpr Oid kText = 25;
constexpr Oid kFloat8 = 701;
constexpr Oid kBytea = 17;
constexpr Oid kBool = 16;

// `?` and `?N` parameters as `$N` (SQLite numbering: a bare `?` is one more than the largest so
// far), outside quoted text and $$ bodies. *count gets the largest number.
std::string translate(std::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int max = 0;
  for (size_t i = 0; i < sql.size(); ++i) {
    char c = sql[i];
    if (c == '\'' || c == '"') {
      size_t end = sql.find(c, i + 1);
      if (end == std::string_view::npos) end = sql.size() - 1;
      out.append(sql.substr(i, end - i + 1));
      i = end;
    } else if (c == '$' && i + 1 < sql.size() && sql[i + 1] == '$') {
      size_t end = sql.find("$$", i + 2);
      end = end == std::string_view::npos ? sql.size() - 1 : end + 1;
      out.append(sql.substr(i, end - i + 1));
      i = end;
    } else if (c == '?') {
      int n = 0;
      size_t j = i + 1;
      while (j < sql.size() && sql[j] >= '0' && sql[j] <= '9') n = n * 10 + (sql[j++] - '0');
      if (j == i + 1) n = max + 1;
      if (n > max) max = n;
      out += '$';
      out += std::to_string(n);
      i = j - 1;
    } else {
      out += c;
    }
  }
  *count = max;
  return out;
}

// PostgreSQL text cannot hold NUL or bytes that are not UTF-8: both become U+FFFD (the rest of
// the value is kept; refusing it would lose the whole batch it came in).
std::string cleanText(std::string_view v) {
  std::string out = common::wire_detail::validUtf8(v) ? std::string(v) : common::wire_detail::repairUtf8(v);
  for (size_t p = out.find('\0'); p != std::string::npos; p = out.find('\0', p)) out.replace(p, 1, "\xEF\xBF\xBD");
  return out;
}

class PgDb;

class PgStmt final : public StmtImpl {
 public:
  PgStmt(PgDb& db, std::string_view sql, bool keep);
  ~PgStmt() override { clearResult(); }
  bool ok() const override { return true; }
  void bindInt(int i, int64_t v) override { set(i, std::to_string(v), kInt8); }
  void bindDouble(int i, double v) override { set(i, fmt::format("{}", v), kFloat8); }
  void bindText(int i, std::string_view v, bool) override { set(i, cleanText(v), kText); }
  void bindBlob(int i, std::string_view v, bool) override { set(i, std::string(v), kBytea); }
  void bindNull(int i) override {
    if (!in(i)) return;
    null_[i - 1] = true;
    values_[i - 1].clear();
  }
  int step() override;
  void reset() override {
    clearResult();
    for (size_t i = 0; i < values_.size(); ++i) {
      values_[i].clear();
      null_[i] = true;
      types_[i] = 0;
    }
  }
  int64_t i64(int c) const override {
    if (!res_ || PQgetisnull(res_, row_, c)) return 0;
    const char* v = PQgetvalue(res_, row_, c);
    if (v[0] == 't') return 1;
    if (v[0] == 'f') return 0;
    int64_t out = 0;
    auto [end, ec] = std::from_chars(v, v + std::strlen(v), out);
    if (ec != std::errc() || *end == '.') return static_cast<int64_t>(std::strtod(v, nullptr));
    return out;
  }
  double f64(int c) const override {
    return res_ && !PQgetisnull(res_, row_, c) ? std::strtod(PQgetvalue(res_, row_, c), nullptr) : 0.0;
  }
  std::string_view view(int c) const override;
  bool isNull(int c) const override { return !res_ || PQgetisnull(res_, row_, c); }

 private:
  bool in(int i) const { return i >= 1 && i <= static_cast<int>(values_.size()); }
  void set(int i, std::string v, Oid type) {
    if (!in(i)) return;
    values_[i - 1] = std::move(v);
    null_[i - 1] = false;
    types_[i - 1] = type;
  }
  void clearResult() {
    if (res_) PQclear(res_);
    res_ = nullptr;
    row_ = -1;
    rows_ = 0;
  }

  PgDb& db_;
  std::string sql_;
  bool keep_;  // prepared on the server, by type signature
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<Oid> types_;
  std::unordered_map<std::string, std::string> prepared_;  // signature -> statement name
  uint64_t generation_ = 0;                                  // the connection they were prepared on
  PGresult* res_ = nullptr;
  int row_ = -1, rows_ = 0;
  mutable std::vector<std::string> decoded_;  // bytea columns of the current row
};

class PgDb final : public Db {
 public:
  PgDb(PGconn* conn, bool read_only) : conn_(conn), read_only_(read_only) {}
  ~PgDb() override {
    clearCache();
    PQfinish(conn_);
  }
  Engine engine() const override { return Engine::kPostgres; }
  bool exec(std::string_view sql, std::string* error) override {
    reconnectIfLost();
    PGresult* r = PQexec(conn_, std::string(sql).c_str());
    bool ok = checkResult(r);
    if (!ok && error) *error = error_;
    PQclear(r);
    return ok;
  }
  std::string errmsg() const override { return error_; }
  int64_t changes() const override { return changes_; }
  bool inTransaction() const override { return PQtransactionStatus(conn_) != PQTRANS_IDLE; }
  std::string_view beginSql() const override { return "BEGIN"; }
  std::unique_ptr<StmtImpl> prepare(std::string_view sql) override {
    return std::make_unique<PgStmt>(*this, sql, false);
  }
  std::unique_ptr<StmtImpl> prepareKept(std::string_view sql) override { return std::make_unique<PgStmt>(*this, sql, true); }

  std::string jsonList(int n) const override {
    return fmt::format("(SELECT jsonb_array_elements_text(CAST(?{} AS jsonb)))", n);
  }
  std::string jsonIntList(int n) const override {
    return fmt::format("(SELECT CAST(jsonb_array_elements_text(CAST(?{} AS jsonb)) AS BIGINT))", n);
  }
  std::string jsonText(std::string_view expr, std::string_view path) const override {
    return fmt::format("(CAST({} AS jsonb) #>> '{{{}}}')", expr, dotsToCommas(path));
  }
  std::string jsonArray(std::string_view expr, std::string_view path, std::string_view alias) const override {
    return fmt::format("jsonb_array_elements(CAST({} AS jsonb) #> '{{{}}}') AS {}(value)", expr, dotsToCommas(path),
                       alias);
  }
  std::string jsonField(std::string_view element, std::string_view key) const override {
    return fmt::format("({} ->> '{}')", element, key);
  }
  std::string jsonStrings(std::string_view expr, std::string_view alias) const override {
    return fmt::format("jsonb_array_elements_text(CAST({} AS jsonb)) AS {}(value)", expr, alias);
  }
  std::string ddl(std::string_view sqlite_ddl) const override;

  PGconn* conn() { return conn_; }
  uint64_t generation() const { return generation_; }
  std::string nextName() { return "fl" + std::to_string(++names_); }
  // After a failed statement: a connection that is gone is re-established before the next one.
  void reconnectIfLost() {
    if (PQstatus(conn_) == CONNECTION_OK) return;
    PQreset(conn_);
    if (PQstatus(conn_) == CONNECTION_OK) {
      ++generation_;
      setup();
    }
  }
  // true for a result that succeeded; else the error is kept for errmsg().
  bool checkResult(PGresult* r) {
    auto st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      const char* n = PQcmdTuples(r);
      changes_ = n && *n ? std::atoll(n) : 0;
      return true;
    }
    error_ = r ? PQresultErrorMessage(r) : PQerrorMessage(conn_);
    while (!error_.empty() && (error_.back() == '\n' || error_.back() == ' ')) error_.pop_back();
    if (error_.empty()) error_ = "postgresql: no result";
    return false;
  }
  void setError(std::string e) { error_ = std::move(e); }
  bool setup() {
    PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
    PQsetClientEncoding(conn_, "UTF8");
    return !read_only_ || exec("SET default_transaction_read_only = on", nullptr);
  }

 private:
  static std::string dotsToCommas(std::string_view path) {
    std::string p(path);
    for (char& c : p)
      if (c == '.') c = ',';
    return p;
  }
  PGconn* conn_;
  bool read_only_;
  std::string error_;
  int64_t changes_ = 0;
  uint64_t generation_ = 0;
  uint64_t names_ = 0;
};

PgStmt::PgStmt(PgDb& db, std::string_view sql, bool keep) : db_(db), keep_(keep) {
  int n = 0;
  sql_ = translate(sql, &n);
  values_.resize(static_cast<size_t>(n));
  null_.assign(static_cast<size_t>(n), true);
  types_.assign(static_cast<size_t>(n), 0);
}

int PgStmt::step() {
  if (res_) {
    if (row_ + 1 < rows_) {
      ++row_;
      decoded_.clear();
      return kRow;
    }
    return kDone;
  }
  db_.reconnectIfLost();
  std::vector<const char*> values(values_.size());
  std::vector<int> lengths(values_.size()), formats(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    values[i] = null_[i] ? nullptr : values_[i].data();
    lengths[i] = static_cast<int>(values_[i].size());
    formats[i] = types_[i] == kBytea ? 1 : 0;
  }
  const int n = static_cast<int>(values_.size());
  PGresult* r = nullptr;
  if (keep_) {
    if (generation_ != db_.generation()) {
      prepared_.clear();
      generation_ = db_.generation();
    }
    std::string signature(reinterpret_cast<const char*>(types_.data()), types_.size() * sizeof(Oid));
    auto it = prepared_.find(signature);
    if (it == prepared_.end()) {
      std::string name = db_.nextName();
      PGresult* p = PQprepare(db_.conn(), name.c_str(), sql_.c_str(), n, types_.data());
      bool ok = db_.checkResult(p);
      PQclear(p);
      if (!ok) return kError;
      it = prepared_.emplace(std::move(signature), std::move(name)).first;
    }
    r = PQexecPrepared(db_.conn(), it->second.c_str(), n, values.data(), lengths.data(), formats.data(), 0);
  } else {
    r = PQexecParams(db_.conn(), sql_.c_str(), n, types_.data(), values.data(), lengths.data(), formats.data(), 0);
  }
  if (!db_.checkResult(r)) {
    PQclear(r);
    return kError;
  }
  res_ = r;
  rows_ = PQresultStatus(r) == PGRES_TUPLES_OK ? PQntuples(r) : 0;
  row_ = 0;
  decoded_.clear();
  return rows_ > 0 ? kRow : kDone;
}

std::string_view PgStmt::view(int c) const {
  if (!res_ || PQgetisnull(res_, row_, c)) return {};
  const char* v = PQgetvalue(res_, row_, c);
  size_t len = static_cast<size_t>(PQgetlength(res_, row_, c));
  if (PQftype(res_, c) != kBytea) {
    if (PQftype(res_, c) == kBool) return v[0] == 't' ? "1" : "0";
    return {v, len};
  }
  if (decoded_.size() <= static_cast<size_t>(c)) decoded_.resize(static_cast<size_t>(c) + 1);
  size_t out_len = 0;
  unsigned char* raw = PQunescapeBytea(reinterpret_cast<const unsigned char*>(v), &out_len);
  decoded_[static_cast<size_t>(c)].assign(reinterpret_cast<const char*>(raw), raw ? out_len : 0);
  PQfreemem(raw);
  return decoded_[static_cast<size_t>(c)];
}

void replaceAll(std::string& s, std::string_view from, std::string_view to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
}

std::string PgDb::ddl(std::string_view sqlite_ddl) const {
  std::string s(sqlite_ddl);
  replaceAll(s, " WITHOUT ROWID", "");
  replaceAll(s, "INTEGER PRIMARY KEY AUTOINCREMENT", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
  replaceAll(s, "INTEGER PRIMARY KEY", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY");
  replaceAll(s, "INTEGER", "BIGINT");
  replaceAll(s, "BLOB", "BYTEA");
  replaceAll(s, " REAL", " DOUBLE PRECISION");
  return s;
}

}  // namespace

std::unique_ptr<Db> openPostgres(const std::string& url, bool read_only, std::string* error) {
  PGconn* conn = PQconnectdb(url.c_str());
  if (!conn || PQstatus(conn) != CONNECTION_OK) {
    std::string why = conn ? PQerrorMessage(conn) : "out of memory";
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    *error = redactUrl(url) + ": " + why;
    PQfinish(conn);
    return nullptr;
  }
  auto db = std::make_unique<PgDb>(conn, read_only);
  if (!db->setup()) {
    *error = redactUrl(url) + ": " + db->errmsg();
    return nullptr;
  }
  return db;
}

}  // namespace faultline::aggregator::sql

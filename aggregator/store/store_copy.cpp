#include "aggregator/store/store_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "aggregator/store/db.h"
#include "aggregator/store/store.h"

namespace faultline::aggregator {

namespace {

using sql::Stmt;

// How a column's values are read from the source and bound on the target: from the target's
// declared type (SQLite: INTEGER/REAL/TEXT/BLOB; PostgreSQL: bigint/double precision/text/bytea).
enum class Kind { kInt, kReal, kText, kBlob };

Kind kindOf(std::string type) {
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char c) { return std::toupper(c); });
  if (type.find("INT") != std::string::npos) return Kind::kInt;
  if (type.find("REAL") != std::string::npos || type.find("DOUBLE") != std::string::npos ||
      type.find("FLOAT") != std::string::npos)
    return Kind::kReal;
  if (type.find("BLOB") != std::string::npos || type.find("BYTEA") != std::string::npos) return Kind::kBlob;
  return Kind::kText;
}

struct Column {
  std::string name;
  Kind kind = Kind::kText;
  bool identity = false;  // PostgreSQL: GENERATED ... AS IDENTITY (a sequence to advance)
};

std::string sqlName(const std::string& name) { return "\"" + name + "\""; }

// The store's tables (not the engine's own, nor the schema bookkeeping).
std::vector<std::string> tablesOf(sql::Db& db) {
  std::vector<std::string> out;
  Stmt s(db.get(), db.postgres() ? "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                                   "current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name"
                                 : "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name");
  while (s.step() == sql::kRow) {
    std::string name = s.text(0);
    if (name.rfind("sqlite_", 0) == 0 || name == "faultline_schema") continue;
    out.push_back(std::move(name));
  }
  return out;
}

std::vector<Column> columnsOf(sql::Db& db, const std::string& table) {
  std::vector<Column> out;
  if (db.postgres()) {
    Stmt s(db.get(),
           "SELECT column_name, data_type, is_identity FROM information_schema.columns WHERE table_schema = "
           "current_schema() AND table_name = ? ORDER BY ordinal_position");
    s.bind(1, table);
    while (s.step() == sql::kRow) out.push_back({s.text(0), kindOf(s.text(1)), s.text(2) == "YES"});
  } else {
    Stmt s(db.get(), "SELECT name, type FROM pragma_table_info(?) ORDER BY cid");
    s.bind(1, table);
    while (s.step() == sql::kRow) out.push_back({s.text(0), kindOf(s.text(1)), false});
  }
  return out;
}

std::optional<uint64_t> countRows(sql::Db& db, const std::string& table) {
  Stmt s(db.get(), "SELECT COUNT(*) FROM " + sqlName(table));
  if (s.step() != sql::kRow) return std::nullopt;
  return static_cast<uint64_t>(s.i64(0));
}

int schemaVersionOf(const std::string& target, std::string* error) {
  auto db = sql::Db::open(target, true, error);
  if (!db) return -1;
  if (db->postgres()) {
    Stmt t(db->get(), "SELECT to_regclass('faultline_schema') IS NOT NULL");
    if (t.step() != sql::kRow || t.i64(0) == 0) return 0;
    Stmt v(db->get(), "SELECT COALESCE(MAX(version), 0) FROM faultline_schema");
    return v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : 0;
  }
  Stmt v(db->get(), "PRAGMA user_version");
  return v.step() == sql::kRow ? static_cast<int>(v.i64(0)) : 0;
}

struct Value {
  bool null = true;
  int64_t i = 0;
  double d = 0;
  std::string s;
};

class TableCopier {
 public:
  TableCopier(sql::Db& src, sql::Db& dst, std::string table, std::vector<Column> cols)
      : src_(src), dst_(dst), table_(std::move(table)), cols_(std::move(cols)) {
    // Both engines take tens of thousands of parameters in one statement.
    per_batch_ = std::max<size_t>(1, std::min<size_t>(500, 30000 / std::max<size_t>(1, cols_.size())));
  }

  // Rows copied, or nullopt + *error.
  std::optional<uint64_t> run(std::string* error) {
    std::string names;
    for (const auto& c : cols_) names += (names.empty() ? "" : ", ") + sqlName(c.name);
    Stmt read(src_.get(), "SELECT " + names + " FROM " + sqlName(table_));
    uint64_t copied = 0;
    std::vector<std::vector<Value>> batch;
    int rc;
    while ((rc = read.step()) == sql::kRow) {
      auto& row = batch.emplace_back(cols_.size());
      for (size_t c = 0; c < cols_.size(); ++c) {
        const int col = static_cast<int>(c);
        Value& v = row[c];
        v.null = read.isNull(col);
        if (v.null) continue;
        switch (cols_[c].kind) {
          case Kind::kInt: v.i = read.i64(col); break;
          case Kind::kReal: v.d = read.f64(col); break;
          default: v.s = std::string(read.view(col));
        }
      }
      if (batch.size() == per_batch_) {
        if (!flush(batch, error)) return std::nullopt;
        copied += batch.size();
        batch.clear();
      }
    }
    if (rc != sql::kDone) {
      *error = fmt::format("reading {}: {}", table_, src_.errmsg());
      return std::nullopt;
    }
    if (!batch.empty() && !flush(batch, error)) return std::nullopt;
    return copied + batch.size();
  }

 private:
  bool flush(const std::vector<std::vector<Value>>& rows, std::string* error) {
    std::string names, one;
    for (const auto& c : cols_) {
      names += (names.empty() ? "" : ", ") + sqlName(c.name);
      one += one.empty() ? "(?" : ", ?";
    }
    one += ")";
    std::string text = "INSERT INTO " + sqlName(table_) + "(" + names + ") VALUES ";
    for (size_t r = 0; r < rows.size(); ++r) text += (r ? ", " : "") + one;
    // The target's own meta rows (if any) give way to the source's.
    if (table_ == "meta") text += " ON CONFLICT(key) DO UPDATE SET value = excluded.value";
    Stmt ins(dst_, text);  // kept: a full batch has the same text every time
    int p = 1;
    for (const auto& row : rows)
      for (size_t c = 0; c < cols_.size(); ++c, ++p) {
        const Value& v = row[c];
        if (v.null) ins.bindNull(p);
        else if (cols_[c].kind == Kind::kInt) ins.bind(p, v.i);
        else if (cols_[c].kind == Kind::kReal) ins.bind(p, v.d);
        else if (cols_[c].kind == Kind::kBlob) ins.bindBlob(p, v.s);
        else ins.bind(p, v.s);
      }
    if (ins.step() != sql::kDone) {
      *error = fmt::format("writing {}: {}", table_, dst_.errmsg());
      return false;
    }
    return true;
  }

  sql::Db& src_;
  sql::Db& dst_;
  std::string table_;
  std::vector<Column> cols_;
  size_t per_batch_;
};

std::string plainTarget(const std::string& t) { return t.rfind("sqlite:", 0) == 0 ? t.substr(7) : t; }

// "" when `from` may be copied into `to`, else why not.
std::string checkEnds(const std::string& from, const std::string& to) {
  if (from.empty() || to.empty()) return "both --from and --to are needed";
  if (from == to) return "--from and --to name the same store";
  if (!sql::isPostgresUrl(from) && !std::filesystem::exists(from)) return from + ": no such store";
  return "";
}

// Per table of the source, its columns with the target's types; nullopt + *error when the target
// lacks one, or already holds data (copying would mix two stores' histories).
std::optional<std::vector<std::vector<Column>>> matchColumns(sql::Db& src, sql::Db& dst,
                                                            const std::vector<std::string>& tables,
                                                            const std::string& to_name, std::string* error) {
  std::vector<std::vector<Column>> columns;
  std::string held;
  for (const auto& t : tables) {
    auto want = columnsOf(src, t);
    auto have = columnsOf(dst, t);
    if (have.empty()) {
      *error = fmt::format("{}: no table {} (a schema older than the source's?)", to_name, t);
      return std::nullopt;
    }
    for (auto& c : want) {
      auto it = std::find_if(have.begin(), have.end(), [&](const Column& h) { return h.name == c.name; });
      if (it == have.end()) {
        *error = fmt::format("{}: table {} has no column {}", to_name, t, c.name);
        return std::nullopt;
      }
      c = *it;
    }
    columns.push_back(std::move(want));
    if (t == "meta") continue;
    auto n = countRows(dst, t);
    if (!n) {
      *error = fmt::format("{}: {}", to_name, dst.errmsg());
      return std::nullopt;
    }
    if (*n) held += fmt::format("{}{} {}", held.empty() ? "" : ", ", t, *n);
  }
  if (!held.empty()) {
    *error = fmt::format(
        "{} already holds data ({}): migrate into an empty database (copying would mix two stores' histories)",
        to_name, held);
    return std::nullopt;
  }
  return columns;
}

// The target's triggers (the site relay's capture on verdicts) off while rows are copied, so they
// do not fire for them (the source's relay_pending rows are copied as they are), and on again.
class TriggerPause {
 public:
  TriggerPause(sql::Db& dst, const std::vector<std::string>& tables) : dst_(dst), tables_(tables) {}
  bool suspend(std::string* error) {
    if (dst_.postgres()) {
      for (const auto& t : tables_)
        if (!dst_.exec("ALTER TABLE " + sqlName(t) + " DISABLE TRIGGER USER", error)) return false;
      return true;
    }
    std::vector<std::string> names;
    Stmt s(dst_.get(), "SELECT name, sql FROM sqlite_master WHERE type = 'trigger'");
    while (s.step() == sql::kRow) {
      names.push_back(s.text(0));
      sqlite_triggers_.push_back(s.text(1));
    }
    for (const auto& n : names)
      if (!dst_.exec("DROP TRIGGER " + sqlName(n), error)) return false;
    return true;
  }
  bool restore(std::string* error) {
    if (dst_.postgres()) {
      for (const auto& t : tables_)
        if (!dst_.exec("ALTER TABLE " + sqlName(t) + " ENABLE TRIGGER USER", error)) return false;
      return true;
    }
    for (const auto& sql_text : sqlite_triggers_)
      if (!dst_.exec(sql_text, error)) return false;
    return true;
  }

 private:
  sql::Db& dst_;
  const std::vector<std::string>& tables_;
  std::vector<std::string> sqlite_triggers_;
};

// One table copied and checked (every source row arrived; meta: the target's own keys may add to
// them); on PostgreSQL its identity sequences moved past the copied ids so new rows get fresh ones.
bool copyTable(sql::Db& src, sql::Db& dst, const std::string& t, const std::vector<Column>& columns,
               StoreCopyResult& result, std::string* error) {
  auto rows = TableCopier(src, dst, t, columns).run(error);
  if (!rows) return false;
  auto source_rows = countRows(src, t);
  auto target_rows = countRows(dst, t);
  if (!source_rows || !target_rows || *source_rows != *rows ||
      (t == "meta" ? *target_rows < *rows : *target_rows != *rows)) {
    *error = fmt::format("{}: {} rows read, {} in the source, {} in the target", t, *rows,
                         source_rows ? *source_rows : 0, target_rows ? *target_rows : 0);
    return false;
  }
  result.tables.push_back({t, *rows});
  if (!dst.postgres()) return true;
  for (const auto& c : columns) {
    if (!c.identity) continue;
    Stmt adv(dst.get(), "SELECT setval(pg_get_serial_sequence(?, ?), MAX(" + sqlName(c.name) + ")) FROM " +
                            sqlName(t) + " HAVING MAX(" + sqlName(c.name) + ") IS NOT NULL");
    adv.bind(1, t).bind(2, c.name);
    int rc = adv.step();
    if (rc != sql::kRow && rc != sql::kDone) {
      *error = fmt::format("{}.{}: {}", t, c.name, dst.errmsg());
      return false;
    }
    if (rc == sql::kRow) ++result.sequences;
  }
  return true;
}

}  // namespace

std::optional<StoreCopyResult> copyStore(const std::string& from_arg, const std::string& to_arg,
                                         const common::Clock& clock, std::string* error) {
  const std::string from = plainTarget(from_arg), to = plainTarget(to_arg);
  const std::string to_name = sql::redactUrl(to);
  if (auto why = checkEnds(from, to); !why.empty()) {
    *error = why;
    return std::nullopt;
  }
  StoreCopyResult result;
  result.schema = Store::latestSchemaVersion();
  result.source_schema = schemaVersionOf(from, error);
  if (result.source_schema < 0) return std::nullopt;
  // Opening each as a Store brings it to the latest schema (the target gets its tables).
  for (const auto* target : {&from, &to}) {
    if (!Store::open(*target, clock, {}, error)) return std::nullopt;
  }
  auto src = sql::Db::open(from, false, error);
  auto dst = src ? sql::Db::open(to, false, error) : nullptr;
  if (!dst) return std::nullopt;
  src->setBusyTimeout(10000);
  dst->setBusyTimeout(10000);
  const std::vector<std::string> tables = tablesOf(*src);
  const auto columns = matchColumns(*src, *dst, tables, to_name, error);
  if (!columns) return std::nullopt;

  // One snapshot of the source; one transaction on the target.
  if (!src->exec(src->postgres() ? "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" : "BEGIN", error)) return std::nullopt;
  sql::Transaction tx(*dst);
  if (!tx.began()) {
    *error = fmt::format("{}: {}", to_name, dst->errmsg());
    return std::nullopt;
  }
  TriggerPause triggers(*dst, tables);
  if (!triggers.suspend(error)) return std::nullopt;
  for (size_t i = 0; i < tables.size(); ++i)
    if (!copyTable(*src, *dst, tables[i], (*columns)[i], result, error)) return std::nullopt;
  if (!triggers.restore(error)) return std::nullopt;
  if (!tx.commit(error)) {
    *error = fmt::format("{}: {}", to_name, *error);
    return std::nullopt;
  }
  src->exec("COMMIT");
  return result;
}

}  // namespace faultline::aggregator

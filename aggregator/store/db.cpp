#include "aggregator/store/db.h"

namespace faultline::aggregator::sql {

bool isPostgresUrl(std::string_view target) {
  return target.rfind("postgresql://", 0) == 0 || target.rfind("postgres://", 0) == 0;
}

std::string redactUrl(std::string_view target) {
  std::string out(target);
  if (!isPostgresUrl(target)) return out;
  // scheme://user:password@host/...: the password is between the first ':' after "//" and '@'.
  size_t auth = out.find("//") + 2;
  size_t at = out.find('@', auth);
  size_t slash = out.find('/', auth);
  if (at != std::string::npos && (slash == std::string::npos || at < slash)) {
    size_t colon = out.find(':', auth);
    if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
  }
  // ...?password=secret&...
  for (size_t p = out.find("password="); p != std::string::npos; p = out.find("password=", p + 1)) {
    size_t end = out.find('&', p);
    out.replace(p + 9, (end == std::string::npos ? out.size() : end) - p - 9, "***");
  }
  return out;
}

Stmt::Stmt(Db* db, std::string_view sql) : own_(db->prepare(sql)), s_(own_.get()) {}
Stmt::Stmt(Db& db, std::string_view sql) : s_(db.cached(sql)) {}
Stmt::~Stmt() {
  if (own_ || !s_) return;
  if (rewind_only_) s_->rewind();
  else s_->reset();
}
Stmt& Stmt::bind(int i, int64_t v) {
  if (s_) s_->bindInt(i, v);
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  if (s_) s_->bindDouble(i, v);
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  if (s_) s_->bindText(i, v, true);
  return *this;
}
Stmt& Stmt::bindRef(int i, std::string_view v) {
  if (s_) s_->bindText(i, v, false);
  return *this;
}
Stmt& Stmt::bindBlob(int i, std::string_view v) {
  if (s_) s_->bindBlob(i, v, true);
  return *this;
}
Stmt& Stmt::bindBlobRef(int i, std::string_view v) {
  if (s_) s_->bindBlob(i, v, false);
  return *this;
}
Stmt& Stmt::bindNull(int i) {
  if (s_) s_->bindNull(i);
  return *this;
}
int Stmt::step() { return s_ ? s_->step() : kError; }
void Stmt::reset() {
  if (s_) s_->reset();
}
int64_t Stmt::i64(int c) const { return s_->i64(c); }
double Stmt::f64(int c) const { return s_->f64(c); }
bool Stmt::isNull(int c) const { return s_->isNull(c); }
std::string_view Stmt::view(int c) const { return s_->view(c); }
std::string Stmt::text(int c) const { return std::string(s_->view(c)); }

std::unique_ptr<Db> Db::open(const std::string& target, bool read_only, std::string* error) {
  return isPostgresUrl(target) ? openPostgres(target, read_only, error) : openSqlite(target, read_only, error);
}

StmtImpl* Db::cached(std::string_view sql) {
  auto it = cache_.find(sql);
  if (it != cache_.end()) return it->second.get();
  auto s = prepareKept(sql);
  if (!s || !s->ok()) return nullptr;
  return cache_.emplace(std::string(sql), std::move(s)).first->second.get();
}

Transaction::Transaction(Db& db) : db_(db), nested_(db.inTransaction()) {
  began_ = db_.exec(nested_ ? std::string_view("SAVEPOINT tx") : db_.beginSql());
}
Transaction::~Transaction() {
  if (!began_ || done_) return;
  if (nested_) {
    db_.exec("ROLLBACK TO SAVEPOINT tx");
    db_.exec("RELEASE SAVEPOINT tx");
  } else {
    db_.exec("ROLLBACK");
  }
}
bool Transaction::commit(std::string* error) {
  if (!began_ || done_) return false;
  done_ = db_.exec(nested_ ? "RELEASE SAVEPOINT tx" : "COMMIT", error);
  return done_;
}

}  // namespace faultline::aggregator::sql

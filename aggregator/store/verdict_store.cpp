// Verdicts and their revisions (verdict_store.h): table verdicts.
#include "aggregator/store/verdict_store.h"

#include <fmt/format.h>

#include "aggregator/store/db.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/store_internal.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

namespace {

constexpr const char* kVerdictColumns =
    "job_id, revision, created_ns, status, reason, max_symptom_id, symptoms, missing_nodes, diagnosis";
// The latest revisions still provisional, of this aggregator's own jobs (a relayed job's verdict is
// its site's to revise): the verdict tick's work list.
constexpr const char* kOpenVerdicts =
    "FROM verdicts v WHERE latest = 1 AND status = 'provisional' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE "
    "j.job_id = v.job_id AND j.site != '') ORDER BY job_id";

VerdictRow verdictFromRow(Stmt& s) {
  VerdictRow v;
  v.job_id = s.text(0);
  v.revision = static_cast<int>(s.i64(1));
  v.created_ns = s.i64(2);
  v.status = s.text(3);
  v.reason = s.text(4);
  v.max_symptom_id = s.i64(5);
  v.symptoms = static_cast<size_t>(s.i64(6));
  v.missing_nodes = parseJsonArray(s.text(7));
  std::string err;
  if (auto d = common::diagnosisFromJson(json::parse(s.text(8), nullptr, false), &err)) v.diagnosis = std::move(*d);
  return v;
}

}  // namespace

VerdictStore::ReadLock::ReadLock(VerdictStore& s) {
  if (s.core_.reader) {
    reader_ = std::unique_lock(s.core_.reader_mu);
    db_ = s.core_.reader.get();
  } else {
    ++s.core_.waiters;  // as Lock does: a group yields to it
    writer_ = std::unique_lock(s.core_.mu);
    --s.core_.waiters;
    db_ = s.db_;
  }
}

int VerdictStore::addVerdict(const VerdictRow& v, std::string* error) {
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return 0;
  }
  Stmt max(db_->get(), "SELECT COALESCE(MAX(revision), 0) FROM verdicts WHERE job_id = ?");
  max.bind(1, v.job_id);
  int revision = max.step() == sql::kRow ? static_cast<int>(max.i64(0)) + 1 : 1;
  Stmt old(db_->get(), "UPDATE verdicts SET latest = 0 WHERE job_id = ? AND latest = 1");
  old.bind(1, v.job_id).step();
  Stmt ins(db_->get(),
           "INSERT INTO verdicts(job_id, revision, created_ns, status, reason, sub_domain, max_symptom_id, symptoms, "
           "missing_nodes, diagnosis, latest) VALUES(?,?,?,?,?,?,?,?,?,?,1)");
  ins.bind(1, v.job_id).bind(2, int64_t(revision)).bind(3, v.created_ns).bind(4, v.status).bind(5, v.reason);
  ins.bind(6, common::subDomainName(v.diagnosis.sub_domain)).bind(7, v.max_symptom_id).bind(8, int64_t(v.symptoms));
  ins.bind(9, joinJsonArray(v.missing_nodes)).bind(10, common::toJson(v.diagnosis).dump());
  if (ins.step() != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return 0;
  }
  // Node history: which nodes this revision blames (only the first revision and changes matter
  // to an operator, but keeping each is cheap and shows how the verdict moved).
  for (const auto& r : v.diagnosis.responsible)
    insertNodeEvent(*db_, {r.node, v.created_ns, "blamed",
                           fmt::format("{} r{} {}{}", common::subDomainName(v.diagnosis.sub_domain), revision,
                                       v.diagnosis.cause ? v.diagnosis.cause->rule_id : "",
                                       r.device.empty() ? "" : " " + r.device),
                           v.job_id});
  if (!tx.commit(error)) return 0;
  return revision;
}

std::optional<VerdictRow> VerdictStore::latestVerdict(const std::string& job_id) {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db, fmt::format("SELECT {} FROM verdicts WHERE job_id = ? AND latest = 1", kVerdictColumns));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return verdictFromRow(s);
}

std::vector<VerdictRow> VerdictStore::verdictHistory(const std::string& job_id) {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db, fmt::format("SELECT {} FROM verdicts WHERE job_id = ? ORDER BY revision", kVerdictColumns));
  s.bind(1, job_id);
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

std::vector<VerdictRow> VerdictStore::openVerdicts() {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db, fmt::format("SELECT {} {}", kVerdictColumns, kOpenVerdicts));
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

namespace {
VerdictHead verdictHeadFromRow(Stmt& s) {
  return {s.text(0), static_cast<int>(s.i64(1)), s.i64(2), s.text(3), s.i64(4), static_cast<size_t>(s.i64(5)),
          s.isNull(6) ? std::string() : s.text(6)};
}
}  // namespace

std::optional<VerdictHead> VerdictStore::latestVerdictHead(const std::string& job_id) {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db, fmt::format("SELECT job_id, revision, created_ns, status, max_symptom_id, symptoms, {} FROM "
                         "verdicts WHERE job_id = ? AND latest = 1",
                         db->jsonText("diagnosis", "terminal_state")));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return verdictHeadFromRow(s);
}

std::vector<VerdictHead> VerdictStore::openVerdictHeads() {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db, fmt::format("SELECT job_id, revision, created_ns, status, max_symptom_id, symptoms, {} {}",
                         db->jsonText("diagnosis", "terminal_state"), kOpenVerdicts));
  std::vector<VerdictHead> out;
  while (s.step() == sql::kRow) out.push_back(verdictHeadFromRow(s));
  return out;
}

std::vector<VerdictRow> VerdictStore::latestVerdicts(int64_t since_ns, int64_t until_ns) {
  ReadLock lock(*this);
  sql::Db* db = lock.db();
  Stmt s(db,
         fmt::format("SELECT {} FROM verdicts v WHERE v.latest = 1 AND EXISTS (SELECT 1 FROM jobs j WHERE "
                     "j.job_id = v.job_id AND j.end_ns >= ?1 AND (?2 = 0 OR j.end_ns <= ?2)) ORDER BY v.job_id",
                     "v.job_id, v.revision, v.created_ns, v.status, v.reason, v.max_symptom_id, v.symptoms, "
                     "v.missing_nodes, v.diagnosis"));
  s.bind(1, since_ns).bind(2, until_ns);
  std::vector<VerdictRow> out;
  while (s.step() == sql::kRow) out.push_back(verdictFromRow(s));
  return out;
}

}  // namespace faultline::aggregator

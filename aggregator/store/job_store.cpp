// The jobs and their outputs (job_store.h): tables jobs, job_nodes, job_outputs.
#include "aggregator/store/job_store.h"

#include <fmt/format.h>

#include <algorithm>

#include "aggregator/store/db.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/symptom_codec.h"
#include "common/hostlist.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

namespace {

constexpr const char* kJobColumns =
    "job_id, state, terminal_state, exit_code, start_ns, end_ns, nodelist, time_limit_sec, ntasks_per_node, "
    "source, updated_ns, end_recorded_ns, site, name, user_name, partition_name";

JobRow jobFromRow(Stmt& s, sql::Db* db) {
  JobRow j;
  j.info.job_id = s.text(0);
  j.info.state = s.text(1);
  j.terminal_state = s.text(2);
  j.info.exit_code = s.text(3);
  j.info.start_ns = s.i64(4);
  j.info.end_ns = s.i64(5);
  j.nodelist = s.text(6);
  j.info.time_limit_sec = s.i64(7);
  j.info.ntasks_per_node = static_cast<int>(s.i64(8));
  j.source = s.text(9);
  j.updated_ns = s.i64(10);
  j.end_recorded_ns = s.i64(11);
  j.site = s.text(12);
  j.workload = {s.text(13), s.text(14), s.text(15)};
  Stmt n(db, "SELECT node FROM job_nodes WHERE job_id = ? ORDER BY position");
  n.bind(1, j.info.job_id);
  while (n.step() == sql::kRow) j.info.nodes.push_back(n.text(0));
  common::deriveRanks(j.info);
  return j;
}

}  // namespace

std::optional<JobRow> JobStore::jobLocked(const std::string& job_id) {
  Stmt s(db_->get(), fmt::format("SELECT {} FROM jobs WHERE job_id = ?", kJobColumns));
  s.bind(1, job_id);
  if (s.step() != sql::kRow) return std::nullopt;
  return jobFromRow(s, db_->get());
}

std::optional<JobRow> JobStore::job(const std::string& job_id) {
  Lock lock(*this);
  return jobLocked(job_id);
}

std::vector<std::string> JobStore::relayedJobIds(const std::string& local_id, size_t limit) {
  std::vector<std::string> out;
  if (!validJobId(local_id)) return out;  // no '%' or '_' beyond what an id may hold
  Lock lock(*this);
  // '_' is a LIKE wildcard and may be in an id: the suffix is compared exactly below.
  Stmt s(db_->get(), "SELECT job_id FROM jobs WHERE site <> '' AND job_id LIKE ? ORDER BY job_id LIMIT ?");
  s.bind(1, "%:" + local_id).bind(2, static_cast<int64_t>(limit) * 4);
  const std::string suffix = ":" + local_id;
  while (s.step() == sql::kRow && out.size() < limit) {
    std::string id = s.text(0);
    if (id.size() > suffix.size() && id.compare(id.size() - suffix.size(), suffix.size(), suffix) == 0)
      out.push_back(std::move(id));
  }
  return out;
}

namespace {

// The update's nodes (its list, else its hostlist expanded); nullopt + *error when the update is
// not one to store (a bad id, node list or time).
std::optional<std::vector<std::string>> checkedNodes(const JobUpdate& u, std::string* error) {
  if (!validJobId(u.job_id)) {
    *error = "bad job id '" + u.job_id + "'";
    return std::nullopt;
  }
  std::vector<std::string> nodes = u.nodes;
  if (nodes.empty() && !u.nodelist.empty()) {
    std::string err;
    auto hosts = common::expandHostlist(u.nodelist, &err, 100000);
    if (!hosts) {
      *error = "bad node list '" + u.nodelist + "': " + err;
      return std::nullopt;
    }
    nodes = *hosts;
  }
  if (u.start_ns < 0 || u.end_ns < 0) {
    *error = "negative time";
    return std::nullopt;
  }
  return nodes;
}

// The update merged into the stored row (fields left empty keep theirs); false + *error when the
// result ends before it starts.
bool mergeJobUpdate(JobRow& row, const JobUpdate& u, const std::vector<std::string>& nodes, int64_t now,
                    std::string* error) {
  row.info.job_id = u.job_id;
  // A late "start" (RUNNING) never reopens a job that has ended.
  if (!u.state.empty() && !(isActiveJobState(u.state) && row.ended())) {
    row.info.state = u.state;
    row.terminal_state = isActiveJobState(u.state) ? "" : common::terminalStateOf(u.state);
  }
  if (!u.exit_code.empty()) row.info.exit_code = u.exit_code;
  if (u.start_ns) row.info.start_ns = u.start_ns;
  if (u.end_ns) row.info.end_ns = u.end_ns;
  if (row.ended() && !row.info.end_ns) row.info.end_ns = now;
  if (row.ended() && !row.end_recorded_ns) row.end_recorded_ns = now;
  if (row.info.start_ns && row.info.end_ns && row.info.end_ns < row.info.start_ns) {
    *error = "job ends before it starts";
    return false;
  }
  if (u.time_limit_sec) row.info.time_limit_sec = u.time_limit_sec;
  if (u.ntasks_per_node) row.info.ntasks_per_node = u.ntasks_per_node;
  if (!nodes.empty()) {
    row.info.nodes = nodes;
    row.nodelist = u.nodelist.empty() ? fmt::format("{}", fmt::join(nodes, ",")) : u.nodelist;
  }
  for (auto [to, from] : {std::pair{&row.workload.name, &u.workload.name}, {&row.workload.user, &u.workload.user},
                          {&row.workload.partition, &u.workload.partition}})
    if (!from->empty()) *to = *from;
  row.source = u.source;
  row.updated_ns = now;
  return true;
}

bool writeJobRow(sql::Db& db, const JobRow& row) {
  Stmt s(db.get(),
         "INSERT INTO jobs(job_id, state, terminal_state, exit_code, start_ns, end_ns, nodelist, time_limit_sec, "
         "ntasks_per_node, source, updated_ns, end_recorded_ns, name, user_name, partition_name) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15) "
         "ON CONFLICT(job_id) DO UPDATE SET state=?2, terminal_state=?3, exit_code=?4, start_ns=?5, end_ns=?6, "
         "nodelist=?7, time_limit_sec=?8, ntasks_per_node=?9, source=?10, updated_ns=?11, end_recorded_ns=?12, "
         "name=?13, user_name=?14, partition_name=?15");
  s.bind(1, row.info.job_id).bind(2, row.info.state).bind(3, row.terminal_state).bind(4, row.info.exit_code);
  s.bind(5, row.info.start_ns).bind(6, row.info.end_ns).bind(7, row.nodelist).bind(8, row.info.time_limit_sec);
  s.bind(9, int64_t(row.info.ntasks_per_node)).bind(10, row.source).bind(11, row.updated_ns);
  s.bind(12, row.end_recorded_ns).bind(13, row.workload.name).bind(14, row.workload.user);
  s.bind(15, row.workload.partition);
  return s.step() == sql::kDone;
}

// The job's node list replaced, in order.
void writeJobNodes(sql::Db& db, const std::string& job_id, const std::vector<std::string>& nodes) {
  Stmt del(db.get(), "DELETE FROM job_nodes WHERE job_id = ?");
  del.bind(1, job_id).step();
  Stmt ins(db.get(), "INSERT INTO job_nodes(node, job_id, position) VALUES(?,?,?) ON CONFLICT DO NOTHING");
  for (size_t i = 0; i < nodes.size(); ++i) {
    ins.reset();
    ins.bind(1, nodes[i]).bind(2, job_id).bind(3, int64_t(i)).step();
  }
}

}  // namespace

std::optional<JobRow> JobStore::recordJob(const JobUpdate& u, std::string* error) {
  auto nodes = checkedNodes(u, error);
  if (!nodes) return std::nullopt;
  const int64_t now = clock_.nowNs();
  Lock lock(*this);
  sql::Transaction tx(*db_);
  if (!tx.began()) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  JobRow row;
  if (auto old = jobLocked(u.job_id)) row = std::move(*old);
  if (!mergeJobUpdate(row, u, *nodes, now, error)) return std::nullopt;
  if (!writeJobRow(*db_, row)) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  if (!nodes->empty()) writeJobNodes(*db_, u.job_id, *nodes);
  std::string err;
  if (!tx.commit(&err)) {
    *error = "store: " + err;
    return std::nullopt;
  }
  auto merged = jobLocked(u.job_id);
  if (merged) merged->end_recorded_ns = row.end_recorded_ns;
  return merged;
}

std::vector<JobRow> JobStore::jobs(const JobFilter& f) {
  Lock lock(*this);
  // Optional filters as "(?n = '' OR ...)": the SQL text never depends on the data.
  Stmt s(db_->get(),
         fmt::format(
             "SELECT {} FROM jobs j WHERE (?1 = 0 OR (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) >= ?1) "
             "AND (?2 = '' OR (?2 = 'running' AND j.terminal_state = '') OR (?2 = 'failed' AND j.terminal_state "
             "NOT IN ('', 'success')) OR j.terminal_state = ?2 OR j.state = ?2) "
             "AND (?3 = '' OR EXISTS (SELECT 1 FROM verdicts v WHERE v.job_id = j.job_id AND v.latest = 1 AND "
             "v.sub_domain = ?3)) "
             "AND (?4 = '' OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.node = ?4 AND n.job_id = j.job_id)) "
             "ORDER BY CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END DESC, j.job_id LIMIT ?5",
             kJobColumns));
  s.bind(1, f.since_ns).bind(2, f.state).bind(3, f.sub_domain).bind(4, f.node).bind(5, int64_t(f.limit));
  std::vector<JobRow> out;
  while (s.step() == sql::kRow) out.push_back(jobFromRow(s, db_->get()));
  return out;
}

std::vector<JobRow> JobStore::jobsAwaitingVerdict(size_t limit) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM jobs j WHERE j.terminal_state NOT IN ('', 'success') AND j.site = '' AND NOT "
                                 "EXISTS (SELECT 1 FROM verdicts v WHERE v.job_id = j.job_id) "
                                 "ORDER BY j.end_ns, j.job_id LIMIT ?",
                                 kJobColumns));
  s.bind(1, int64_t(limit));
  std::vector<JobRow> out;
  while (s.step() == sql::kRow) out.push_back(jobFromRow(s, db_->get()));
  return out;
}

std::vector<std::string> JobStore::jobsAt(const std::string& node, int64_t from_ns, int64_t to_ns, int64_t pre_ns,
                                       int64_t post_ns, const std::string& site) {
  Lock lock(*this);
  // Kept: a tick asks once per node with new symptoms (9,800 times in a 10,000-node cascade's
  // tick), and preparing the join was nine tenths of each call.
  Stmt s(*db_,
         "SELECT j.job_id FROM job_nodes n JOIN jobs j ON j.job_id = n.job_id WHERE n.node = ?1 "
         "AND (j.start_ns = 0 OR j.start_ns - ?4 <= ?3) AND (j.end_ns = 0 OR j.end_ns + ?5 >= ?2) "
         "AND (j.start_ns > 0 OR j.end_ns > 0) AND j.site = ?6 ORDER BY j.start_ns, j.job_id");
  s.bind(1, node).bind(2, from_ns).bind(3, to_ns).bind(4, pre_ns).bind(5, post_ns).bind(6, site);
  std::vector<std::string> out;
  while (s.step() == sql::kRow) out.push_back(s.text(0));
  return out;
}

std::vector<std::string> JobStore::jobsEndedOnNodeBetween(const std::string& node, int64_t from_ns, int64_t to_ns) {
  Lock lock(*this);
  Stmt s(*db_,
         "SELECT j.job_id FROM job_nodes n JOIN jobs j ON j.job_id = n.job_id WHERE n.node = ?1 AND j.site = '' "
         "AND (j.end_recorded_ns > 0 OR j.end_ns > 0) "
         "AND (CASE WHEN j.end_recorded_ns > 0 THEN j.end_recorded_ns ELSE j.end_ns END) BETWEEN ?2 AND ?3 "
         "ORDER BY j.job_id");
  s.bind(1, node).bind(2, from_ns).bind(3, to_ns);
  std::vector<std::string> out;
  while (s.step() == sql::kRow) out.push_back(s.text(0));
  return out;
}

// ---- job output ----

bool JobStore::putJobOutput(const JobOutput& o, std::string* error) {
  json cov = common::toJson(o.coverage);
  json symptoms = json::array();
  for (const auto& x : o.symptoms) symptoms.push_back(symptomToJson(x));
  Lock lock(*this);
  // A repeated upload replaces the row with a new one: its id only grows (the verdict engine's
  // watermark sees it).
  sql::Transaction tx(*db_);
  Stmt del(db_->get(), "DELETE FROM job_outputs WHERE job_id = ? AND source = ?");
  del.bind(1, o.job_id).bind(2, o.source);
  if (!tx.began() || del.step() != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return false;
  }
  Stmt s(db_->get(),
         "INSERT INTO job_outputs(job_id, source, received_ns, coverage, symptoms, unmatched) VALUES(?,?,?,?,?,?)");
  s.bind(1, o.job_id).bind(2, o.source).bind(3, o.received_ns ? o.received_ns : clock_.nowNs());
  s.bind(4, cov.dump(-1, ' ', false, json::error_handler_t::replace));
  s.bind(5, symptoms.dump(-1, ' ', false, json::error_handler_t::replace));
  s.bind(6, outputTemplatesToJson(o.unmatched).dump(-1, ' ', false, json::error_handler_t::replace));
  std::string err;
  if (s.step() != sql::kDone || !tx.commit(&err)) {
    *error = "store: " + (err.empty() ? db_->errmsg() : err);
    return false;
  }
  return true;
}

std::vector<JobOutput> JobStore::jobOutputs(const std::string& job_id) {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT source, received_ns, coverage, symptoms, unmatched FROM job_outputs WHERE job_id = ? ORDER BY source");
  s.bind(1, job_id);
  std::vector<JobOutput> out;
  while (s.step() == sql::kRow) {
    JobOutput o;
    o.job_id = job_id;
    o.source = s.text(0);
    o.received_ns = s.i64(1);
    json c = json::parse(s.text(2), nullptr, false);
    if (c.is_object()) o.coverage = common::coverageFromJson(c);
    json list = json::parse(s.text(3), nullptr, false);
    if (list.is_array())
      for (const auto& j : list)
        if (j.is_object()) o.symptoms.push_back(symptomFromJson(j));
    std::string why;
    if (auto t = outputTemplatesFromJson(json::parse(s.view(4), nullptr, false), &why)) o.unmatched = std::move(*t);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<std::string> JobStore::jobsWithOutputSince(int64_t after_id, int64_t* newest_id) {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT job_id, MAX(id) FROM job_outputs WHERE id > ? GROUP BY job_id");
  s.bind(1, after_id);
  std::vector<std::string> out;
  *newest_id = after_id;
  while (s.step() == sql::kRow) {
    out.push_back(s.text(0));
    *newest_id = std::max(*newest_id, s.i64(1));
  }
  return out;
}

}  // namespace faultline::aggregator

#include "aggregator/http/ui_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "aggregator/store/db.h"
#include "common/job.h"

namespace faultline::aggregator {

using nlohmann::json;

namespace {

constexpr int64_t kDayNs = 86400LL * 1'000'000'000;
constexpr size_t kMaxDays = 120;

// The optional filters as "(?n = '' OR ...)": the SQL text never depends on the data. The latest
// verdict's fields come from temp.ui_latest (see sync()), never from the verdicts table: its rows
// hold the whole diagnosis, and reading them for 100,000 jobs is what made a page slow. ?5 rule,
// ?6 its prefix ('' when exact), ?7 the LIKE pattern of the text search, ?8 a node the verdict blames.
constexpr const char* kJobWhere = R"sql(
FROM jobs j LEFT JOIN temp.ui_latest c ON c.job_id = j.job_id
WHERE (?1 = 0 OR (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) >= ?1)
AND (?2 = '' OR (?2 = 'running' AND j.terminal_state = '') OR (?2 = 'failed' AND j.terminal_state NOT IN ('', 'success'))
     OR j.terminal_state = ?2 OR j.state = ?2)
AND (?3 = '' OR c.sub_domain = ?3)
AND (?4 = '' OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.node = ?4 AND n.job_id = j.job_id))
AND (?5 = '' OR (CASE WHEN ?6 = '' THEN c.rule = ?5 ELSE substr(c.rule, 1, length(?6)) = ?6 END))
AND (?7 = '' OR j.job_id LIKE ?7 ESCAPE '\' OR j.nodelist LIKE ?7 ESCAPE '\' OR c.sub_domain LIKE ?7 ESCAPE '\'
     OR c.rule LIKE ?7 ESCAPE '\' OR c.summary LIKE ?7 ESCAPE '\'
     OR EXISTS (SELECT 1 FROM job_nodes n WHERE n.job_id = j.job_id AND n.node LIKE ?7 ESCAPE '\'))
AND (?8 = '' OR EXISTS (SELECT 1 FROM temp.ui_blamed b WHERE b.node = ?8 AND b.job_id = j.job_id))
)sql";

void bindJobFilter(sql::Stmt& s, const JobPageFilter& f) {
  std::string prefix;
  if (!f.rule.empty() && f.rule.back() == '*') prefix = f.rule.substr(0, f.rule.size() - 1);
  std::string like;
  if (!f.text.empty()) {
    like = "%";
    for (char c : f.text) {
      if (c == '%' || c == '_' || c == '\\') like += '\\';
      like += c;
    }
    like += "%";
  }
  s.bind(1, f.since_ns).bind(2, f.state).bind(3, f.sub_domain).bind(4, f.node).bind(5, f.rule).bind(6, prefix);
  s.bind(7, like).bind(8, f.blamed);
}

json timeOrNull(int64_t ns) { return ns ? json(common::formatTimeNs(ns)) : json(nullptr); }

json parsedOr(const std::string& text, json fallback) {
  json j = json::parse(text, nullptr, false);
  return j.is_discarded() ? fallback : j;
}

std::string dayOf(int64_t ns) { return common::formatTimeNs(ns).substr(0, 10); }

// The reader's SQL is written for SQLite; PostgreSQL keeps a connection's temp tables in pg_temp,
// has no INDEXED BY or WITHOUT ROWID, and its LIKE is case-sensitive (SQLite's is not, for ASCII).
std::string dialect(const sql::Db& db, std::string q) {
  if (!db.postgres()) return q;
  auto replace = [&](std::string_view from, std::string_view to) {
    for (size_t p = q.find(from); p != std::string::npos; p = q.find(from, p + to.size())) q.replace(p, from.size(), to);
  };
  replace("temp.", "pg_temp.");
  replace("CREATE INDEX pg_temp.ui_blamed_by_job ON ui_blamed", "CREATE INDEX ui_blamed_by_job ON pg_temp.ui_blamed");
  replace(" WITHOUT ROWID", "");
  replace("INDEXED BY verdicts_latest ", "");
  replace(" LIKE ", " ILIKE ");
  return q;
}

}  // namespace

UiReader::UiReader(std::unique_ptr<sql::Db> db, size_t scan_above) : db_(std::move(db)), scan_above_(scan_above) {}
UiReader::~UiReader() = default;

std::unique_ptr<UiReader> UiReader::open(const std::string& path, std::string* error, size_t scan_above) {
  // PostgreSQL: a read-only session could not create its temp tables; nothing but them is written.
  auto db = sql::Db::open(path, !sql::isPostgresUrl(path), error);
  if (!db) return nullptr;
  // The cache lives in this connection's own temp schema, in memory: the store's file is never
  // written through it.
  if ((!db->postgres() && !db->exec("PRAGMA busy_timeout = 2000; PRAGMA temp_store = MEMORY", error)) ||
      !db->exec(dialect(*db, "CREATE TEMP TABLE ui_latest(job_id TEXT PRIMARY KEY, revision INTEGER NOT NULL, "
                             "sub_domain TEXT NOT NULL, rule TEXT, summary TEXT, responsible TEXT NOT NULL) WITHOUT "
                             "ROWID; CREATE TEMP TABLE ui_blamed(node TEXT NOT NULL, job_id TEXT NOT NULL, PRIMARY "
                             "KEY(node, job_id)) WITHOUT ROWID; CREATE INDEX temp.ui_blamed_by_job ON ui_blamed(job_id)"),
                error))
    return nullptr;
  return std::unique_ptr<UiReader>(new UiReader(std::move(db), scan_above));
}

// The statements a sync writes the dashboard's temp tables with (temp.ui_latest: one row per
// job's latest revision; temp.ui_blamed: the nodes it blames).
struct UiReader::CacheWriter {
  sql::Stmt put, drop, unblame, blame;
  explicit CacheWriter(sql::Db& db)
      : put(db.get(), dialect(db, "INSERT INTO temp.ui_latest VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(job_id) "
                                  "DO UPDATE SET revision = ?2, sub_domain = ?3, rule = ?4, summary = ?5, "
                                  "responsible = ?6")),
        drop(db.get(), dialect(db, "DELETE FROM temp.ui_latest WHERE job_id = ?1")),
        unblame(db.get(), dialect(db, "DELETE FROM temp.ui_blamed WHERE job_id = ?1")),
        blame(db.get(), dialect(db, "INSERT INTO temp.ui_blamed VALUES(?1, ?2) ON CONFLICT DO NOTHING")) {}
};

// SQLite: whether nothing was committed to the store since the last sync (by any connection);
// PostgreSQL has no such counter: never. nullopt + *error when it cannot be read.
std::optional<bool> UiReader::unchangedSinceSync(std::string* error) {
  if (db_->postgres()) return false;
  sql::Stmt version(db_->get(), "PRAGMA data_version");
  if (version.step() != sql::kRow) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  if (data_version_ && version.i64(0) == *data_version_) return true;
  data_version_ = version.i64(0);
  return false;
}

// Jobs cached that have no latest revision any more (pruned) leave the temp tables.
void UiReader::dropGone(const std::unordered_map<std::string, int64_t>& latest, CacheWriter& w) {
  for (auto it = cached_.begin(); it != cached_.end();) {
    if (latest.count(it->first)) {
      ++it;
      continue;
    }
    w.drop.reset();
    w.drop.bind(1, it->first);
    w.drop.step();
    w.unblame.reset();
    w.unblame.bind(1, it->first);
    w.unblame.step();
    it = cached_.erase(it);
  }
}

// Stores one revision's fields (sub_domain, cause rule, cause summary, responsible nodes: the
// columns of `row`, in that order) and the nodes it blames.
bool UiReader::cacheRevision(const std::string& job, int64_t revision, sql::Stmt& row, CacheWriter& w,
                             std::string* error) {
  w.put.reset();
  w.put.bind(1, job).bind(2, revision).bind(3, row.text(0));
  if (row.isNull(1)) w.put.bindNull(4);
  else w.put.bind(4, row.text(1));
  if (row.isNull(2)) w.put.bindNull(5);
  else w.put.bind(5, row.text(2));
  // The blamed nodes' names (json_extract shares one parse of the diagnosis).
  json names = json::array();
  for (const auto& r : parsedOr(row.text(3), json::array()))
    if (r.is_object() && r.contains("node") && r["node"].is_string()) names.push_back(r["node"]);
  w.put.bind(6, names.dump());
  bool ok = w.put.step() == sql::kDone;
  w.unblame.reset();
  w.unblame.bind(1, job);
  ok = ok && w.unblame.step() == sql::kDone;
  for (const auto& node : names) {
    w.blame.reset();
    w.blame.bind(1, node.get<std::string>()).bind(2, job);
    ok = ok && w.blame.step() == sql::kDone;
  }
  if (!ok) *error = "ui cache: " + db_->errmsg();
  else cached_[job] = revision;
  return ok;
}

// The latest revision of every job, from the verdicts_latest index alone (its entries carry the
// key: job_id, revision), compared with the cache; only new or changed revisions are read and
// their diagnosis parsed once. One snapshot of the store for the sync and the query after it.
bool UiReader::sync(std::string* error) {
  auto unchanged = unchangedSinceSync(error);
  if (!unchanged) return false;
  if (*unchanged) return true;
  std::unordered_map<std::string, int64_t> latest;
  {
    sql::Stmt s(db_->get(), dialect(*db_, "SELECT job_id, revision FROM verdicts INDEXED BY verdicts_latest WHERE latest = 1"));
    int rc;
    while ((rc = s.step()) == sql::kRow) latest[s.text(0)] = s.i64(1);
    if (rc != sql::kDone) {
      *error = "store: " + db_->errmsg();
      return false;
    }
  }
  CacheWriter w(*db_);
  dropGone(latest, w);
  std::vector<std::pair<std::string, int64_t>> missing;
  for (const auto& [job, revision] : latest) {
    auto c = cached_.find(job);
    if (c == cached_.end() || c->second != revision) missing.emplace_back(job, revision);
  }
  const std::string kFields = fmt::format("sub_domain, {}, {}, {}", db_->jsonText("diagnosis", "cause.rule_id"),
                                          db_->jsonText("diagnosis", "cause.summary"),
                                          db_->jsonText("diagnosis", "responsible_nodes"));
  if (missing.size() > scan_above_) {
    // Many (the first read after a start): one pass over the table beats a lookup per job.
    sql::Stmt scan(db_->get(), std::string("SELECT ") + kFields + ", job_id, revision FROM verdicts");
    int rc;
    while ((rc = scan.step()) == sql::kRow) {
      auto it = latest.find(scan.text(4));
      if (it == latest.end() || it->second != scan.i64(5)) continue;  // not the latest revision
      auto c = cached_.find(it->first);
      if (c != cached_.end() && c->second == it->second) continue;
      if (!cacheRevision(it->first, it->second, scan, w, error)) return false;
    }
    if (rc != sql::kDone) {
      *error = "store: " + db_->errmsg();
      return false;
    }
    return true;
  }
  sql::Stmt read(db_->get(), std::string("SELECT ") + kFields + " FROM verdicts WHERE job_id = ?1 AND revision = ?2");
  for (const auto& [job, revision] : missing) {
    read.reset();
    read.bind(1, job).bind(2, revision);
    if (read.step() != sql::kRow) continue;  // pruned meanwhile
    if (!cacheRevision(job, revision, read, w, error)) return false;
  }
  return true;
}

// Every read: one transaction, so the sync and the query see the same snapshot of the store.
template <typename F>
auto UiReader::withSnapshot(std::string* error, F&& read) -> decltype(read()) {
  if (!db_->exec(db_->postgres() ? "BEGIN ISOLATION LEVEL REPEATABLE READ" : "BEGIN", error)) return std::nullopt;
  decltype(read()) out = std::nullopt;
  if (sync(error)) out = read();
  std::string ignore;
  db_->exec(out ? "COMMIT" : "ROLLBACK", &ignore);
  if (!out) {  // the cache's writes were rolled back with the rest: start it over next time
    cached_.clear();
    data_version_.reset();
    db_->exec(dialect(*db_, "DELETE FROM temp.ui_latest; DELETE FROM temp.ui_blamed"), &ignore);
  }
  return out;
}

std::optional<json> UiReader::jobs(const JobPageFilter& f, int64_t* total, std::string* error) {
  return withSnapshot(error, [&]() -> std::optional<json> { return jobsLocked(f, total, error); });
}

std::optional<json> UiReader::jobsLocked(const JobPageFilter& f, int64_t* total, std::string* error) {
  {
    sql::Stmt c(db_->get(), dialect(*db_, std::string("SELECT count(*) ") + kJobWhere));
    bindJobFilter(c, f);
    if (!c.ok() || c.step() != sql::kRow) {
      *error = "store: " + db_->errmsg();
      return std::nullopt;
    }
    *total = c.i64(0);
  }
  // The page's ids first (cheap columns only), then the details of those rows alone: the JSON
  // of a diagnosis is parsed only for the rows shown.
  sql::Stmt s(db_->get(), dialect(*db_, fmt::format(R"sql(
WITH page AS MATERIALIZED (
  SELECT j.job_id AS id, (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) AS t, c.revision AS rev {}
  ORDER BY t DESC, j.job_id LIMIT ?9 OFFSET ?10)
SELECT j.job_id, j.state, j.terminal_state, j.exit_code, j.start_ns, j.end_ns, j.nodelist, j.source, j.site,
  (SELECT count(*) FROM job_nodes n WHERE n.job_id = j.job_id),
  v.revision, v.status, v.reason, v.created_ns, v.sub_domain, v.missing_nodes, v.symptoms,
  {}, {}, {}, {}
FROM page p JOIN jobs j ON j.job_id = p.id LEFT JOIN verdicts v ON v.job_id = p.id AND v.revision = p.rev
ORDER BY p.t DESC, j.job_id)sql",
                                                    kJobWhere, db_->jsonText("v.diagnosis", "systemic"),
                                                    db_->jsonText("v.diagnosis", "cause.rule_id"),
                                                    db_->jsonText("v.diagnosis", "cause.summary"),
                                                    db_->jsonText("v.diagnosis", "responsible_nodes"))));
  bindJobFilter(s, f);
  s.bind(9, int64_t(f.limit)).bind(10, int64_t(f.offset));
  if (!s.ok()) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  json out = json::array();
  int rc;
  while ((rc = s.step()) == sql::kRow) {
    json row{{"job_id", s.text(0)},
             {"state", s.text(1)},
             {"terminal_state", s.text(2).empty() ? json(nullptr) : json(s.text(2))},
             {"exit_code", s.text(3)},
             {"start", timeOrNull(s.i64(4))},
             {"end", timeOrNull(s.i64(5))},
             {"nodelist", s.text(6)},
             {"node_count", s.i64(9)},
             {"source", s.text(7)}};
    if (!s.text(8).empty()) row["site"] = s.text(8);
    if (s.isNull(10)) {
      row["verdict"] = nullptr;
    } else {
      json responsible = parsedOr(s.text(20), json::array());
      json names = json::array();
      for (const auto& r : responsible) names.push_back(r.value("node", ""));
      row["verdict"] = {{"revision", s.i64(10)},
                        {"status", s.text(11)},
                        {"reason", s.text(12)},
                        {"created", timeOrNull(s.i64(13))},
                        {"sub_domain", s.text(14)},
                        {"systemic", s.i64(17) != 0},
                        {"cause", s.isNull(18) ? json(nullptr) : json(s.text(18))},
                        {"responsible_nodes", names},
                        {"missing_nodes", parsedOr(s.text(15), json::array())},
                        {"symptoms", s.i64(16)},
                        {"responsible", responsible},
                        {"summary", s.isNull(19) ? json(nullptr) : json(s.text(19))}};
    }
    out.push_back(std::move(row));
  }
  if (rc != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  return out;
}

std::optional<json> UiReader::daily(int64_t since_ns, int64_t now_ns, size_t max_nodes, std::string* error) {
  return withSnapshot(error, [&]() -> std::optional<json> { return dailyLocked(since_ns, now_ns, max_nodes, error); });
}

std::optional<json> UiReader::dailyLocked(int64_t since_ns, int64_t now_ns, size_t max_nodes, std::string* error) {
  // (end, sub_domain) per failed job and (end, node) per node its verdict blames.
  std::vector<std::pair<int64_t, std::string>> jobs, blamed;
  auto read = [&](const std::string& what, const std::string& join, auto* out) {
    sql::Stmt s(db_->get(), dialect(*db_, "SELECT j.end_ns, " + what + " FROM jobs j JOIN temp.ui_latest c ON c.job_id = "
                                              "j.job_id" + join + " WHERE j.end_ns >= ?1 AND j.end_ns <= ?2 AND "
                                              "j.terminal_state NOT IN ('', 'success')"));
    s.bind(1, since_ns).bind(2, now_ns);
    int rc;
    while ((rc = s.step()) == sql::kRow)
      if (!s.isNull(1)) out->emplace_back(s.i64(0), s.text(1));
    if (rc == sql::kDone) return true;
    *error = "store: " + db_->errmsg();
    return false;
  };
  if (!read("c.sub_domain", "", &jobs) || !read("r.value", " JOIN " + db_->jsonStrings("c.responsible", "r") + " ON true", &blamed))
    return std::nullopt;
  // Days from the first failure in the window to the last, at most kMaxDays (the newest).
  int64_t lo = 0, hi = -1;
  if (!jobs.empty()) {
    lo = hi = jobs.front().first / kDayNs;
    for (const auto& [t, _] : jobs) lo = std::min(lo, t / kDayNs), hi = std::max(hi, t / kDayNs);
    lo = std::max(lo, hi - int64_t(kMaxDays) + 1);
  }
  std::vector<std::string> days;
  for (int64_t d = lo; d <= hi; ++d) days.push_back(dayOf(d * kDayNs));
  auto count = [&](const std::vector<std::pair<int64_t, std::string>>& rows) {
    std::map<std::string, std::vector<int64_t>> out;
    for (const auto& [t, key] : rows) {
      int64_t d = t / kDayNs;
      if (d < lo || d > hi) continue;
      auto& v = out[key];
      v.resize(days.size());
      ++v[size_t(d - lo)];
    }
    return out;
  };
  auto by_sd = count(jobs);
  auto by_node = count(blamed);
  auto sum = [](const std::vector<int64_t>& v) {
    int64_t n = 0;
    for (auto x : v) n += x;
    return n;
  };
  std::vector<std::pair<int64_t, std::string>> ranked;
  for (const auto& [node, v] : by_node) ranked.emplace_back(-sum(v), node);
  std::sort(ranked.begin(), ranked.end());
  json nodes = json::array();
  for (size_t i = 0; i < ranked.size() && i < max_nodes; ++i)
    nodes.push_back({{"node", ranked[i].second}, {"failures", -ranked[i].first}, {"days", by_node[ranked[i].second]}});
  json sds = json::array();
  for (const auto& [sd, v] : by_sd) sds.push_back({{"sub_domain", sd}, {"failures", sum(v)}, {"days", v}});
  return json{{"since", common::formatTimeNs(since_ns)},
              {"until", common::formatTimeNs(now_ns)},
              {"days", days},
              {"nodes", nodes},
              {"nodes_total", by_node.size()},
              {"sub_domains", sds}};
}

std::optional<json> UiReader::jobNodes(int64_t since_ns, std::string* error) {
  sql::Stmt s(db_->get(),
              "SELECT n.node, j.job_id, (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) AS t "
              "FROM job_nodes n JOIN jobs j ON j.job_id = n.job_id "
              "WHERE (CASE WHEN j.end_ns > 0 THEN j.end_ns ELSE j.start_ns END) >= ?1 ORDER BY t DESC, j.job_id");
  s.bind(1, since_ns);
  std::map<std::string, json> nodes;
  int rc;
  while ((rc = s.step()) == sql::kRow) {
    auto [it, fresh] = nodes.try_emplace(s.text(0));
    if (fresh)
      it->second = {{"node", s.text(0)}, {"jobs", 0}, {"last_job_id", s.text(1)}, {"last_job_time", timeOrNull(s.i64(2))}};
    it->second["jobs"] = it->second["jobs"].get<int64_t>() + 1;
  }
  if (rc != sql::kDone) {
    *error = "store: " + db_->errmsg();
    return std::nullopt;
  }
  json out{{"since", common::formatTimeNs(since_ns)}, {"nodes", json::array()}};
  for (auto& [_, n] : nodes) out["nodes"].push_back(std::move(n));
  return out;
}

}  // namespace faultline::aggregator

// The unmatched-template table and the workload baselines (template_store.h).
#include "aggregator/store/template_store.h"

#include <fmt/format.h>

#include "aggregator/store/db.h"
#include "aggregator/store/job_store.h"
#include "aggregator/store/store_internal.h"
#include "aggregator/store/symptom_codec.h"
#include "aggregator/store/symptom_store.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

json outputTemplatesToJson(const std::vector<common::TemplateSighting>& templates) {
  json out = json::array();
  for (const auto& t : templates) {
    json nodes = json::object();
    for (const auto& [node, count] : t.nodes) nodes[node] = count;
    json j{{"template", t.text},       {"count", t.count}, {"nodes", nodes}, {"first_line", t.first_line},
           {"first_node", t.first_node}, {"early", t.early},
           {"kind", common::sourceKindName(t.kinds.empty() ? common::SourceKind::kApplication : *t.kinds.begin())}};
    if (t.time_known) j["first_ns"] = t.first_ns;
    out.push_back(std::move(j));
  }
  return out;
}

std::optional<std::vector<common::TemplateSighting>> outputTemplatesFromJson(const json& j, std::string* error) {
  std::vector<common::TemplateSighting> out;
  if (!j.is_array() || j.size() > kMaxOutputTemplates) {
    *error = fmt::format("unmatched must be an array of at most {} templates", kMaxOutputTemplates);
    return std::nullopt;
  }
  auto text = [](const json& v, size_t max) {
    return v.is_string() && v.get_ref<const std::string&>().size() <= max &&
           v.get_ref<const std::string&>().find('\0') == std::string::npos;
  };
  size_t i = 0;
  for (const auto& e : j) {
    auto bad = [&](const char* why) {
      *error = fmt::format("unmatched template {}: {}", i, why);
      return std::nullopt;
    };
    if (!e.is_object()) return bad("not an object");
    common::TemplateSighting t;
    if (!e.contains("template") || !text(e["template"], 64 << 10)) return bad("template must be a string");
    t.text = e["template"].get<std::string>();
    if (!e.contains("count") || !e["count"].is_number_unsigned() || e["count"].get<uint64_t>() == 0)
      return bad("count must be a positive integer");
    t.count = e["count"].get<uint64_t>();
    for (const char* key : {"first_line", "first_node"})
      if (e.contains(key) && !text(e[key], 64 << 10)) return bad("first_line and first_node must be strings");
    t.first_line = e.value("first_line", "");
    t.first_node = e.value("first_node", "");
    if (!e.contains("nodes") || !e["nodes"].is_object() || e["nodes"].size() > 100000)
      return bad("nodes must be an object of node: lines");
    for (const auto& [node, lines] : e["nodes"].items()) {
      if (node.size() > 255 || node.find('\0') != std::string::npos || !lines.is_number_unsigned())
        return bad("nodes must be an object of node: lines");
      t.nodes[node] = lines.get<uint64_t>();
    }
    if (e.contains("first_ns")) {
      if (!e["first_ns"].is_number_integer() || e["first_ns"].get<int64_t>() < 0)
        return bad("first_ns must be a non-negative integer");
      t.time_known = true;
      t.first_ns = e["first_ns"].get<int64_t>();
    }
    if (e.contains("early") && !e["early"].is_boolean()) return bad("early must be true or false");
    t.early = e.value("early", false);
    const auto kind = e.contains("kind") && e["kind"].is_string() ? parseSourceKind(e["kind"].get<std::string>())
                                                                    : std::optional<common::SourceKind>();
    if (!kind) return bad("kind must be kernel, journal, fabricmanager or application");
    t.kinds.insert(*kind);
    out.push_back(std::move(t));
    ++i;
  }
  return out;
}

bool insertUnmatchedTemplates(sql::Db& db, const std::vector<const common::SymptomBatchData*>& batches,
                              int64_t received_ns) {
  bool any = false;
  for (const auto* b : batches) any = any || !b->unmatched.empty();
  if (!any) return true;
  // Few rows a batch (an agent ships 32 at most by default): one kept statement, row by row.
  Stmt ins(db,
           "INSERT INTO unmatched_templates(node, seen_ns, time_known, received_ns, source_kind, count, template, "
           "first_line) VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
  for (const auto* b : batches)
    for (const auto& t : b->unmatched) {
      ins.reset();
      ins.bindRef(1, b->header.hostname).bind(2, t.first_ns).bind(3, int64_t(t.time_known)).bind(4, received_ns);
      ins.bindRef(5, common::sourceKindName(t.kind)).bind(6, static_cast<int64_t>(t.count)).bindRef(7, t.text);
      ins.bindRef(8, t.first_line);
      if (ins.step() != sql::kDone) return false;
    }
  return true;
}

std::vector<UnmatchedSighting> SymptomStore::unmatchedForWindow(const std::vector<std::string>& nodes, int64_t from_ns,
                                                         int64_t to_ns, size_t limit) {
  Lock lock(*this);
  // One row per (node, template, kind, timed or not): the lines summed, the earliest row's line
  // and time. Window functions: both engines have them, and "the line of the earliest row" has
  // no aggregate that both spell alike.
  Stmt s(db_->get(),
         fmt::format("SELECT node, template, source_kind, time_known, total, seen_ns, first_line, latest FROM ("
                     "SELECT node, template, source_kind, time_known, seen_ns, first_line, "
                     "SUM(count) OVER (PARTITION BY node, template, source_kind, time_known) AS total, "
                     "MAX(seen_ns) OVER (PARTITION BY node, template, source_kind, time_known) AS latest, "
                     "ROW_NUMBER() OVER (PARTITION BY node, template, source_kind, time_known "
                     "ORDER BY seen_ns, id) AS rn "
                     "FROM unmatched_templates WHERE node IN {} AND seen_ns >= ?2 AND seen_ns <= ?3) w "
                     "WHERE rn = 1 ORDER BY node, seen_ns, template, source_kind, time_known LIMIT ?4",
                     db_->jsonList(1)));
  s.bind(1, json(nodes).dump()).bind(2, from_ns).bind(3, to_ns).bind(4, static_cast<int64_t>(limit));
  std::vector<UnmatchedSighting> out;
  while (s.step() == sql::kRow) {
    UnmatchedSighting u;
    u.node = s.text(0);
    u.t.text = s.text(1);
    u.t.kind = parseSourceKind(s.view(2)).value_or(common::SourceKind::kApplication);
    u.t.time_known = s.i64(3) != 0;
    u.t.count = static_cast<uint64_t>(s.i64(4));
    u.t.first_ns = s.i64(5);
    u.t.first_line = s.text(6);
    u.last_ns = s.i64(7);
    out.push_back(std::move(u));
  }
  return out;
}

std::vector<SymptomStore::NewSymptomSpan> SymptomStore::templatesSince(int64_t after_id) {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT node, MIN(seen_ns), MAX(seen_ns), MAX(id), MIN(time_known) FROM unmatched_templates WHERE id > ? "
         "GROUP BY node ORDER BY node");
  s.bind(1, after_id);
  std::vector<NewSymptomSpan> out;
  while (s.step() == sql::kRow) out.push_back({s.text(0), s.i64(1), s.i64(2), s.i64(3), s.i64(4) == 0});
  return out;
}

std::vector<JobRow> JobStore::workloadBaselines(const JobRow& job, int64_t since_ns, size_t limit) {
  std::vector<JobRow> out;
  if (job.workload.empty()) return out;
  Lock lock(*this);
  // Successful runs of the same workload that ended before this job did, newest first, whose
  // every node had an agent by then (a node no agent watched printed nothing the baseline knows).
  Stmt s(db_->get(),
         "SELECT j.job_id FROM jobs j WHERE j.name = ?1 AND j.user_name = ?2 AND j.partition_name = ?3 "
         "AND j.site = ?4 AND j.terminal_state = 'success' AND j.end_ns >= ?5 AND j.end_ns <= ?6 AND j.job_id != ?7 "
         "AND NOT EXISTS (SELECT 1 FROM job_nodes n LEFT JOIN nodes h ON h.hostname = n.node "
         "WHERE n.job_id = j.job_id AND (h.hostname IS NULL OR h.first_seen_ns > j.end_ns)) "
         "ORDER BY j.end_ns DESC, j.job_id DESC LIMIT ?8");
  s.bind(1, job.workload.name).bind(2, job.workload.user).bind(3, job.workload.partition).bind(4, job.site);
  s.bind(5, since_ns).bind(6, job.info.end_ns).bind(7, job.info.job_id).bind(8, static_cast<int64_t>(limit));
  std::vector<std::string> ids;
  while (s.step() == sql::kRow) ids.push_back(s.text(0));
  for (const auto& id : ids)
    if (auto row = jobLocked(id)) out.push_back(std::move(*row));
  return out;
}

}  // namespace faultline::aggregator

#include "aggregator/query/render.h"

#include <fmt/format.h>

#include <algorithm>

namespace faultline::aggregator {

using nlohmann::json;

namespace {

std::string str(const json& j, const char* key, const char* fallback = "-") {
  if (!j.is_object() || !j.contains(key) || j[key].is_null()) return fallback;
  const json& v = j[key];
  if (v.is_string()) return v.get<std::string>().empty() ? fallback : v.get<std::string>();
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_number_float()) return fmt::format("{:.2f}", v.get<double>());
  return v.dump();
}

// Columns sized to their widest cell; the last column is left unpadded.
std::string table(const std::vector<std::string>& head, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t i = 0; i < head.size(); ++i) w[i] = head[i].size();
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size() && i < w.size(); ++i) w[i] = std::max(w[i], r[i].size());
  std::string out;
  auto line = [&](const std::vector<std::string>& r) {
    std::string l;
    for (size_t i = 0; i < r.size(); ++i) l += i + 1 == r.size() ? r[i] : fmt::format("{:<{}}  ", r[i], w[i]);
    while (!l.empty() && l.back() == ' ') l.pop_back();
    out += l + "\n";
  };
  line(head);
  for (const auto& r : rows) line(r);
  return out;
}

std::string joinStrings(const json& a, size_t max = 6) {
  std::string out;
  size_t n = 0;
  for (const auto& e : a) {
    if (n == max) {
      out += fmt::format(" +{}", a.size() - max);
      break;
    }
    out += (n++ ? "," : "") + (e.is_string() ? e.get<std::string>() : e.dump());
  }
  return out.empty() ? "-" : out;
}

}  // namespace

std::string renderJobs(const json& jobs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& j : jobs) {
    const json& v = j.contains("verdict") ? j["verdict"] : json(nullptr);
    // A running job has no end yet (the store sorts it by its start): say so instead.
    const bool running = !j.contains("terminal_state") || j["terminal_state"].is_null();
    rows.push_back({str(j, "job_id"), str(j, "state"), running ? "running" : str(j, "end"), str(j, "nodelist"),
                    v.is_null() ? "-" : str(v, "sub_domain"), v.is_null() ? "-" : str(v, "cause"),
                    v.is_null() ? "-" : joinStrings(v["responsible_nodes"], 3),
                    v.is_null() ? "-" : fmt::format("r{} {}", v.value("revision", 0), str(v, "status"))});
  }
  if (rows.empty()) return "no jobs\n";
  return table({"JOB", "STATE", "END", "NODES", "SUB_DOMAIN", "CAUSE", "RESPONSIBLE", "VERDICT"}, rows);
}

std::string renderJobHistory(const json& job) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& v : job["revisions"])
    rows.push_back({fmt::format("r{}", v.value("revision", 0)), str(v, "created"), str(v, "status"), str(v, "reason"),
                    str(v, "sub_domain"), str(v, "cause"), joinStrings(v["responsible_nodes"], 3),
                    std::to_string(v.value("symptoms", 0))});
  if (rows.empty()) return "no verdict yet\n";
  return table({"REV", "CREATED", "STATUS", "REASON", "SUB_DOMAIN", "CAUSE", "RESPONSIBLE", "SYMPTOMS"}, rows);
}

std::string renderNodes(const json& nodes) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& n : nodes) {
    std::string sources;
    for (const auto& s : n["sources"])
      sources += (sources.empty() ? "" : ",") + s.value("source", "") + (s.value("status", "ok") == "ok" ? "" : "!" + s.value("status", ""));
    rows.push_back({str(n, "hostname"), n.value("live", false) ? "live" : "SILENT", str(n, "last_heartbeat"),
                    str(n, "reported_until"), std::to_string(n.value("symptoms", 0)), sources.empty() ? "-" : sources});
  }
  if (rows.empty()) return "no nodes\n";
  return table({"NODE", "AGENT", "LAST_HEARTBEAT", "REPORTED_UNTIL", "SYMPTOMS", "SOURCES"}, rows);
}

std::string renderNode(const json& n) {
  std::string out = fmt::format("node {}: agent {}, {}, last heartbeat {}, reported until {}\n", str(n, "hostname"),
                                str(n, "agent_id"), n.value("live", false) ? "live" : "not live",
                                str(n, "last_heartbeat"), str(n, "reported_until"));
  if (n.contains("suspicion") && !n["suspicion"].is_null()) {
    const auto& s = n["suspicion"];
    out += fmt::format("suspicion: rank {} of {}, blamed in {} job(s): {}\n", s.value("rank", 0), s.value("of", 0),
                       s.value("jobs", 0), joinStrings(s["job_ids"], 10));
  } else {
    out += "suspicion: not blamed for any job in the window\n";
  }
  for (const auto& d : n.value("devices", json::array()))
    out += fmt::format("  device {}: {} job(s): {}\n", str(d, "device"), d.value("jobs", 0), joinStrings(d["job_ids"], 10));
  if (n.contains("sources") && !n["sources"].empty()) {
    out += "sources:\n";
    for (const auto& s : n["sources"])
      out += fmt::format("  {:<24} {:<8} records {} skipped {}{}\n", str(s, "source"), str(s, "status"),
                         s.value("records", 0), s.value("skipped", 0),
                         s.value("reason", "").empty() ? "" : "  (" + s.value("reason", "") + ")");
  }
  out += "jobs:\n" + renderJobs(n.value("jobs", json::array()));
  out += "history:\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : n.value("history", json::array()))
    rows.push_back({str(e, "time"), str(e, "kind"), str(e, "job_id"), str(e, "detail")});
  out += rows.empty() ? "no events\n" : table({"TIME", "EVENT", "JOB", "DETAIL"}, rows);
  return out;
}

std::string renderSymptoms(const json& symptoms) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& s : symptoms)
    rows.push_back({str(s, "last", str(s, "received").c_str()), str(s, "node"), str(s, "device"), str(s, "rule_id"),
                    std::to_string(s.value("count", 1)), joinStrings(s["jobs"], 3), str(s, "summary")});
  if (rows.empty()) return "no symptoms\n";
  return table({"TIME", "NODE", "DEVICE", "RULE", "COUNT", "JOBS", "SUMMARY"}, rows);
}

std::string renderAgents(const json& agents) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : agents) {
    std::string sources;
    for (const auto& s : a["sources"])
      sources += (sources.empty() ? "" : ",") + s.value("source", "") + ":" + s.value("status", "");
    rows.push_back({str(a, "hostname"), str(a, "agent_id"), a.value("live", false) ? "live" : "SILENT",
                    str(a, "last_heartbeat"), str(a, "last_batch"), str(a, "agent_version"), str(a, "ruleset_version"),
                    std::to_string(a.value("spool_batches", 0)), std::to_string(a.value("dropped_symptoms", 0)),
                    sources.empty() ? "-" : sources});
  }
  if (rows.empty()) return "no agents\n";
  return table({"HOST", "AGENT", "STATE", "LAST_HEARTBEAT", "LAST_BATCH", "VERSION", "RULESET", "SPOOLED", "DROPPED",
                "SOURCES"},
               rows);
}

std::string renderRefusals(const json& r) {
  const auto& list = r.contains("refusals") ? r["refusals"] : json::array();
  if (list.empty()) return "no refused connections since the aggregator started\n";
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> reasons;
  std::string hints;
  for (const auto& e : list) {
    std::string who = str(e, "host");
    if (str(e, "key") != "-") who = "key " + str(e, "key");
    rows.push_back({str(e, "last"), str(e, "peer"), str(e, "reason"), who, std::to_string(e.value("count", 0)),
                    str(e, "detail")});
    std::string reason = str(e, "reason");
    if (std::find(reasons.begin(), reasons.end(), reason) != reasons.end() || str(e, "hint") == "-") continue;
    reasons.push_back(reason);
    hints += fmt::format("  {}: {}\n", reason, str(e, "hint"));
  }
  return fmt::format("refused connections ({} since the aggregator started):\n", r.value("total", 0)) +
         table({"LAST", "PEER", "REASON", "KEY_OR_HOST", "COUNT", "DETAIL"}, rows) + "what to check:\n" + hints;
}

std::string renderFleet(const json& f) {
  std::string out = fmt::format("{} failed job(s) with verdicts since {} ({} systemic)\n", f.value("jobs", 0),
                                str(f, "since"), f.value("systemic_jobs", 0));
  auto suspects = [&](const char* key, bool device) {
    std::vector<std::vector<std::string>> rows;
    size_t rank = 0;
    for (const auto& s : f[key]) {
      std::vector<std::string> r{std::to_string(++rank), str(s, "node")};
      if (device) r.push_back(str(s, "device"));
      r.insert(r.end(), {std::to_string(s.value("jobs", 0)), fmt::format("{:.2f}", s.value("score", 0.0)),
                         joinStrings(s["sub_domains"]), str(s, "last_job_end"), joinStrings(s["job_ids"], 8)});
      rows.push_back(r);
    }
    std::vector<std::string> head{"RANK", "NODE"};
    if (device) head.push_back("DEVICE");
    head.insert(head.end(), {"JOBS", "SCORE", "SUB_DOMAINS", "LAST", "EVIDENCE"});
    return rows.empty() ? std::string("none\n") : table(head, rows);
  };
  out += "\nnodes:\n" + suspects("nodes", false);
  out += "\ndevices:\n" + suspects("devices", true);
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : f["patterns"])
    rows.push_back({std::to_string(p["job_ids"].size()), str(p, "rule_id"), str(p, "node"), str(p, "device"),
                    str(p, "detail"), joinStrings(p["job_ids"], 8)});
  out += "\nrepeating causes:\n" + (rows.empty() ? std::string("none\n")
                                                 : table({"JOBS", "RULE", "NODE", "DEVICE", "DETAIL", "EVIDENCE"}, rows));
  return out;
}

}  // namespace faultline::aggregator

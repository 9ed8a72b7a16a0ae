#include "aggregator/query/query.h"

#include <cctype>

#include "aggregator/fleet/fleet.h"
#include "common/job.h"

namespace faultline::aggregator {

using nlohmann::json;

namespace {

json timeOrNull(int64_t ns) { return ns ? json(common::formatTimeNs(ns)) : json(nullptr); }

json sourcesJson(const std::vector<SourceStatusInfo>& sources) {
  json a = json::array();
  for (const auto& s : sources)
    a.push_back({{"source", s.source},
                 {"format", s.format},
                 {"status", s.status},
                 {"reason", s.reason},
                 {"records", s.records},
                 {"skipped", s.skipped},
                 {"lost", s.lost}});
  return a;
}

json verdictSummary(const VerdictRow& v) {
  json j{{"revision", v.revision},
         {"status", v.status},
         {"reason", v.reason},
         {"created", timeOrNull(v.created_ns)},
         {"sub_domain", common::subDomainName(v.diagnosis.sub_domain)},
         {"systemic", v.diagnosis.systemic},
         {"cause", v.diagnosis.cause ? json(v.diagnosis.cause->rule_id) : json(nullptr)},
         {"responsible_nodes", json::array()},
         {"missing_nodes", v.missing_nodes},
         {"symptoms", v.symptoms}};
  for (const auto& r : v.diagnosis.responsible) j["responsible_nodes"].push_back(r.node);
  return j;
}

json jobJson(const JobRow& j) {
  json out{{"job_id", j.info.job_id},
           {"state", j.info.state},
           {"terminal_state", j.terminal_state.empty() ? json(nullptr) : json(j.terminal_state)},
           {"exit_code", j.info.exit_code},
           {"start", timeOrNull(j.info.start_ns)},
           {"end", timeOrNull(j.info.end_ns)},
           {"nodelist", j.nodelist},
           {"node_count", j.info.nodes.size()},
           {"source", j.source}};
  // The workload, when the job's events named one (its baseline runs share it).
  if (!j.workload.empty()) out["workload"] = {{"name", j.workload.name}, {"user", j.workload.user},
                                              {"partition", j.workload.partition}};
  return out;
}

// A job relayed from an edge site says so (its id is "SITE:JOBID"; the diagnosis inside keeps
// the site's own job id).
json withSite(json out, const JobRow& j) {
  if (!j.site.empty()) out["site"] = j.site;
  return out;
}

bool live(const QueryContext& q, int64_t last_heartbeat_ns, const std::string& host) {
  if (!last_heartbeat_ns || q.now_ns - last_heartbeat_ns > q.agent_timeout_ns) return false;
  const int64_t closed = q.connections ? q.connections->disconnectedAt(host) : 0;
  return closed == 0 || closed < last_heartbeat_ns;
}

}  // namespace

std::optional<int64_t> parseSince(std::string_view text, int64_t now_ns) {
  if (text.empty()) return std::nullopt;
  size_t i = 0;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
  if (i > 0 && i + 1 == text.size() && i < 12) {
    int64_t n = std::stoll(std::string(text.substr(0, i)));
    int64_t unit = 0;
    switch (text[i]) {
      case 's': unit = 1; break;
      case 'm': unit = 60; break;
      case 'h': unit = 3600; break;
      case 'd': unit = 86400; break;
      case 'w': unit = 7 * 86400; break;
      default: return std::nullopt;
    }
    // n < 10^11 and unit <= 604800 s: the seconds fit; their nanoseconds may not. A duration
    // longer than the time since the epoch reaches back to the epoch.
    const int64_t seconds = n * unit;
    if (seconds >= now_ns / 1'000'000'000) return 0;
    return now_ns - seconds * 1'000'000'000;
  }
  return common::parseTimestampNs(text);
}

json queryJobs(const QueryContext& q, const JobFilter& filter) {
  json out = json::array();
  for (const auto& j : q.store.jobs(filter)) {
    json row = withSite(jobJson(j), j);
    auto v = q.store.latestVerdict(j.info.job_id);
    row["verdict"] = v ? verdictSummary(*v) : json(nullptr);
    out.push_back(std::move(row));
  }
  return out;
}

json queryJob(const QueryContext& q, const std::string& job_id) {
  auto j = q.store.job(job_id);
  if (!j) return nullptr;
  json out = withSite(jobJson(*j), *j);
  out["nodes"] = j->info.nodes;
  out["ntasks_per_node"] = j->info.ntasks_per_node;
  out["revisions"] = json::array();
  for (const auto& v : q.store.verdictHistory(job_id)) out["revisions"].push_back(verdictSummary(v));
  out["verdict"] = out["revisions"].empty() ? json(nullptr) : out["revisions"].back();
  return out;
}

json queryDiagnosis(const QueryContext& q, const std::string& job_id) {
  auto v = q.store.latestVerdict(job_id);
  if (!v) return nullptr;
  json d = common::toJson(v->diagnosis);
  d["verdict"] = {{"revision", v->revision},
                  {"status", v->status},
                  {"reason", v->reason},
                  {"created", timeOrNull(v->created_ns)},
                  {"missing_nodes", v->missing_nodes}};
  if (auto j = q.store.job(job_id); j && !j->site.empty()) d["verdict"]["site"] = j->site;
  return d;
}

json queryNodes(const QueryContext& q) {
  json out = json::array();
  for (const auto& n : q.store.nodes()) {
    size_t bad = 0;
    for (const auto& s : n.sources) bad += s.status != "ok";
    out.push_back({{"hostname", n.hostname},
                   {"agent_id", n.agent_id},
                   {"boot_id", n.boot_id},
                   {"live", live(q, n.last_heartbeat_ns, n.hostname)},
                   {"last_heartbeat", timeOrNull(n.last_heartbeat_ns)},
                   {"reported_until", timeOrNull(n.reported_ns)},
                   {"spool_batches", n.spool_batches},
                   {"symptoms", n.symptoms},
                   {"sources_not_ok", bad},
                   {"sources", sourcesJson(n.sources)}});
  }
  return out;
}

json queryNode(const QueryContext& q, const std::string& hostname, int64_t since_ns) {
  auto n = q.store.node(hostname);
  JobFilter f;
  f.node = hostname;
  f.since_ns = since_ns;
  f.limit = 50;
  auto jobs = queryJobs(q, f);
  auto history = q.store.nodeHistory(hostname, since_ns);
  if (!n && jobs.empty() && history.empty()) return nullptr;
  json out{{"hostname", hostname}, {"known_agent", n.has_value()}};
  if (n) {
    out["agent_id"] = n->agent_id;
    out["boot_id"] = n->boot_id;
    out["live"] = live(q, n->last_heartbeat_ns, hostname);
    out["last_heartbeat"] = timeOrNull(n->last_heartbeat_ns);
    out["reported_until"] = timeOrNull(n->reported_ns);
    out["sources"] = sourcesJson(n->sources);
  }
  out["history"] = json::array();
  for (const auto& e : history)
    out["history"].push_back(
        {{"time", timeOrNull(e.time_ns)}, {"kind", e.kind}, {"detail", e.detail}, {"job_id", e.job_id}});
  out["jobs"] = jobs;
  auto fleet = rankFleet(q.store, since_ns, 0);
  out["suspicion"] = nullptr;
  for (size_t i = 0; i < fleet.nodes.size(); ++i)
    if (fleet.nodes[i].node == hostname)
      out["suspicion"] = {{"rank", i + 1},
                          {"of", fleet.nodes.size()},
                          {"jobs", fleet.nodes[i].jobs},
                          {"score", fleet.nodes[i].score},
                          {"job_ids", fleet.nodes[i].job_ids}};
  out["devices"] = json::array();
  for (const auto& d : fleet.devices)
    if (d.node == hostname) out["devices"].push_back({{"device", d.device}, {"jobs", d.jobs}, {"job_ids", d.job_ids}});
  return out;
}

json querySymptoms(const QueryContext& q, const SymptomFilter& filter) {
  json out = json::array();
  for (const auto& s : q.store.symptoms(filter)) {
    json j = symptomToJson(s.symptom);
    j["id"] = s.id;
    j["agent_id"] = s.agent_id;
    j["received"] = timeOrNull(s.received_ns);
    j["first"] = s.symptom.time_known ? timeOrNull(s.symptom.first_ns) : json(nullptr);
    j["last"] = s.symptom.time_known ? timeOrNull(s.symptom.last_ns) : json(nullptr);
    int64_t t0 = s.symptom.time_known ? s.symptom.first_ns : s.received_ns;
    int64_t t1 = s.symptom.time_known ? s.symptom.last_ns : s.received_ns;
    // A symptom a site relayed ("relay:SITE") belongs to that site's relayed jobs, not the central's.
    const std::string site = s.agent_id.rfind("relay:", 0) == 0 ? s.agent_id.substr(6) : std::string();
    j["jobs"] = q.store.jobsAt(s.symptom.node, t0, t1, 0, 0, site);
    out.push_back(std::move(j));
  }
  return out;
}

json queryAgents(const QueryContext& q) {
  json out = json::array();
  for (const auto& a : q.store.agents())
    out.push_back({{"agent_id", a.agent_id},
                   {"hostname", a.hostname},
                   {"boot_id", a.boot_id},
                   {"agent_version", a.agent_version},
                   {"ruleset_version", a.ruleset_version},
                   {"live", live(q, a.last_heartbeat_ns, a.hostname)},
                   {"first_seen", timeOrNull(a.first_seen_ns)},
                   {"last_heartbeat", timeOrNull(a.last_heartbeat_ns)},
                   {"last_batch", timeOrNull(a.last_batch_ns)},
                   {"started", timeOrNull(a.started_ns)},
                   {"spool_batches", a.spool_batches},
                   {"spool_bytes", a.spool_bytes},
                   {"dropped_symptoms", a.dropped_symptoms},
                   {"batches", a.batches},
                   {"symptoms", a.symptoms},
                   {"sources", sourcesJson(a.sources)}});
  return out;
}

json queryRefusals(const RefusalLog* log) {
  json list = json::array();
  if (log)
    for (const auto& r : log->recent())
      list.push_back({{"reason", r.reason},
                      {"peer", r.peer},
                      {"key", r.key},
                      {"host", r.host},
                      {"detail", r.detail},
                      {"first", timeOrNull(r.first_ns)},
                      {"last", timeOrNull(r.last_ns)},
                      {"count", r.count},
                      {"hint", refusalHint(r.reason)}});
  return {{"total", log ? log->total() : 0}, {"refusals", std::move(list)}};
}

json queryFleet(const QueryContext& q, int64_t since_ns, size_t min_jobs) {
  return toJson(rankFleet(q.store, since_ns, 0, min_jobs));
}

}  // namespace faultline::aggregator

#include "aggregator/fleet/fleet.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/job.h"

namespace faultline::aggregator {

using nlohmann::json;

namespace {

void sortSuspects(std::vector<FleetSuspect>& v) {
  std::sort(v.begin(), v.end(), [](const FleetSuspect& a, const FleetSuspect& b) {
    if (a.jobs != b.jobs) return a.jobs > b.jobs;
    if (a.score != b.score) return a.score > b.score;
    return std::tie(a.node, a.device) < std::tie(b.node, b.device);
  });
}

}  // namespace

FleetReport rankFleet(const std::vector<VerdictRow>& verdicts, const std::vector<JobRow>& jobs, int64_t since_ns,
                      int64_t until_ns, size_t min_jobs) {
  FleetReport r;
  r.since_ns = since_ns;
  r.until_ns = until_ns;
  std::map<std::string, int64_t> end_of;
  for (const auto& j : jobs) end_of[j.info.job_id] = j.info.end_ns;
  std::map<std::pair<std::string, std::string>, FleetSuspect> nodes, devices;
  std::map<std::tuple<std::string, std::string, std::string, std::string>, FleetPattern> patterns;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> domains;
  auto credit = [&](FleetSuspect& s, const VerdictRow& v, double conf, int64_t end) {
    if (std::find(s.job_ids.begin(), s.job_ids.end(), v.job_id) != s.job_ids.end()) return;
    s.job_ids.push_back(v.job_id);
    ++s.jobs;
    s.score += conf;
    if (!s.first_ns || end < s.first_ns) s.first_ns = end;
    s.last_ns = std::max(s.last_ns, end);
  };
  for (const auto& v : verdicts) {
    ++r.jobs;
    const auto& d = v.diagnosis;
    if (d.systemic || d.responsible.empty()) {
      if (d.systemic) ++r.systemic_jobs;
      continue;
    }
    int64_t end = end_of.count(v.job_id) ? end_of[v.job_id] : 0;
    std::string sd(common::subDomainName(d.sub_domain));
    for (const auto& resp : d.responsible) {
      auto& n = nodes[{resp.node, ""}];
      n.node = resp.node;
      credit(n, v, resp.confidence, end);
      domains[{resp.node, ""}].insert(sd);
      if (!resp.device.empty()) {
        auto& dv = devices[{resp.node, resp.device}];
        dv.node = resp.node;
        dv.device = resp.device;
        credit(dv, v, resp.confidence, end);
        domains[{resp.node, resp.device}].insert(sd);
      }
    }
    if (d.cause) {
      std::string detail;
      for (const auto& [k, val] : d.cause->fields) detail += (detail.empty() ? "" : " ") + k + "=" + val;
      auto& p = patterns[{d.cause->rule_id, d.cause->node, d.cause->device, detail}];
      p.rule_id = d.cause->rule_id;
      p.node = d.cause->node;
      p.device = d.cause->device;
      p.detail = detail;
      if (std::find(p.job_ids.begin(), p.job_ids.end(), v.job_id) == p.job_ids.end()) p.job_ids.push_back(v.job_id);
    }
  }
  for (auto* m : {&nodes, &devices})
    for (auto& [key, s] : *m) {
      if (s.jobs < min_jobs) continue;
      auto& ds = domains[key];
      s.sub_domains.assign(ds.begin(), ds.end());
      std::sort(s.job_ids.begin(), s.job_ids.end());
      (m == &nodes ? r.nodes : r.devices).push_back(s);
    }
  sortSuspects(r.nodes);
  sortSuspects(r.devices);
  for (auto& [key, p] : patterns)
    if (p.job_ids.size() >= 2) r.patterns.push_back(p);
  std::sort(r.patterns.begin(), r.patterns.end(), [](const FleetPattern& a, const FleetPattern& b) {
    if (a.job_ids.size() != b.job_ids.size()) return a.job_ids.size() > b.job_ids.size();
    return std::tie(a.rule_id, a.node, a.device) < std::tie(b.rule_id, b.node, b.device);
  });
  return r;
}

FleetReport rankFleet(Store& store, int64_t since_ns, int64_t until_ns, size_t min_jobs) {
  auto verdicts = store.latestVerdicts(since_ns, until_ns);
  JobFilter f;
  f.since_ns = since_ns;
  f.limit = 1000000;
  auto jobs = store.jobs(f);
  return rankFleet(verdicts, jobs, since_ns, until_ns, min_jobs);
}

json toJson(const FleetReport& r) {
  auto suspect = [](const FleetSuspect& s) {
    return json{{"node", s.node},
                {"device", s.device},
                {"jobs", s.jobs},
                {"score", s.score},
                {"job_ids", s.job_ids},
                {"sub_domains", s.sub_domains},
                {"first_job_end", s.first_ns ? json(common::formatTimeNs(s.first_ns)) : json(nullptr)},
                {"last_job_end", s.last_ns ? json(common::formatTimeNs(s.last_ns)) : json(nullptr)}};
  };
  json j{{"since", common::formatTimeNs(r.since_ns)},
         {"until", r.until_ns ? json(common::formatTimeNs(r.until_ns)) : json(nullptr)},
         {"jobs", r.jobs},
         {"systemic_jobs", r.systemic_jobs},
         {"nodes", json::array()},
         {"devices", json::array()},
         {"patterns", json::array()}};
  for (const auto& s : r.nodes) j["nodes"].push_back(suspect(s));
  for (const auto& s : r.devices) j["devices"].push_back(suspect(s));
  for (const auto& p : r.patterns)
    j["patterns"].push_back(
        {{"rule_id", p.rule_id}, {"node", p.node}, {"device", p.device}, {"detail", p.detail}, {"job_ids", p.job_ids}});
  return j;
}

}  // namespace faultline::aggregator

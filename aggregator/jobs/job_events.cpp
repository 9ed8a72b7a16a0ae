#include "aggregator/jobs/job_events.h"

#include <fmt/format.h>

#include "common/job.h"

namespace faultline::aggregator {

using nlohmann::json;

bool exitCodeFailed(std::string_view ec) {
  for (char c : ec)
    if (c >= '1' && c <= '9') return true;
  return false;
}

namespace {

std::optional<int64_t> timeOf(const json& v) {
  if (v.is_number()) return static_cast<int64_t>(v.get<double>() * 1e9);
  if (v.is_string()) return common::parseTimestampNs(v.get<std::string>());
  return std::nullopt;
}

}  // namespace

std::optional<JobUpdate> jobUpdateFromJson(const json& body, const std::string& job_id, JobEventKind kind,
                                           int64_t now_ns, std::string* error) {
  if (!body.is_object() && !body.is_null()) {
    *error = "body must be a JSON object";
    return std::nullopt;
  }
  const json b = body.is_null() ? json::object() : body;
  JobUpdate u;
  u.job_id = job_id;
  auto str = [&](const char* key, std::string* out) {
    if (!b.contains(key)) return true;
    if (b[key].is_string()) *out = b[key].get<std::string>();
    else if (b[key].is_number_integer()) *out = std::to_string(b[key].get<int64_t>());
    else return false;
    return true;
  };
  if (!str("nodes", &u.nodelist) || !str("state", &u.state) || !str("exit_code", &u.exit_code)) {
    *error = "nodes, state and exit_code must be strings";
    return std::nullopt;
  }
  if (b.contains("nodes") && b["nodes"].is_array()) {
    u.nodelist.clear();
    for (const auto& n : b["nodes"])
      if (n.is_string()) u.nodes.push_back(n.get<std::string>());
  }
  for (char c : u.state)
    if (!(std::isupper(static_cast<unsigned char>(c)) || c == '_' || c == ' ' || std::isdigit(static_cast<unsigned char>(c)))) {
      *error = "state must be a Slurm state word (FAILED, COMPLETED, ...)";
      return std::nullopt;
    }
  int64_t t = now_ns;
  if (b.contains("time")) {
    auto parsed = timeOf(b["time"]);
    if (!parsed) {
      *error = "bad time";
      return std::nullopt;
    }
    t = *parsed;
  }
  if (kind == JobEventKind::kStart) {
    u.start_ns = t;
    if (u.state.empty()) u.state = "RUNNING";
  } else {
    u.end_ns = t;
    if (u.state.empty()) u.state = exitCodeFailed(u.exit_code) ? "FAILED" : "COMPLETED";
    if (b.contains("start_time")) {
      auto s = timeOf(b["start_time"]);
      if (!s) {
        *error = "bad start_time";
        return std::nullopt;
      }
      u.start_ns = *s;
    }
  }
  if (b.contains("time_limit") && b["time_limit"].is_string())
    u.time_limit_sec = common::parseSlurmDuration(b["time_limit"].get<std::string>()).value_or(0);
  return u;
}

std::vector<JobUpdate> jobUpdatesFromSacct(std::string_view text, std::vector<std::string>* errors) {
  std::vector<JobUpdate> out;
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array()) {
    errors->push_back("sacct: output has no 'jobs' array");
    return out;
  }
  for (const auto& job : j["jobs"]) {
    // parseSacctJson knows every Slurm version's shape; hand it one job at a time.
    json copy = job;
    // sacct reports "None assigned" for pending jobs: nothing to map symptoms to yet.
    if (copy.contains("nodes") && copy["nodes"] == "None assigned") copy.erase("nodes");
    json one = {{"jobs", json::array({copy})}};
    std::string error;
    std::string text1 = one.dump();
    auto info = common::parseSacctJson(text1, "", &error);
    if (!info || info->job_id.empty()) {
      errors->push_back(error.empty() ? "sacct: job without id" : error);
      continue;
    }
    JobUpdate u;
    u.job_id = info->job_id;
    u.state = info->state;
    u.exit_code = info->exit_code;
    u.start_ns = info->start_ns;
    u.end_ns = isActiveJobState(info->state) ? 0 : info->end_ns;
    u.nodes = info->nodes;
    if (copy.contains("nodes") && copy["nodes"].is_string()) u.nodelist = copy["nodes"].get<std::string>();
    u.time_limit_sec = info->time_limit_sec;
    u.ntasks_per_node = info->ntasks_per_node;
    u.source = "sacct";
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace faultline::aggregator

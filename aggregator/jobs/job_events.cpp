#include "aggregator/jobs/job_events.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>

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
  if (b.contains("ntasks_per_node")) {
    if (!b["ntasks_per_node"].is_number_integer() || b["ntasks_per_node"].get<int64_t>() < 0 ||
        b["ntasks_per_node"].get<int64_t>() > 100000) {
      *error = "ntasks_per_node must be an integer in [0, 100000]";
      return std::nullopt;
    }
    u.ntasks_per_node = b["ntasks_per_node"].get<int>();
  }
  if (b.contains("time_limit") && b["time_limit"].is_string())
    u.time_limit_sec = common::parseSlurmDuration(b["time_limit"].get<std::string>()).value_or(0);
  return u;
}

namespace {

constexpr size_t kMaxOutputText = 64 << 10;

// Every string in `v` (keys too) is at most `max` bytes and free of NUL; nesting at most `depth`.
bool boundedJson(const json& v, size_t max, int depth) {
  if (depth < 0) return false;
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return s.size() <= max && s.find('\0') == std::string::npos;
  }
  if (v.is_object()) {
    for (const auto& [k, x] : v.items())
      if (k.size() > 256 || k.find('\0') != std::string::npos || !boundedJson(x, max, depth - 1)) return false;
  } else if (v.is_array()) {
    for (const auto& x : v)
      if (!boundedJson(x, max, depth - 1)) return false;
  }
  return true;
}

std::string checkOutputSymptom(const json& j) {
  if (!j.is_object()) return "not an object";
  if (!boundedJson(j, kMaxOutputText, 3)) return "text too long, NUL byte or nested too deep";
  auto str = [&](const char* key) -> std::optional<std::string> {
    if (!j.contains(key)) return std::string();
    if (!j[key].is_string()) return std::nullopt;
    return j[key].get<std::string>();
  };
  for (const char* key : {"rule_id", "symptom", "sub_domain", "category", "role", "severity", "node", "device", "source",
                          "source_kind", "summary", "boot_id"})
    if (!str(key)) return fmt::format("{} must be a string", key);
  const std::string rule = *str("rule_id");
  if (rule.empty() || rule.size() > 256) return "rule_id must be 1-256 bytes";
  if (str("node")->size() > 255) return "node name longer than 255 bytes";
  if (j.contains("sub_domain") && !common::parseSubDomain(*str("sub_domain"))) return "bad sub_domain";
  if (j.contains("role") && !common::parseRole(*str("role"))) return "bad role";
  if (j.contains("severity") && !common::parseSeverity(*str("severity"))) return "bad severity";
  if (j.contains("source_kind") && !parseSourceKind(*str("source_kind"))) return "bad source_kind";
  for (const char* key : {"first_ns", "last_ns"})
    if (j.contains(key) && (!j[key].is_number_integer() || j[key].get<int64_t>() < 0))
      return fmt::format("{} must be a non-negative integer", key);
  if (j.value("first_ns", int64_t{0}) > j.value("last_ns", int64_t{0})) return "first_ns after last_ns";
  if (j.contains("count") && (!j["count"].is_number_integer() || j["count"].get<int64_t>() < 1 ||
                              j["count"].get<int64_t>() > int64_t{UINT32_MAX}))
    return "count must be an integer in [1, 2^32)";
  for (const char* key : {"time_known", "fallback_root"})
    if (j.contains(key) && !j[key].is_boolean()) return fmt::format("{} must be true or false", key);
  if (j.contains("evidence") &&
      (!j["evidence"].is_array() || j["evidence"].size() > common::Symptom::kMaxEvidence ||
       std::any_of(j["evidence"].begin(), j["evidence"].end(), [](const json& e) { return !e.is_string(); })))
    return "evidence must be at most 3 strings";
  if (j.contains("fields")) {
    if (!j["fields"].is_object() || j["fields"].size() > 64) return "fields must be an object of at most 64 strings";
    for (const auto& [k, v] : j["fields"].items())
      if (!v.is_string()) return "fields must be an object of at most 64 strings";
  }
  return "";
}

}  // namespace

std::optional<JobOutput> jobOutputFromJson(const json& body, const std::string& job_id, int64_t now_ns,
                                           std::string* error) {
  if (!body.is_object()) {
    *error = "body must be a JSON object";
    return std::nullopt;
  }
  JobOutput out;
  out.job_id = job_id;
  out.received_ns = now_ns;
  if (!body.contains("source") || !body["source"].is_string() || body["source"].get<std::string>().empty() ||
      !boundedJson(body["source"], 4096, 0)) {
    *error = "source must be the file's path (1-4096 bytes)";
    return std::nullopt;
  }
  out.source = body["source"].get<std::string>();
  out.coverage.source = out.source;
  if (body.contains("coverage")) {
    const json& c = body["coverage"];
    bool ok = c.is_object() && boundedJson(c, 4096, 1);
    for (const char* key : {"records", "skipped"})
      ok = ok && (!c.contains(key) || (c[key].is_number_integer() && c[key].get<int64_t>() >= 0));
    for (const char* key : {"node", "format", "status", "reason"})
      ok = ok && (!c.contains(key) || c[key].is_string());
    const std::string status = ok ? c.value("status", "ok") : "";
    if (!ok || (status != "ok" && status != "partial" && status != "error" && status != "missing")) {
      *error = "coverage must be {node, format, records, skipped, status: ok|partial|error|missing, reason}";
      return std::nullopt;
    }
    out.coverage = common::coverageFromJson(c);
    out.coverage.source = out.source;
  }
  if (!body.contains("symptoms") || !body["symptoms"].is_array()) {
    *error = "symptoms must be an array";
    return std::nullopt;
  }
  if (body["symptoms"].size() > kMaxJobOutputSymptoms) {
    *error = fmt::format("more than {} symptoms in one upload", kMaxJobOutputSymptoms);
    return std::nullopt;
  }
  size_t i = 0;
  for (const auto& j : body["symptoms"]) {
    if (auto why = checkOutputSymptom(j); !why.empty()) {
      *error = fmt::format("symptom {}: {}", i, why);
      return std::nullopt;
    }
    out.symptoms.push_back(symptomFromJson(j));
    if (out.symptoms.back().source.empty()) out.symptoms.back().source = out.source;  // left out by the CLI
    ++i;
  }
  return out;
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

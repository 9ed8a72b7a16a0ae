#include "aggregator/jobs/job_events.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>

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
  if (v.is_number()) {
    const double sec = v.get<double>();
    if (!(sec >= 0 && sec < 1e10)) return std::nullopt;
    return static_cast<int64_t>(sec * 1e9);
  }
  if (v.is_string()) return common::parseTimestampNs(v.get<std::string>());
  return std::nullopt;
}

// Slurm's job states (sacct(1), squeue(1)); "CANCELLED by 1000" carries the canceller.
bool slurmState(std::string_view state) {
  static const std::set<std::string_view> kStates = {
      "BOOT_FAIL", "CANCELLED", "COMPLETED", "COMPLETING", "CONFIGURING", "DEADLINE",    "FAILED",
      "NODE_FAIL", "OUT_OF_MEMORY", "PENDING", "PREEMPTED", "REQUEUED",  "RESIZING", "REVOKED",
      "RUNNING",   "SPECIAL_EXIT",  "STOPPED", "SUSPENDED", "TIMEOUT"};
  std::string_view word = state.substr(0, state.find(' '));
  if (!kStates.count(word)) return false;
  if (word.size() == state.size()) return true;
  std::string_view rest = state.substr(word.size());
  if (rest.rfind(" by ", 0) != 0 || rest.size() == 4) return false;
  return std::all_of(rest.begin() + 4, rest.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
}

// "1:0" (exit:signal) or a bare exit code.
bool exitCodeForm(std::string_view ec) {
  size_t colon = ec.find(':');
  auto digits = [](std::string_view d) {
    return !d.empty() && d.size() <= 10 && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return colon == std::string_view::npos ? digits(ec) : digits(ec.substr(0, colon)) && digits(ec.substr(colon + 1));
}

constexpr int64_t kEventDayNs = 86400LL * 1'000'000'000;
constexpr int64_t kYear2000Ns = 946'684'800LL * 1'000'000'000;

// Every key is one of these (docs/api.md); "nodelist" is the bundle format's name for "nodes",
// accepted on purpose. Anything else is refused, not ignored: a misspelt key would otherwise turn
// a failed job into a completed one without nodes.
bool checkKeys(const json& b, std::string* error) {
  static const std::set<std::string> kKeys = {"nodes",      "nodelist",        "state",     "exit_code",
                                              "time",       "start_time",      "ntasks_per_node", "time_limit",
                                              "name",       "user",            "partition"};
  for (const auto& [key, value] : b.items())
    if (!kKeys.count(key)) {
      *error = fmt::format("unknown key '{}' (known: {})", key.size() > 40 ? key.substr(0, 40) + "..." : key,
                           fmt::join(kKeys, ", "));
      return false;
    }
  if (b.contains("nodes") && b.contains("nodelist")) {
    *error = "give nodes or nodelist, not both";
    return false;
  }
  return true;
}

// nodes / nodelist: a Slurm host list or an array of host names.
bool readNodes(const json& b, JobUpdate& u, std::string* error) {
  const char* nodes_key = b.contains("nodelist") ? "nodelist" : "nodes";
  if (!b.contains(nodes_key)) return true;
  const json& n = b[nodes_key];
  if (n.is_string()) {
    u.nodelist = n.get<std::string>();
    return true;
  }
  if (!n.is_array()) {
    *error = fmt::format("{} must be a Slurm host list or an array of host names, not {}", nodes_key, n.type_name());
    return false;
  }
  for (const auto& e : n) {
    if (!e.is_string() || e.get<std::string>().empty()) {
      *error = fmt::format("{} must be a Slurm host list or an array of host names", nodes_key);
      return false;
    }
    u.nodes.push_back(e.get<std::string>());
  }
  return true;
}

// state (a Slurm job state word) and exit_code ("1:0", or a bare unsigned exit code).
bool readStateAndExit(const json& b, JobUpdate& u, std::string* error) {
  if (b.contains("state")) {
    if (!b["state"].is_string()) {
      *error = "state must be a string";
      return false;
    }
    u.state = b["state"].get<std::string>();
  }
  if (b.contains("exit_code")) {
    if (b["exit_code"].is_string()) {
      u.exit_code = b["exit_code"].get<std::string>();
    } else if (b["exit_code"].is_number_unsigned()) {
      u.exit_code = std::to_string(b["exit_code"].get<uint64_t>());
    } else {
      *error = "exit_code must be a string";
      return false;
    }
  }
  if (!u.state.empty() && !slurmState(u.state)) {
    *error = fmt::format("state '{}' is not a Slurm job state (FAILED, COMPLETED, TIMEOUT, NODE_FAIL, "
                         "OUT_OF_MEMORY, CANCELLED, PREEMPTED, ...)", u.state.substr(0, 40));
    return false;
  }
  if (!u.exit_code.empty() && !exitCodeForm(u.exit_code)) {
    *error = fmt::format("exit_code '{}' is not EXIT[:SIGNAL]", u.exit_code.substr(0, 40));
    return false;
  }
  return true;
}

// The time at `key` into *out (absent: unchanged). A time a day past now (beyond any clock skew)
// or before 2000 is a mistake; a job started in the future would take in every later symptom of
// its nodes.
bool readEventTime(const json& b, const char* key, int64_t now_ns, int64_t* out, std::string* error) {
  if (!b.contains(key)) return true;
  auto parsed = timeOf(b[key]);
  if (!parsed) {
    *error = fmt::format("bad {}: not an ISO 8601 time or Unix seconds", key);
    return false;
  }
  if (*parsed < kYear2000Ns || (now_ns > 0 && *parsed > now_ns + kEventDayNs)) {
    *error = fmt::format("{} {} is {}", key, common::formatTimeNs(*parsed),
                         *parsed < kYear2000Ns ? "before 2000" : "more than a day in the future");
    return false;
  }
  *out = *parsed;
  return true;
}

// The event's time as the job's start or end (and, for an end, its start_time); the state a start
// or an end implies when none is given.
bool readTimes(const json& b, JobEventKind kind, int64_t now_ns, JobUpdate& u, std::string* error) {
  int64_t t = now_ns;
  if (!readEventTime(b, "time", now_ns, &t, error)) return false;
  if (kind == JobEventKind::kStart) {
    if (u.nodelist.empty() && u.nodes.empty()) {
      *error = "a job start names the job's nodes (nodes: a Slurm host list or an array)";
      return false;
    }
    u.start_ns = t;
    if (u.state.empty()) u.state = "RUNNING";
    return true;
  }
  u.end_ns = t;
  if (u.state.empty()) u.state = exitCodeFailed(u.exit_code) ? "FAILED" : "COMPLETED";
  if (!readEventTime(b, "start_time", now_ns, &u.start_ns, error)) return false;
  if (u.start_ns && u.start_ns > u.end_ns) {
    *error = "start_time is after the end";
    return false;
  }
  return true;
}

// ntasks_per_node, time_limit, and the workload (name, user, partition: a job's baseline runs
// share it, docs/aggregator.md).
bool readShape(const json& b, JobUpdate& u, std::string* error) {
  if (b.contains("ntasks_per_node")) {
    if (!b["ntasks_per_node"].is_number_integer() || b["ntasks_per_node"].get<int64_t>() < 0 ||
        b["ntasks_per_node"].get<int64_t>() > 100000) {
      *error = "ntasks_per_node must be an integer in [0, 100000]";
      return false;
    }
    u.ntasks_per_node = b["ntasks_per_node"].get<int>();
  }
  if (b.contains("time_limit")) {
    auto d = b["time_limit"].is_string() ? common::parseSlurmDuration(b["time_limit"].get<std::string>()) : std::nullopt;
    if (!d) {
      *error = "time_limit must be a Slurm duration ([D-]HH:MM:SS or minutes)";
      return false;
    }
    u.time_limit_sec = *d;
  }
  for (auto [key, field] : {std::pair{"name", &u.workload.name}, {"user", &u.workload.user},
                            {"partition", &u.workload.partition}}) {
    if (!b.contains(key)) continue;
    if (!b[key].is_string() || b[key].get_ref<const std::string&>().size() > 256 ||
        b[key].get_ref<const std::string&>().find('\0') != std::string::npos) {
      *error = fmt::format("{} must be a string of at most 256 bytes", key);
      return false;
    }
    *field = b[key].get<std::string>();
  }
  return true;
}

}  // namespace

std::optional<JobUpdate> jobUpdateFromJson(const json& body, const std::string& job_id, JobEventKind kind,
                                           int64_t now_ns, std::string* error) {
  if (!body.is_object() && !body.is_null()) {
    *error = "body must be a JSON object";
    return std::nullopt;
  }
  const json b = body.is_null() ? json::object() : body;
  if (!checkKeys(b, error)) return std::nullopt;
  JobUpdate u;
  u.job_id = job_id;
  if (!readNodes(b, u, error) || !readStateAndExit(b, u, error) || !readTimes(b, kind, now_ns, u, error) ||
      !readShape(b, u, error))
    return std::nullopt;
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
  if (body.contains("unmatched")) {  // absent from a CLI before issue 30
    auto templates = outputTemplatesFromJson(body["unmatched"], error);
    if (!templates) return std::nullopt;
    out.unmatched = std::move(*templates);
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
    for (auto [key, field] : {std::pair{"name", &u.workload.name}, {"user", &u.workload.user},
                              {"partition", &u.workload.partition}})
      if (copy.contains(key) && copy[key].is_string() && copy[key].get_ref<const std::string&>().size() <= 256)
        *field = copy[key].get<std::string>();
    u.source = "sacct";
    out.push_back(std::move(u));
  }
  return out;
}

}  // namespace faultline::aggregator

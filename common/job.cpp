#include "common/job.h"

#include <fmt/format.h>

#include <cctype>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/hostlist.h"

namespace faultline::common {

using nlohmann::json;

std::string JobInfo::nodeOfRank(int rank) const {
  for (const auto& r : ranks)
    if (rank >= r.first && rank <= r.last) return r.node;
  return "";
}

std::string terminalStateOf(std::string_view s) {
  auto starts = [&](std::string_view p) { return s.substr(0, p.size()) == p; };
  if (starts("COMPLETED")) return "success";
  if (starts("TIMEOUT") || starts("DEADLINE")) return "timeout";
  if (starts("CANCELLED")) return "cancelled";
  if (starts("PREEMPTED")) return "preempted";
  if (starts("NODE_FAIL") || starts("BOOT_FAIL")) return "node_fail";
  if (starts("OUT_OF_MEMORY")) return "out_of_memory";
  return "fail";
}

namespace {

int64_t daysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const unsigned yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool digits(std::string_view s, size_t pos, size_t n, int* out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return true;
}

}  // namespace

std::optional<int> parseUtcOffset(std::string_view s) {
  if (s == "Z" || s == "UTC" || s == "GMT" || s == "z") return 0;
  if (s.size() < 3 || (s[0] != '+' && s[0] != '-')) return std::nullopt;
  int sign = s[0] == '-' ? -1 : 1;
  int h, m = 0;
  if (!digits(s, 1, 2, &h)) return std::nullopt;
  size_t pos = 3;
  if (pos < s.size() && s[pos] == ':') ++pos;
  if (pos < s.size() && !digits(s, pos, 2, &m)) return std::nullopt;
  if (h > 14 || m > 59) return std::nullopt;
  return sign * (h * 3600 + m * 60);
}

std::optional<int64_t> parseTimestampNs(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return std::nullopt;
  bool numeric = true;
  for (char c : s) numeric = numeric && (std::isdigit(static_cast<unsigned char>(c)) || c == '.');
  if (numeric) {
    double v = std::strtod(std::string(s).c_str(), nullptr);
    // Seconds since the epoch; beyond 2261 the nanoseconds leave int64 (found by tests/fuzz).
    if (!(v >= 0 && v < 9.2e9)) return std::nullopt;
    return static_cast<int64_t>(v * 1e9);
  }
  int y, mo, d, h, mi, sec;
  if (!digits(s, 0, 4, &y) || s.size() < 19 || s[4] != '-' || !digits(s, 5, 2, &mo) || s[7] != '-' ||
      !digits(s, 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') || !digits(s, 11, 2, &h) ||
      s[13] != ':' || !digits(s, 14, 2, &mi) || s[16] != ':' || !digits(s, 17, 2, &sec))
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
  if (y < 1970 || y > 2261) return std::nullopt;  // no overflow of the nanoseconds (tests/fuzz)
  size_t pos = 19;
  int64_t frac_ns = 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) {
    ++pos;
    int64_t scale = 100000000;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      frac_ns += (s[pos] - '0') * scale;
      scale /= 10;
      ++pos;
    }
  }
  int offset = 0;
  if (pos < s.size()) {
    auto zone = s.substr(pos);
    while (!zone.empty() && zone.front() == ' ') zone.remove_prefix(1);
    auto o = parseUtcOffset(zone);
    if (!o) return std::nullopt;
    offset = *o;
  }
  int64_t days = daysFromCivil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  int64_t secs = days * 86400 + h * 3600 + mi * 60 + sec - offset;
  return secs * 1000000000 + frac_ns;
}

std::optional<int64_t> parseSlurmDuration(std::string_view s) {
  if (s.empty() || s == "UNLIMITED" || s == "Partition_Limit" || s == "INVALID") return 0;
  // A number of at most 10 digits (the arithmetic below cannot overflow); nullopt otherwise.
  auto number = [](std::string_view piece) -> std::optional<int64_t> {
    if (piece.empty() || piece.size() > 10) return std::nullopt;
    int64_t v = 0;
    for (char c : piece) {
      if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
      v = v * 10 + (c - '0');
    }
    return v;
  };
  int64_t days = 0;
  auto dash = s.find('-');
  if (dash != std::string_view::npos) {
    auto d = number(s.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    s = s.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  size_t start = 0;
  while (true) {
    auto colon = s.find(':', start);
    auto piece = number(s.substr(start, colon == std::string_view::npos ? std::string_view::npos : colon - start));
    if (!piece) return std::nullopt;
    parts.push_back(*piece);
    if (colon == std::string_view::npos) break;
    start = colon + 1;
  }
  int64_t secs = 0;
  if (dash == std::string_view::npos && parts.size() == 1) secs = parts[0] * 60;  // minutes
  else if (parts.size() == 3) secs = parts[0] * 3600 + parts[1] * 60 + parts[2];
  else if (parts.size() == 2) secs = (dash != std::string_view::npos) ? parts[0] * 3600 + parts[1] * 60
                                                                     : parts[0] * 60 + parts[1];
  else if (parts.size() == 1) secs = parts[0] * 3600;
  else return std::nullopt;
  // Slurm keeps a time limit in minutes as a uint32 (0xfffffffe the largest; INFINITE prints as
  // UNLIMITED): beyond that no Slurm printed it.
  constexpr int64_t kMaxSec = int64_t{0xfffffffe} * 60;
  const int64_t total = days * 86400 + secs;
  if (total > kMaxSec) return std::nullopt;
  return total;
}

std::string formatTimeNs(int64_t ns) {
  int64_t secs = ns >= 0 ? ns / 1000000000 : (ns - 999999999) / 1000000000;
  int64_t ms = (ns - secs * 1000000000) / 1000000;
  std::time_t t = static_cast<std::time_t>(secs);
  std::tm tm{};
  gmtime_r(&t, &tm);
  return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

namespace {

// Parses "0-7" / "0,2,4-6" into ranges for one node.
bool parseRankSpec(const std::string& node, std::string_view spec, std::vector<RankRange>* out) {
  size_t start = 0;
  while (start <= spec.size()) {
    auto comma = spec.find(',', start);
    auto item = spec.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    auto dash = item.find('-');
    char* end = nullptr;
    std::string a(item.substr(0, dash));
    long lo = std::strtol(a.c_str(), &end, 10);
    if (a.empty() || *end) return false;
    long hi = lo;
    if (dash != std::string_view::npos) {
      std::string b(item.substr(dash + 1));
      hi = std::strtol(b.c_str(), &end, 10);
      if (b.empty() || *end || hi < lo) return false;
    }
    out->push_back({node, static_cast<int>(lo), static_cast<int>(hi)});
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return true;
}


std::string jsonString(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt::format("{}", v.get<double>());
  return "";
}

// sacct 23.x wraps numbers as {"set": true, "infinite": false, "number": N}.
std::optional<int64_t> sacctNumber(const json& v) {
  if (v.is_number()) return v.get<int64_t>();
  if (v.is_object()) {
    if (v.contains("set") && v["set"].is_boolean() && !v["set"].get<bool>()) return std::nullopt;
    if (v.contains("infinite") && v["infinite"].is_boolean() && v["infinite"].get<bool>()) return 0;
    if (v.contains("number")) return sacctNumber(v["number"]);
  }
  return std::nullopt;
}

}  // namespace

std::optional<JobInfo> parseJobJson(std::string_view text, std::string* error) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *error = "job.json: not a JSON object";
    return std::nullopt;
  }
  JobInfo job;
  job.job_id = j.contains("job_id") ? jsonString(j["job_id"]) : "";
  if (j.contains("state") && !j["state"].is_string()) {
    *error = "job.json: 'state' is not a string";
    return std::nullopt;
  }
  job.state = j.value("state", "");
  if (job.state.empty()) {
    *error = "job.json: missing 'state'";
    return std::nullopt;
  }
  job.exit_code = j.contains("exit_code") ? jsonString(j["exit_code"]) : "";
  for (const char* key : {"start_time", "end_time"}) {
    if (!j.contains(key)) continue;
    auto t = parseTimestampNs(jsonString(j[key]));
    if (!t) {
      *error = fmt::format("job.json: bad {} '{}'", key, jsonString(j[key]));
      return std::nullopt;
    }
    (std::string(key) == "start_time" ? job.start_ns : job.end_ns) = *t;
    if (job.timezone.empty()) {
      const std::string s = jsonString(j[key]);
      size_t pos = 19;
      if (pos < s.size() && (s[pos] == '.' || s[pos] == ',')) ++pos;
      while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) ++pos;
      while (pos < s.size() && s[pos] == ' ') ++pos;
      if (s.size() >= 19 && pos < s.size() && (s[pos] == '+' || s[pos] == '-') && parseUtcOffset(s.substr(pos)))
        job.timezone = s.substr(pos);
    }
  }
  if (j.contains("timezone") && j["timezone"].is_string() && !j["timezone"].get<std::string>().empty())
    job.timezone = j["timezone"].get<std::string>();
  if (j.contains("nodelist") && j["nodelist"].is_string()) {
    std::string err;
    auto hosts = expandHostlist(j["nodelist"].get<std::string>(), &err);
    if (!hosts) {
      *error = "job.json: " + err;
      return std::nullopt;
    }
    job.nodes = *hosts;
  }
  if (j.contains("nodes") && j["nodes"].is_array()) {
    for (const auto& n : j["nodes"])
      if (n.is_string() && std::find(job.nodes.begin(), job.nodes.end(), n.get<std::string>()) == job.nodes.end())
        job.nodes.push_back(n.get<std::string>());
  }
  if (j.contains("time_limit")) {
    auto lim = parseSlurmDuration(jsonString(j["time_limit"]));
    if (lim) job.time_limit_sec = *lim;
  }
  if (j.contains("ntasks_per_node") && j["ntasks_per_node"].is_number_integer())
    job.ntasks_per_node = j["ntasks_per_node"].get<int>();
  if (j.contains("task_layout") && j["task_layout"].is_object()) {
    for (const auto& [node, spec] : j["task_layout"].items()) {
      if (!spec.is_string() || !parseRankSpec(node, spec.get<std::string>(), &job.ranks)) {
        *error = fmt::format("job.json: bad task_layout for {}", node);
        return std::nullopt;
      }
    }
  }
  deriveRanks(job);
  return job;
}

std::optional<JobInfo> parseSacctJson(std::string_view text, std::string_view job_id, std::string* error) {
  json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("jobs") || !j["jobs"].is_array() || j["jobs"].empty()) {
    *error = "sacct.json: no 'jobs' array";
    return std::nullopt;
  }
  const json* pick = &j["jobs"][0];
  for (const auto& cand : j["jobs"])
    if (!job_id.empty() && cand.contains("job_id") && jsonString(cand["job_id"]) == job_id) pick = &cand;
  const json& s = *pick;
  JobInfo job;
  job.job_id = s.contains("job_id") ? jsonString(s["job_id"]) : "";
  if (s.contains("state")) {
    const json& st = s["state"];
    if (st.is_object() && st.contains("current")) {
      const json& cur = st["current"];
      if (cur.is_array() && !cur.empty()) job.state = jsonString(cur[0]);
      else job.state = jsonString(cur);
    } else {
      job.state = jsonString(st);
    }
  }
  if (job.state.empty()) {
    *error = "sacct.json: job has no state";
    return std::nullopt;
  }
  if (s.contains("exit_code") && s["exit_code"].is_object()) {
    const json& ec = s["exit_code"];
    int64_t rc = ec.contains("return_code") ? sacctNumber(ec["return_code"]).value_or(0) : 0;
    int64_t sig = 0;
    if (ec.contains("signal") && ec["signal"].is_object()) {
      const json& sg = ec["signal"];
      if (sg.contains("id")) sig = sacctNumber(sg["id"]).value_or(0);
      else if (sg.contains("signal_id")) sig = sacctNumber(sg["signal_id"]).value_or(0);
    }
    job.exit_code = fmt::format("{}:{}", rc, sig);
  }
  if (s.contains("time") && s["time"].is_object()) {
    const json& t = s["time"];
    if (t.contains("start")) job.start_ns = sacctNumber(t["start"]).value_or(0) * 1000000000;
    if (t.contains("end")) job.end_ns = sacctNumber(t["end"]).value_or(0) * 1000000000;
    if (t.contains("limit")) job.time_limit_sec = sacctNumber(t["limit"]).value_or(0) * 60;
  }
  if (s.contains("nodes") && s["nodes"].is_string()) {
    std::string err;
    auto hosts = expandHostlist(s["nodes"].get<std::string>(), &err);
    if (!hosts) {
      *error = "sacct.json: " + err;
      return std::nullopt;
    }
    job.nodes = *hosts;
  }
  if (s.contains("tasks_per_node")) job.ntasks_per_node = static_cast<int>(sacctNumber(s["tasks_per_node"]).value_or(0));
  // Slurm 23+: the job's main step says how many tasks ran on how many nodes; with the default
  // block distribution that gives the rank layout.
  if (job.ntasks_per_node <= 0 && s.contains("steps") && s["steps"].is_array()) {
    for (const auto& step : s["steps"]) {
      if (!step.is_object() || !step.contains("tasks") || !step.contains("nodes")) continue;
      std::string name = step.contains("step") && step["step"].is_object() && step["step"].contains("name") &&
                                 step["step"]["name"].is_string()
                             ? step["step"]["name"].get<std::string>()
                             : "";
      if (name == "batch" || name == "extern") continue;
      const json& t = step["tasks"];
      const json& n = step["nodes"];
      int64_t tasks = t.is_object() && t.contains("count") ? sacctNumber(t["count"]).value_or(0) : 0;
      int64_t nodes = n.is_object() && n.contains("count") ? sacctNumber(n["count"]).value_or(0) : 0;
      if (tasks > 0 && nodes > 0 && tasks % nodes == 0 && static_cast<size_t>(nodes) == job.nodes.size()) {
        job.ntasks_per_node = static_cast<int>(tasks / nodes);
        break;
      }
    }
  }
  deriveRanks(job);
  return job;
}

void deriveRanks(JobInfo& job) {
  if (!job.ranks.empty() || job.ntasks_per_node <= 0) return;
  int next = 0;
  for (const auto& n : job.nodes) {
    job.ranks.push_back({n, next, next + job.ntasks_per_node - 1});
    next += job.ntasks_per_node;
  }
}

int yearOfNs(int64_t ns) { return std::atoi(formatTimeNs(ns).substr(0, 4).c_str()); }

}  // namespace faultline::common

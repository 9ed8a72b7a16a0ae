// The job under diagnosis: what the scheduler says about it. Pure parsing of job.json and of
// `sacct --json` output; no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::common {

struct RankRange {
  std::string node;
  int first = 0;
  int last = 0;
};

struct JobInfo {
  std::string job_id;
  std::string state;      // Slurm state word: FAILED, COMPLETED, TIMEOUT, CANCELLED, ...
  std::string exit_code;  // "exit:signal"
  int64_t start_ns = 0;   // UTC ns; 0 when unknown
  int64_t end_ns = 0;
  std::vector<std::string> nodes;
  int64_t time_limit_sec = 0;
  int ntasks_per_node = 0;
  std::vector<RankRange> ranks;  // explicit task_layout, or derived from ntasks_per_node
  // The zone the job's own description states: job.json "timezone" (a tz database name or an
  // offset), else the explicit offset of its start_time ("...T10:00:00+02:00"; "Z" states none).
  // Used for node-local stamps of nodes whose node.json says nothing about their zone.
  std::string timezone;

  // Node running global rank `rank`, "" when unknown.
  std::string nodeOfRank(int rank) const;
};

// Block layout (ranks 0..n-1 on the first node, ...) from ntasks_per_node when no explicit
// task_layout gave `ranks`.
void deriveRanks(JobInfo& job);

// Normalised terminal state: success|fail|timeout|cancelled|preempted|node_fail|out_of_memory.
std::string terminalStateOf(std::string_view slurm_state);

// Parses job.json (see docs/bundle-format.md). Errors: "job.json: why".
std::optional<JobInfo> parseJobJson(std::string_view text, std::string* error);
// Parses `sacct --json` output (Slurm 21.08 .. 24.x shapes); picks `job_id` or the first job.
std::optional<JobInfo> parseSacctJson(std::string_view text, std::string_view job_id, std::string* error);

// "2024-06-01T10:00:00Z", "2024-06-01T10:00:00+02:00", "2024-06-01T10:00:00" (UTC),
// "2024-06-01 10:00:00.123", or a number of seconds since the epoch.
std::optional<int64_t> parseTimestampNs(std::string_view s);
// "+02:00", "-0500", "UTC", "Z" -> seconds east of UTC.
std::optional<int> parseUtcOffset(std::string_view s);
// "2-00:00:00", "02:00:00", "120" (minutes), "UNLIMITED" -> seconds (0 = none).
std::optional<int64_t> parseSlurmDuration(std::string_view s);
// UTC ns -> "2024-06-01T10:00:00.123Z" (millisecond precision).
std::string formatTimeNs(int64_t ns);
// The UTC calendar year of `ns` (the default year for log lines that print none).
int yearOfNs(int64_t ns);

}  // namespace faultline::common

// Job start/end events from the outside world -> JobUpdate for the store. Pure parsing, no I/O:
// the HTTP write endpoint's JSON body and `sacct --json` output (every job in it).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "aggregator/store/store.h"

namespace faultline::aggregator {

enum class JobEventKind { kStart, kEnd };

// Body of POST /jobs/{id}/start|end (docs/api.md):
//   {"nodes": "gpu-[01-04]", "state": "FAILED", "exit_code": "1:0",
//    "time": "2024-06-01T10:00:00Z" | <seconds>, "start_time": ..., "time_limit": "2:00:00",
//    "ntasks_per_node": 8}
// Every key is optional; `time` is the start (start event) or end (end event) time; absent,
// `now_ns` is used. A start without a state is RUNNING; an end without a state is FAILED when
// exit_code is non-zero ("N:M" with N or M non-zero), COMPLETED otherwise.
std::optional<JobUpdate> jobUpdateFromJson(const nlohmann::json& body, const std::string& job_id, JobEventKind kind,
                                           int64_t now_ns, std::string* error);

// Every job in `sacct --json` output (Slurm 21.08 .. 24.x), with its raw host list. Jobs that
// cannot be read are skipped and described in *errors.
std::vector<JobUpdate> jobUpdatesFromSacct(std::string_view text, std::vector<std::string>* errors);

// Body of POST /jobs/{id}/output (docs/api.md), what `faultline job output` extracted from one
// job-wide log: {"source": PATH, "coverage": {"format", "records", "skipped", "status",
// "reason"}, "symptoms": [symptom, ...], "unmatched": [template, ...]} with symptoms as the API
// prints them and templates as aggregator/store/template_store.h writes them (optional). Validated
// as hostile input: bounded counts and lengths, no NUL, known enums, sane times.
constexpr size_t kMaxJobOutputSymptoms = 100000;
std::optional<JobOutput> jobOutputFromJson(const nlohmann::json& body, const std::string& job_id, int64_t now_ns,
                                           std::string* error);

// "1:0" -> true; "0:0", "" -> false; "0:9" -> true.
bool exitCodeFailed(std::string_view exit_code);

}  // namespace faultline::aggregator

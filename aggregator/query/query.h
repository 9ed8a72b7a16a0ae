// The read side shared by the HTTP API and `faultline --db`: each function answers one question
// from the store as JSON (the documents in docs/api.md), so the CLI prints the same thing
// whichever way it reached the data. Blocking (store reads); thread-safe as the Store is.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "aggregator/ingest/connections.h"
#include "aggregator/ingest/refusals.h"
#include "aggregator/store/store.h"

namespace faultline::aggregator {

// "7d", "24h", "30m", "90s", "2w" (before now; a duration longer than the time since the epoch is
// the epoch) or an absolute timestamp. nullopt if unreadable.
std::optional<int64_t> parseSince(std::string_view text, int64_t now_ns);

struct QueryContext {
  Store& store;
  int64_t now_ns;
  int64_t agent_timeout_ns;  // heartbeat age past which an agent counts as not live
  // This process's agent connections (may be null): a host whose connection closed after its
  // last heartbeat is not live, whatever the heartbeat's age.
  const ConnectionTracker* connections = nullptr;
};

nlohmann::json queryJobs(const QueryContext& q, const JobFilter& filter);
// Job record + latest verdict summary + revision history; null when unknown.
nlohmann::json queryJob(const QueryContext& q, const std::string& job_id);
// The latest diagnosis exactly as `faultline attribute --json` prints it, plus a "verdict"
// object (revision, status, reason, created). Null when the job has no verdict.
nlohmann::json queryDiagnosis(const QueryContext& q, const std::string& job_id);
nlohmann::json queryNodes(const QueryContext& q);
// Node row, sources, history since `since_ns`, and its fleet standing over that window.
nlohmann::json queryNode(const QueryContext& q, const std::string& hostname, int64_t since_ns);
nlohmann::json querySymptoms(const QueryContext& q, const SymptomFilter& filter);
nlohmann::json queryAgents(const QueryContext& q);
// GET /agents/refusals: {"total": N, "refusals": [...]} (refusals.h), most recent first; `log`
// may be null (no ingest endpoint in this process): an empty list.
nlohmann::json queryRefusals(const RefusalLog* log);
nlohmann::json queryFleet(const QueryContext& q, int64_t since_ns, size_t min_jobs);

}  // namespace faultline::aggregator

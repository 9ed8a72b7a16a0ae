// The site relay's message (schema RelayBatch): what an edge site's aggregator forwards to the
// central one over the acked uplink (common/uplink/). Packed Cap'n Proto; decoding validates like
// decodeBatch (limits, NUL-free text, enums, timestamps) and never throws.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/symptom.h"
#include "common/wire.h"

namespace faultline::common {

struct RelayVerdictData {
  std::string job_id, state, exit_code;
  int64_t start_ns = 0, end_ns = 0;
  std::string nodelist;
  int64_t time_limit_sec = 0;
  uint32_t revision = 0;
  int64_t created_ns = 0;
  std::string status, reason;
  std::vector<std::string> missing_nodes;
  std::string diagnosis_json;  // empty when `confirms` is set
  uint32_t symptoms = 0;
  uint32_t confirms = 0;  // an earlier revision whose verdict (and diagnosis) this one repeats
  bool operator==(const RelayVerdictData&) const = default;
};

struct RelayNodeEventData {
  std::string node;
  int64_t time_ns = 0;
  std::string kind, detail, job_id;
  bool operator==(const RelayNodeEventData&) const = default;
};

struct RelayBatchData {
  std::string site_id;
  uint64_t sequence = 0;
  int64_t created_ns = 0;
  std::string aggregator_version, ruleset_version;
  std::vector<RelayVerdictData> verdicts;
  std::vector<RelayNodeEventData> node_events;
  std::vector<Symptom> symptoms;  // summaries
  std::vector<std::string> live_nodes;  // site nodes with a live agent at created_ns
  size_t items() const { return verdicts.size() + node_events.size() + symptoms.size(); }
};

std::string encodeRelayBatch(const RelayBatchData& batch);
// nullopt + reason ("empty", "too large", "malformed: ...", "NUL in text", "oversized <field>",
// "too many items", "missing site id", "bad revision", ...).
std::optional<RelayBatchData> decodeRelayBatch(const void* data, size_t size, std::string* reason,
                                               const DecodeLimits& limits = {});

}  // namespace faultline::common

// The agent <-> aggregator protocol over ZeroMQ (docs/wire-protocol.md).
//
// Every message is two frames: [type, payload].
//   "batch"     agent -> aggregator   payload: packed Cap'n Proto SymptomBatch (common/wire.h)
//   "heartbeat" agent -> aggregator   payload: packed Cap'n Proto Heartbeat
//   "ack"       aggregator -> agent   payload: agent id bytes + sequence (u64 little-endian)
// Pure functions; decoding never throws and validates sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/sources/source.h"

namespace faultline::agent {

inline constexpr std::string_view kTypeBatch = "batch";
inline constexpr std::string_view kTypeHeartbeat = "heartbeat";
inline constexpr std::string_view kTypeAck = "ack";

struct Ack {
  std::string agent_id;
  uint64_t sequence = 0;
};
std::string encodeAck(const Ack& ack);
std::optional<Ack> decodeAck(std::string_view payload);

struct HeartbeatData {
  std::string agent_id;
  std::string hostname;
  std::string boot_id;
  std::string agent_version;
  std::string ruleset_version;
  int64_t created_ns = 0;
  int64_t started_ns = 0;
  std::vector<SourceHealth> sources;
  std::string node;  // SourceStatus.node of each source
  uint64_t spool_batches = 0;
  uint64_t spool_bytes = 0;
  uint64_t dropped_symptoms = 0;
  uint64_t next_sequence = 0;
};
std::string encodeHeartbeat(const HeartbeatData& hb);
std::optional<HeartbeatData> decodeHeartbeat(std::string_view payload, std::string* reason);

}  // namespace faultline::agent

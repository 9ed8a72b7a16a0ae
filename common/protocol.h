// The agent <-> aggregator protocol over ZeroMQ (docs/wire-protocol.md).
//
// Every message is two frames: [type, payload].
//   "batch"     agent -> aggregator   payload: packed Cap'n Proto SymptomBatch (common/wire.h)
//   "heartbeat" agent -> aggregator   payload: packed Cap'n Proto Heartbeat
//   "ack"       aggregator -> agent   payload: agent id bytes + sequence (u64 little-endian)
// Shared by the agent and the aggregator. Pure functions; decoding never throws and validates
// sizes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>


namespace faultline::common {

// One log source's state as an agent reports it in heartbeats.
struct SourceHealth {
  std::string name;             // "journal", "kmsg", or the file path
  std::string format;           // common::formatName of what it reads
  std::string status = "ok";    // ok | error | partial
  std::string reason;           // why, when not ok
  uint64_t records = 0;         // records delivered since start
  uint64_t skipped = 0;         // unparsable / filtered out
  uint64_t lost = 0;            // known lost (kmsg ring-buffer overrun)
  int64_t lag_ns = 0;           // age of the newest record delivered when it was read (0 unknown)
};


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

}  // namespace faultline::common

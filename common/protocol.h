// The agent <-> aggregator protocol over ZeroMQ (docs/wire-protocol.md).
//
// Every message is two frames: [type, payload].
//   "batch"     agent -> aggregator   payload: packed Cap'n Proto SymptomBatch (common/wire.h)
//   "heartbeat" agent -> aggregator   payload: packed Cap'n Proto Heartbeat
//   "ack"       aggregator -> agent   payload: agent id bytes + sequence (u64 little-endian)
//   "relay"     site aggregator -> central   payload: packed Cap'n Proto RelayBatch, acked
// "batch+zstd" / "heartbeat+zstd": the same payload compressed as one zstd frame (agents with
// `compression: zstd`). Receivers accept both forms; unwrapPayload() undoes the suffix.
// Shared by the agent and the aggregator. Pure functions; decoding never throws and validates
// sizes (decompression is bounded: hostile input cannot make it allocate more than asked).
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
// A site relay's RelayBatch (common/relay_wire.h), acked like a batch; only from relay keys.
inline constexpr std::string_view kTypeRelay = "relay";
inline constexpr std::string_view kZstdSuffix = "+zstd";
inline constexpr std::string_view kTypeBatchZstd = "batch+zstd";
inline constexpr std::string_view kTypeHeartbeatZstd = "heartbeat+zstd";
// Largest payload a receiver inflates a "+zstd" frame to by default (the batch decoder's limit).
inline constexpr size_t kMaxInflatedBytes = 16 << 20;

// One zstd frame of `data` at `level` (1..19).
std::string compressZstd(std::string_view data, int level = 3);
// Inflates one or more zstd frames. nullopt + reason ("not zstd", "corrupt", "exceeds N bytes")
// when the input is not valid zstd or would inflate beyond max_bytes; never allocates more than
// max_bytes for the output (and a bounded window) whatever the frame header claims.
std::optional<std::string> decompressZstd(std::string_view data, size_t max_bytes, std::string* reason);

// For a receiver: maps a frame type to its base type ("batch+zstd" -> "batch", "batch" ->
// "batch") and returns the plain payload (inflated when the type has the "+zstd" suffix).
// nullopt + reason when inflating fails. `plain` receives the payload view when no copy is
// needed (uncompressed); the returned string is then empty and `*plain` must be used.
struct UnwrappedPayload {
  std::string_view type;     // base type, a view into the given type
  std::string_view payload;  // the plain payload: into the input, or into `inflated`
  std::string inflated;      // owns the bytes when the frame was compressed
  UnwrappedPayload() = default;
  UnwrappedPayload(const UnwrappedPayload&) = delete;
  UnwrappedPayload& operator=(const UnwrappedPayload&) = delete;
};
bool unwrapPayload(std::string_view type, std::string_view payload, UnwrappedPayload* out, std::string* reason,
                   size_t max_bytes = kMaxInflatedBytes);

struct Ack {
  std::string agent_id;
  uint64_t sequence = 0;
};
std::string encodeAck(const Ack& ack);
std::optional<Ack> decodeAck(std::string_view payload);

// The node's devices as the agent found them (nvidia-smi, /sys/class/infiniband). PCI ids are
// normalised like Symptom.device ("0000:18:00.0") so an Xid's device maps straight to a GPU.
struct GpuInfo {
  uint32_t index = 0;
  std::string pci_bus_id;
  std::string uuid;
  std::string serial;  // "" when nvidia-smi prints [N/A]
  bool operator==(const GpuInfo&) const = default;
};

struct HcaPortInfo {
  std::string name;         // mlx5_0
  std::string pci_address;  // 0000:0c:00.0
  uint32_t port = 0;
  std::string state;        // ACTIVE, DOWN, INIT, ... (without the "4: " prefix)
  std::string link_layer;   // InfiniBand | Ethernet
  bool operator==(const HcaPortInfo&) const = default;
};

struct NodeInventory {
  int64_t collected_ns = 0;
  std::vector<GpuInfo> gpus;
  std::vector<HcaPortInfo> hcas;
  std::string gpu_error;  // why the GPU list may be incomplete ("" = read fine)
  std::string hca_error;
  // IPv4 and IPv6 addresses of the node's non-loopback interfaces (link-local IPv6 left out),
  // as inet_ntop prints them, sorted: where the peer an NCCL/verbs error names is. Empty from an
  // agent that does not send them.
  std::vector<std::string> addresses;
  // Same devices, addresses and errors; the collection time is ignored.
  bool sameDevices(const NodeInventory& o) const {
    return gpus == o.gpus && hcas == o.hcas && gpu_error == o.gpu_error && hca_error == o.hca_error &&
           addresses == o.addresses;
  }
};
// A stable 64-bit hash of the devices, addresses and errors (not the time), never 0. An inventory
// without addresses hashes as it did before they were added.
uint64_t inventoryHash(const NodeInventory& inv);

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
  std::optional<NodeInventory> inventory;  // carried only when it changed (or every Nth beat)
  uint64_t inventory_hash = 0;             // the current inventory's hash, in every heartbeat
};
// What decodeHeartbeat allows: payload bytes, and words traversed (capnp::ReaderOptions; the
// nesting limit is capnp's default).
inline constexpr size_t kMaxHeartbeatBytes = 1 << 20;
inline constexpr uint64_t kHeartbeatTraversalWords = 1 << 20;
std::string encodeHeartbeat(const HeartbeatData& hb);
// nullopt + reason ("empty", "too large", "malformed: …", "NUL in text") when refused; like
// decodeBatch, an accepted heartbeat holds no NUL byte in any text.
std::optional<HeartbeatData> decodeHeartbeat(std::string_view payload, std::string* reason);

}  // namespace faultline::common

// Cap'n Proto encoding of what crosses the wire (common/schema/faultline.capnp): symptom
// batches from agents, diagnoses. Encoding is packed. Decoding validates: it never throws to
// the caller, and reports a reason for anything it refuses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/diagnosis.h"
#include "common/symptom.h"

namespace faultline::common {

struct BatchHeader {
  std::string agent_id;
  std::string hostname;
  std::string boot_id;
  uint64_t sequence = 0;
  std::string agent_version;
  std::string ruleset_version;
  int64_t created_ns = 0;
};

// One template of a node's error lines no rule matched, since the agent's previous batch
// (schema UnmatchedTemplate; issue 30, agent/unmatched_templates.h).
struct UnmatchedTemplate {
  std::string text;        // the masked template
  uint64_t count = 0;      // lines since the previous batch (>= 1)
  std::string first_line;  // the first of them, cut
  int64_t first_ns = 0;    // its stamp (UTC ns), else when the agent read it
  bool time_known = false;
  SourceKind kind = SourceKind::kApplication;
};

struct SymptomBatchData {
  BatchHeader header;
  std::vector<Symptom> symptoms;
  std::vector<CoverageEntry> sources;
  std::vector<UnmatchedTemplate> unmatched;
  uint64_t unmatched_left_out = 0;        // templates over the agent's per-batch bound
  uint64_t unmatched_lines_left_out = 0;  // ... and their lines
};

// Packed Cap'n Proto bytes of a SymptomBatch.
std::string encodeBatch(const SymptomBatchData& batch);

struct DecodeLimits {
  size_t max_bytes = 16 << 20;
  uint64_t traversal_words = 8 << 20;
  int nesting = 16;
  size_t max_symptoms = 100000;
  size_t max_text = 64 << 10;
  // Per-node lists (a batch's or heartbeat's sources, a node's GPUs and HCA ports). Cap'n Proto
  // charges a list of zero-sized structs one traversal word per element, so a 1 MiB message can
  // claim millions of empty entries, each decoding to several strings: bounded explicitly.
  size_t max_node_list = 4096;
  // A symptom's fields (a rule's named captures and constants: 15 at most in rules/ today). Empty
  // fields cost a packed message next to nothing: fuzz_relay found 589 bytes that decoded to
  // millions of them (0.2 s of the ingest thread; 8 s under ASan). Bounded explicitly.
  size_t max_fields = 256;
  // A batch's unmatched templates (an agent ships 32 by default).
  size_t max_unmatched = 4096;
};

// Decodes and validates. On failure returns nullopt and a short reason ("truncated",
// "too large", "bad enum", "bad timestamp", "NUL in text", ...). Every text field of an accepted
// batch is free of NUL bytes, so it survives encodeBatch and storage unchanged.
std::optional<SymptomBatchData> decodeBatch(const void* data, size_t size, std::string* reason,
                                            const DecodeLimits& limits = {});

}  // namespace faultline::common

// Reads a bundle folder (docs/bundle-format.md) into the job, the symptoms of all its nodes and
// the coverage report, using the same parsers, rule engine and aggregation as the agent.
//
// Blocking file I/O on the calling thread. Never throws on bad logs: unreadable, binary or
// truncated files show up in coverage; a missing or broken job description (job.json, sacct.json
// or kube/, kube_job.h) is an error.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/diagnosis.h"
#include "common/job.h"
#include "common/rule_engine.h"
#include "common/parse/stream_parser.h"
#include "common/symptom.h"
#include "common/unrecognized.h"

namespace faultline::offline {

struct GpuInfo {
  int index = -1;
  std::string pci;  // normalised
  std::string uuid;
  std::string serial;
};

struct NodeInfo {
  std::optional<int64_t> boot_time_ns;
  std::string boot_id;
  // The node's zone for local wall-clock stamps (node.json "timezone" / "utc_offset"); null
  // when node.json says nothing, and then the job's zone or UTC is assumed.
  std::shared_ptr<const common::TimeZone> zone;
  std::string zone_source;  // "node.json timezone", ...
  std::vector<GpuInfo> gpus;
  // node.json "gpus" array's size when the key is there (a node listing fewer GPUs than its
  // peers lost one before the job); nullopt when node.json does not list GPUs.
  std::optional<int> gpu_count;
  std::map<int, int> local_rank_to_gpu;
  // node.json "nvswitches" (a count) or "nvswitch" (true/false); nullopt when not stated.
  std::optional<bool> nvswitch;
  // node.json "ip" (a string) and/or "addresses" (a list): where peers' errors point.
  std::vector<std::string> addresses;
};

struct Bundle {
  common::JobInfo job;
  std::vector<common::Symptom> symptoms;  // aggregated per (rule, node, device, boot)
  std::vector<common::CoverageEntry> coverage;
  std::map<std::string, NodeInfo> nodes;
  // Issue 30: the templates of the error lines no rule matched (BundleOptions::mine_unmatched),
  // and which nodes have logs of which kind (a file of that kind with records).
  std::vector<common::TemplateSighting> unmatched;
  std::map<common::SourceKind, std::set<std::string>> covered_by_kind;
  // The latest time of a record the parsers handed on (rule literal or error word); 0 if none.
  int64_t last_record_ns = 0;
};

struct BundleOptions {
  int64_t aggregation_window_ns = 300'000'000'000;
  size_t read_chunk = 64 << 10;
  std::string zoneinfo_dir = "/usr/share/zoneinfo";  // the tz database (tzdata)
  // Records holding an error word that no rule matched go to one template miner for the whole
  // bundle (Bundle::unmatched); the parsers then also hand on records with an error-lexicon word.
  bool mine_unmatched = true;
  common::UnmatchedLinesOptions unmatched;
};

// A zone from a tz database name ("Europe/Berlin", read from `zoneinfo_dir`), an offset
// ("+02:00", "-0500", "UTC") or a number (seconds east of UTC; |n| <= 14 is read as hours).
// nullptr and *error set when it cannot be resolved.
std::shared_ptr<const common::TimeZone> resolveTimeZone(const std::string& spec, std::string* error,
                                                        const std::string& zoneinfo_dir = "/usr/share/zoneinfo");

// This machine's zone (its /etc/localtime rules), for logs written where the CLI runs (the
// epilog's job output); nullptr when the file is missing or unreadable.
std::shared_ptr<const common::TimeZone> systemTimeZone(const std::string& path = "/etc/localtime");

// Errors that make the bundle unusable (no job description) return nullopt and set *error.
std::optional<Bundle> loadBundle(const std::string& dir, const common::RuleEngine& engine,
                                 std::string* error, const BundleOptions& options = {});

// Scans one log file (format auto-detected) and returns its symptoms; used by `faultline scan`
// and the benchmark. `records` receives the number of records parsed.
struct ScanResult {
  std::vector<common::Symptom> symptoms;
  common::CoverageEntry coverage;
};
// `unmatched`: when set, records holding an error word that no rule matched go there too (as in
// loadBundle; the benchmark measures that cost).
ScanResult scanFile(const std::string& path, const std::string& node, const common::RuleEngine& engine,
                    const common::ParseOptions* parse_options = nullptr, bool aggregate = true,
                    common::UnmatchedLines* unmatched = nullptr);

// One job-wide log (the job's output file) read as loadBundle reads it: format detected, ranks
// placed on nodes through `node_of_rank` (may be empty), identical symptoms merged within the
// bundle's aggregation window. `node` is "" unless the file is one node's. Used by
// `faultline job output`, so the aggregator judges the same symptoms `attribute` would.
// `unmatched`: when set, the error lines no rule matched go there too (with their node: the
// file's, else the rank's, else `sole_node`, a one-node job's), as loadBundle mines them.
ScanResult scanJobLog(const std::string& path, const std::string& node,
                      std::function<std::string(int)> node_of_rank, const common::RuleEngine& engine,
                      const common::ParseOptions& parse_options, const BundleOptions& options = {},
                      common::UnmatchedLines* unmatched = nullptr, const std::string& sole_node = "");

}  // namespace faultline::offline

// The symptoms of a sample bundle's nodes as real agents would ship them, for the aggregator load
// bench (bench/aggregator_load.cpp). Runs the same parsers, rule engine and SymptomAggregator the
// agent runs over the sample's node logs (dmesg, journal, ...) and its job-wide rank output (an
// agent following the job's output on each node sees its own ranks' lines), then groups the
// aggregated symptoms by node. Uses faultline_common only: no aggregator code.
//
// Blocking file I/O on the calling thread; errors are returned, never thrown.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/job.h"
#include "common/protocol.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "common/symptom.h"

namespace faultline::bench {

struct CascadeSample {
  common::JobInfo job;
  // From expected.json ("" when the sample has none): the node and rule the verdict must blame.
  std::string expected_node;
  std::string expected_rule;
  std::string expected_sub_domain;
  std::map<std::string, std::vector<common::Symptom>> by_node;  // aggregated, sorted by first_ns
  std::map<std::string, common::NodeInventory> inventory;      // from node.json
};

// Reads DIR/job.json, DIR/expected.json, DIR/nodes/HOST/* and DIR/* (rank output).
std::optional<CascadeSample> loadCascadeSample(const std::string& dir, const common::RuleEngine& engine,
                                               std::string* error);

// What every bench starts with: the rules of `rules_dir` (into *rules) and the sample of `dir`
// run through them. nullopt + *error (every rule error, one per line, or the sample's) on failure.
std::optional<CascadeSample> loadCascadeSampleWithRules(const std::string& dir, const std::string& rules_dir,
                                                        std::shared_ptr<const common::RuleSet>* rules,
                                                        std::string* error);

// A copy of `s` as seen on `host` instead of `sample_host`: node, and the host name inside
// evidence, summary and fields, rewritten; timed symptoms moved by `shift_ns`.
common::Symptom moveSymptom(const common::Symptom& s, const std::string& sample_host, const std::string& host,
                            int64_t shift_ns);

}  // namespace faultline::bench

// Offline attribution of a bundle: load -> ship through the wire codec as per-node batches
// (exactly what an agent would send) -> correlate. Blocking, single-threaded.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/offline/bundle.h"
#include "common/correlator.h"
#include "common/diagnosis.h"
#include "common/rule_engine.h"

namespace faultline::offline {

// More evidence for the job once its description is known — metric symptoms from a PromQL
// endpoint (aggregator/evidence/prometheus.h): appended to the bundle's symptoms and coverage.
using EvidenceSource = std::function<void(const common::JobInfo& job, std::vector<common::Symptom>* symptoms,
                                          std::vector<common::CoverageEntry>* coverage)>;

// `baselines`: bundles of the same workload's good runs (`--baseline`): templates their logs hold
// are not unusual in this one (Diagnosis::unrecognized, common/unrecognized.h). An unreadable
// baseline is an error.
std::optional<common::Diagnosis> attributeBundle(const std::string& dir, const common::RuleEngine& engine,
                                                 std::string* error,
                                                 const common::CorrelatorOptions& options = {},
                                                 const EvidenceSource& more = {},
                                                 const std::vector<std::string>& baselines = {});

// The failure-indicating lines of a loaded bundle (what `attribute` puts in `unrecognized` and
// `rules suggest` turns into skeletons), judged against the baselines' templates. Loads each
// baseline; nullopt with *error set when one cannot be read.
std::optional<std::vector<common::UnrecognizedLine>> failureIndicatingLines(
    const Bundle& bundle, const common::RuleEngine& engine, const std::vector<std::string>& baselines,
    std::string* error, common::UnusualContext* context_out = nullptr);

// `faultline rules suggest`: the failure-indicating lines of `bundles` (judged against
// `baselines`) as YAML rule skeletons (common/rule_skeleton.h), with the bundles named. Writes
// nothing. nullopt with *error set when a bundle or baseline cannot be read.
std::optional<std::string> suggestRules(const std::vector<std::string>& bundles,
                                        const std::vector<std::string>& baselines,
                                        const common::RuleEngine& engine, std::string* error);

}  // namespace faultline::offline

// Offline attribution of a bundle: load -> ship through the wire codec as per-node batches
// (exactly what an agent would send) -> correlate. Blocking, single-threaded.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "aggregator/offline/bundle.h"
#include "common/correlator.h"
#include "common/diagnosis.h"
#include "common/rule_engine.h"

namespace faultline::offline {

// More evidence for the job once its description is known — metric symptoms from a PromQL
// endpoint (aggregator/evidence/prometheus.h): appended to the bundle's symptoms and coverage.
using EvidenceSource = std::function<void(const common::JobInfo& job, std::vector<common::Symptom>* symptoms,
                                          std::vector<common::CoverageEntry>* coverage)>;

std::optional<common::Diagnosis> attributeBundle(const std::string& dir, const common::RuleEngine& engine,
                                                 std::string* error,
                                                 const common::CorrelatorOptions& options = {},
                                                 const EvidenceSource& more = {});

}  // namespace faultline::offline

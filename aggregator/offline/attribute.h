// Offline attribution of a bundle: load -> ship through the wire codec as per-node batches
// (exactly what an agent would send) -> correlate. Blocking, single-threaded.
#pragma once

#include <optional>
#include <string>

#include "aggregator/offline/bundle.h"
#include "common/correlator.h"
#include "common/diagnosis.h"
#include "common/rule_engine.h"

namespace faultline::offline {

std::optional<common::Diagnosis> attributeBundle(const std::string& dir, const common::RuleEngine& engine,
                                                 std::string* error,
                                                 const common::CorrelatorOptions& options = {});

}  // namespace faultline::offline

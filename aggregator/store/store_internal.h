// Shared by the store's translation units (store.cpp, batch_ingest.cpp); not part of its interface.
#pragma once

#include <string>
#include <string_view>

#include "aggregator/store/store.h"

namespace faultline::aggregator {

// The checks of a batch that need no store: "" when it may be stored, else the reason.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
IngestResult rejectedResult(std::string reason);

}  // namespace faultline::aggregator

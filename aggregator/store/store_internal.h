// Shared by the store's translation units (store.cpp, batch_ingest.cpp); not part of its interface.
#pragma once

#include <string>
#include <string_view>

#include "aggregator/store/store.h"

namespace faultline::aggregator {

// The checks of a batch that need no store: "" when it may be stored, else the reason.
std::string batchCheck(const common::SymptomBatchData& batch, std::string_view authenticated_agent);
IngestResult rejectedResult(std::string reason);

// The verdict's window read (Store::symptomsForWindow) of `columns`: the symptoms of the nodes in
// `node_set` (a Db's jsonList(1)) timed inside [?2, ?3], or untimed and received inside [?2, ?4],
// in node order. Migration 6's index answers it without the table for id and node.
std::string windowQuery(std::string_view columns, std::string_view node_set);

}  // namespace faultline::aggregator

// The store's schema, as numbered migrations: entry i brings user_version i to i+1. Append only;
// never edit a migration that has shipped.
#pragma once

#include <cstddef>

namespace faultline::aggregator {

extern const char* const kStoreMigrations[];
extern const size_t kStoreMigrationCount;

}  // namespace faultline::aggregator

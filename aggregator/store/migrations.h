// The store's schema, as numbered migrations: entry i brings user_version i to i+1 (SQL as SQLite
// reads it, Db::ddl for PostgreSQL; "" for a migration that only rewrites rows, which
// MaintenanceStore::migrate runs in the same transaction). Append only; never edit a migration
// that has shipped.
#pragma once

#include <cstddef>

namespace faultline::aggregator {

extern const char* const kStoreMigrations[];
extern const size_t kStoreMigrationCount;

}  // namespace faultline::aggregator

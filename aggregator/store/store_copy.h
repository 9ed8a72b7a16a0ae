// `faultline store migrate`: copies a whole store into another one — typically a SQLite file into
// a PostgreSQL database (docs/operations.md) — keeping every row and id.
//
// Both stores are first opened as a Store, which migrates each to the latest schema (the source
// file is upgraded in place, as the aggregator would on its next start). Then every table of the
// source is copied row by row with bound parameters, in multi-row INSERTs, all in ONE transaction
// on the target (a failure leaves the target as it was); the source is read in one read
// transaction (a consistent snapshot). Identity columns of a PostgreSQL target get their
// sequences advanced past the copied ids, so new rows get fresh ids. The target must hold no data
// yet (only meta rows, which the source's overwrite): copying into a store that already has jobs
// or symptoms would mix two histories. Stop the aggregator writing the source first: rows it
// stores after the snapshot are not copied.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"

namespace faultline::aggregator {

struct StoreCopyTable {
  std::string name;
  uint64_t rows = 0;  // copied (= the source's, checked on the target before the commit)
};

struct StoreCopyResult {
  int source_schema = 0;  // the source's schema version before it was opened (0 = new/empty)
  int schema = 0;         // the latest, which both stores are at now
  std::vector<StoreCopyTable> tables;
  uint64_t sequences = 0;  // identity sequences advanced on the target
};

// `from` and `to`: a SQLite path (optionally "sqlite:PATH") or a postgresql:// URL. The source
// must exist. nullopt + *error (passwords redacted) on failure; the target is then unchanged.
std::optional<StoreCopyResult> copyStore(const std::string& from, const std::string& to, const common::Clock& clock,
                                         std::string* error);

}  // namespace faultline::aggregator

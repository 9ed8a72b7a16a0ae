// The store's unmatched-template table (issue 30, evidence without rules): what agents ship of
// the error lines no rule matched (common::UnmatchedTemplate, one row per template and batch),
// read back per job window for its verdict (aggregator/verdicts/live_unrecognized.h), and the
// job rows' workload (name, user, partition) that finds a job's baseline runs.
//
// Table unmatched_templates (migration 8): node, seen_ns (the line's stamp, else the agent's read
// time), time_known, received_ns, source_kind, count, template, first_line. Written in the
// transaction that stores the batch (a resent batch is a duplicate and writes nothing), pruned
// with the symptoms (Store::pruneStep, by received_ns). The Store methods that use it are declared
// in store.h and defined in template_store.cpp; same rules as store.cpp: bound parameters only,
// errors returned, never thrown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/unrecognized.h"
#include "common/wire.h"

namespace faultline::aggregator {

namespace sql {
class Db;
}

// A job's workload: what makes two jobs runs of the same thing (Slurm's job name, user and
// partition). A job without a name has none.
struct JobWorkload {
  std::string name, user, partition;
  bool empty() const { return name.empty(); }
};

// One node's template as stored, summed over the rows of a window: `t.count` is the sum,
// t.first_line / t.first_ns those of its earliest row, last_ns the latest row's time (timed rows
// and untimed ones apart).
struct UnmatchedSighting {
  std::string node;
  common::UnmatchedTemplate t;
  int64_t last_ns = 0;
  // A job output's template (unset for an agent's): seen before its file's last lines.
  std::optional<bool> early;
};

// A job output's templates (JobOutput::unmatched: `faultline job output` mines the job's output
// file as `attribute` mines a bundle's) as JSON, in the upload's body and the job_outputs row:
// [{"template", "count", "nodes": {NODE: lines} ("" for lines of no known node), "first_line",
// "first_node", "first_ns" (absent: no stamped line), "early", "kind"}].
nlohmann::json outputTemplatesToJson(const std::vector<common::TemplateSighting>& templates);
// Read back and validated as hostile input (bounded counts and lengths, no NUL, known kinds):
// nullopt and *error on the first bad entry.
constexpr size_t kMaxOutputTemplates = 4096;
std::optional<std::vector<common::TemplateSighting>> outputTemplatesFromJson(const nlohmann::json& j,
                                                                             std::string* error);

// Inserts the unmatched templates of `batches` (all stored now, in this transaction) with their
// batch's hostname. false on a store error (Db::errmsg() says which).
bool insertUnmatchedTemplates(sql::Db& db, const std::vector<const common::SymptomBatchData*>& batches,
                              int64_t received_ns);

}  // namespace faultline::aggregator

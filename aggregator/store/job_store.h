// The jobs and what was uploaded for them. Owns the tables jobs, job_nodes and job_outputs
// (job_store.cpp; workloadBaselines in template_store.cpp). Part of the Store facade (store.h):
// every method takes the write connection's lock (store_core.h) for one short transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class JobStore : protected StorePart {
 public:
  // Merges a job update; returns the merged row (nullopt + *error on a bad update).
  std::optional<JobRow> recordJob(const JobUpdate& update, std::string* error);
  std::optional<JobRow> job(const std::string& job_id);
  // Relayed jobs whose site-local id is `local_id` ("edge1:4242" for "4242"), at most `limit`:
  // what an operator at the central probably meant by a bare id.
  std::vector<std::string> relayedJobIds(const std::string& local_id, size_t limit = 5);
  std::vector<JobRow> jobs(const JobFilter& filter);
  // Ended jobs in a failure state that have no verdict yet, oldest end first.
  std::vector<JobRow> jobsAwaitingVerdict(size_t limit = 100);
  // Jobs on `node` whose window [start - pre, end + post] (end open while running) overlaps
  // [from_ns, to_ns]: how a symptom maps to the jobs it may concern. `site`: "" for this
  // aggregator's own jobs; a site's name for the jobs relayed from it (its relayed symptoms map to
  // those, under their central ids "SITE:JOBID").
  std::vector<std::string> jobsAt(const std::string& node, int64_t from_ns, int64_t to_ns, int64_t pre_ns,
                                  int64_t post_ns, const std::string& site = "");
  // This aggregator's own jobs on `node` that ended in [from_ns, to_ns] on its own clock: when it
  // recorded the end (end_recorded_ns), else the job's own end time (rows from before that column;
  // VerdictEngine's endedAt reads a row the same way). The jobs a change at a time on this clock (a
  // source's coverage beginning) can concern, whatever clock the jobs' own times were written in.
  std::vector<std::string> jobsEndedOnNodeBetween(const std::string& node, int64_t from_ns, int64_t to_ns);
  // Earlier successful jobs of `job`'s workload (same name, user and partition, same site) that
  // ended in [since_ns, job's end] and all of whose nodes had an agent by then; newest first, at
  // most `limit`. None when the job has no workload name.
  std::vector<JobRow> workloadBaselines(const JobRow& job, int64_t since_ns, size_t limit);

  // Job-wide output (see JobOutput): stores or replaces (job, source). Job ids need not be known
  // yet: the epilog may upload the output before the job's end is recorded.
  bool putJobOutput(const JobOutput& output, std::string* error);
  std::vector<JobOutput> jobOutputs(const std::string& job_id);
  // Jobs with an output stored after row `after_id`; *newest_id gets the highest row id.
  std::vector<std::string> jobsWithOutputSince(int64_t after_id, int64_t* newest_id);

 protected:
  explicit JobStore(StoreCore& core) : StorePart(core) {}

 private:
  std::optional<JobRow> jobLocked(const std::string& job_id);
};

}  // namespace faultline::aggregator

// Reads for the dashboard (docs/dashboard.md) that the Store's own queries do not answer: a page
// of jobs with a total count and rule/text filters, failures per node and day, and the nodes of
// recent jobs. A second, read-only SQLite connection to the aggregator's file (WAL: it never
// blocks the writer, nor waits for it); bound parameters only.
//
// The latest verdict of each job (sub_domain, cause rule and summary, blamed nodes) is kept in a
// cache in the connection's in-memory temp schema, brought up to date before every read from the
// verdicts_latest index: only revisions made since the last read are parsed. So a page of
// 100,000 jobs never reads the stored diagnoses except the ones it shows.
//
// Threading: one UiReader per thread (the HTTP API's io_context thread).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

namespace faultline::aggregator {

namespace sql {
class Db;
class Stmt;
}

struct JobPageFilter {
  int64_t since_ns = 0;    // ended (or started, if running) at or after
  std::string state;       // as GET /jobs: terminal state, Slurm word, "running", "failed"
  std::string sub_domain;  // of the latest verdict
  std::string node;        // ran on this node
  std::string blamed;      // the latest verdict names this node responsible
  std::string rule;        // the latest verdict's cause rule: exact, or a prefix ending in '*'
  std::string text;        // case-insensitive substring of the job id, its node names, sub_domain,
                           // cause rule or cause summary
  size_t limit = 50;
  size_t offset = 0;
};

class UiReader {
 public:
  // `scan_above`: more revisions than this to bring into the cache at once are read in one pass
  // over the verdicts table rather than one lookup each (the first read after a start).
  static std::unique_ptr<UiReader> open(const std::string& path, std::string* error, size_t scan_above = 1000);
  ~UiReader();

  // Jobs newest first (the GET /jobs row shape, the verdict summary extended with `responsible`
  // [{node, device, confidence}] and `summary`); *total = every job the filter matches.
  std::optional<nlohmann::json> jobs(const JobPageFilter& f, int64_t* total, std::string* error);
  // Failed jobs with a verdict that ended in [since, now], per UTC day (from the first such day to
  // the last, at most 120): per blamed node (the
  // `max_nodes` most blamed) and per sub_domain. docs/api.md, GET /fleet/daily.
  std::optional<nlohmann::json> daily(int64_t since_ns, int64_t now_ns, size_t max_nodes, std::string* error);
  // Nodes of jobs that ended (or started, if running) since `since_ns`: {node, jobs, last_job_id}.
  std::optional<nlohmann::json> jobNodes(int64_t since_ns, std::string* error);

 private:
  UiReader(std::unique_ptr<sql::Db> db, size_t scan_above);
  bool sync(std::string* error);
  struct CacheWriter;  // ui_reader.cpp
  std::optional<bool> unchangedSinceSync(std::string* error);
  void dropGone(const std::unordered_map<std::string, int64_t>& latest, CacheWriter& w);
  bool cacheRevision(const std::string& job, int64_t revision, sql::Stmt& row, CacheWriter& w, std::string* error);
  template <typename F>
  auto withSnapshot(std::string* error, F&& read) -> decltype(read());
  std::optional<nlohmann::json> jobsLocked(const JobPageFilter& f, int64_t* total, std::string* error);
  std::optional<nlohmann::json> dailyLocked(int64_t since_ns, int64_t now_ns, size_t max_nodes, std::string* error);

  std::unique_ptr<sql::Db> db_;
  size_t scan_above_;
  std::unordered_map<std::string, int64_t> cached_;  // job -> revision in temp.ui_latest
  std::optional<int64_t> data_version_;              // of the store when cached_ was synced
};

}  // namespace faultline::aggregator

// Store helpers for the aggregator core tests (test_util.h is shared with the agent's tests, which
// do not link the store).
#pragma once

#include <sqlite3.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

#include "aggregator/store/db.h"
#include "aggregator/store/store.h"

namespace faultline::aggregator::testing {

// Runs SQL on a SQLite store's file through a second connection (the store holds no transaction).
inline void execOn(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* msg = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &msg);
  INFO((msg ? msg : ""));
  sqlite3_free(msg);
  sqlite3_close(db);
  REQUIRE(rc == SQLITE_OK);
}

// The store a test opens for `path`: the SQLite file itself, or — when FAULTLINE_TEST_PG names a
// PostgreSQL server (the `[pg]` runs of the store tests: tests/CMakeLists.txt starts one in a
// temp dir) — a database of its own on that server, the same one for the same path (a test
// that reopens its store finds its rows). The URL is postgresql:///postgres?host=DIR&port=P...
inline std::string storeTarget(const std::string& path) {
  const char* base = std::getenv("FAULTLINE_TEST_PG");
  if (!base || !*base) return path;
  std::string url(base);
  std::string name = "t" + std::to_string(std::hash<std::string>{}(path));
  std::string error;
  auto admin = sql::Db::open(url, false, &error);
  INFO(error);
  REQUIRE(admin);
  sql::Stmt exists(admin->get(), "SELECT 1 FROM pg_database WHERE datname = ?");
  exists.bind(1, name);
  if (exists.step() != sql::kRow) REQUIRE(admin->exec("CREATE DATABASE " + name, &error));
  size_t at = url.find("/postgres?");
  REQUIRE(at != std::string::npos);
  return url.replace(at, 9, "/" + name);
}

inline std::unique_ptr<Store> openStore(const std::string& path, const Clock& clock) {
  std::string error;
  auto store = Store::open(storeTarget(path), clock, {}, &error);
  INFO(error);
  REQUIRE(store);
  return store;
}

// The job update that records `job` (e.g. a sample bundle's job.json) under the id `id`.
inline JobUpdate jobUpdateOf(const common::JobInfo& job, const std::string& id) {
  JobUpdate u;
  u.job_id = id;
  u.state = job.state;
  u.exit_code = job.exit_code;
  u.start_ns = job.start_ns;
  u.end_ns = job.end_ns;
  u.nodes = job.nodes;
  u.time_limit_sec = job.time_limit_sec;
  u.ntasks_per_node = job.ntasks_per_node;
  return u;
}

// Records a job (start/end 0 and nodes "" keep what is stored) as the prolog/epilog would.
inline void recordTestJob(Store& store, const std::string& id, const std::string& nodes, int64_t start, int64_t end,
                          const std::string& state, const JobWorkload& workload = {}) {
  JobUpdate u;
  u.job_id = id;
  u.nodelist = nodes;
  u.start_ns = start;
  u.end_ns = end;
  u.state = state;
  u.source = "test";
  u.workload = workload;
  std::string error;
  auto row = store.recordJob(u, &error);
  INFO(error);
  REQUIRE(row);
}

}  // namespace faultline::aggregator::testing

// Which aggregator replica does the work that must happen once (verdict evaluation and revisions,
// the sacct poll, the site relay, pruning). Every replica ingests and serves the API; one leads.
//
// SQLite: the store is one process's file, so that process always leads. PostgreSQL: the leader
// is the replica whose own session (a connection used for nothing else) holds the advisory lock
// kLeaderLockKey. A replica that dies loses its session and with it the lock; the next poll of
// another replica takes it. A leader confirms the lock on every poll and steps down when it cannot
// (its session broke, the server restarted): it never leads on a lock it may have lost.
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace faultline::aggregator {

namespace sql {
class Db;
}

inline constexpr long long kLeaderLockKey = 7146602;

class Leadership {
 public:
  // `target` as given to Store::open. No connection is made yet (the first poll makes it).
  explicit Leadership(std::string target);
  ~Leadership();
  Leadership(const Leadership&) = delete;
  Leadership& operator=(const Leadership&) = delete;

  // Takes the lock if free, or confirms it is still held; returns whether this replica leads.
  // Blocks for at most one short query (or one connection attempt). *error: why it cannot lead.
  bool poll(std::string* error = nullptr);
  // The state after the last poll (any thread); false before the first, also for SQLite.
  bool leader() const { return leader_.load(std::memory_order_acquire); }
  bool shared() const { return shared_; }  // several replicas possible (PostgreSQL)

 private:
  std::string target_;
  bool shared_;
  std::unique_ptr<sql::Db> db_;
  std::atomic<bool> leader_{false};
};

}  // namespace faultline::aggregator

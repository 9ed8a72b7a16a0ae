#include "aggregator/store/leader.h"

#include <fmt/format.h>

#include "aggregator/store/db.h"

namespace faultline::aggregator {

Leadership::Leadership(std::string target) : target_(std::move(target)), shared_(sql::isPostgresUrl(target_)) {}

Leadership::~Leadership() = default;

bool Leadership::poll(std::string* error) {
  if (!shared_) {  // the first poll makes the only process the leader (main starts the relay then)
    leader_.store(true, std::memory_order_release);
    return true;
  }
  auto lose = [&](std::string why) {
    if (error) *error = std::move(why);
    db_.reset();  // closing the session releases the lock if the server still thought it held
    leader_.store(false, std::memory_order_release);
    return false;
  };
  if (!db_) {
    std::string why;
    db_ = sql::Db::open(target_, false, &why);
    if (!db_) return lose("leader lock: " + why);
  }
  if (leader_.load(std::memory_order_relaxed)) {
    // Still ours on this very session? (A reconnect made a new session without it.)
    sql::Stmt held(db_->get(),
                   fmt::format("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND "
                               "objid = {} AND objsubid = 1 AND granted AND pid = pg_backend_pid()",
                               kLeaderLockKey));
    if (held.step() != sql::kRow) return lose("leader lock: " + db_->errmsg());
    if (held.i64(0) == 1) return true;
    return lose("leader lock: no longer held by this session");
  }
  sql::Stmt take(db_->get(), fmt::format("SELECT pg_try_advisory_lock({})", kLeaderLockKey));
  if (take.step() != sql::kRow) return lose("leader lock: " + db_->errmsg());
  bool got = take.i64(0) == 1;
  leader_.store(got, std::memory_order_release);
  return got;
}

}  // namespace faultline::aggregator

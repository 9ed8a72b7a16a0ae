// Verdicts and their revisions. Owns the table verdicts (verdict_store.cpp; the relay's trigger on
// it and relay_pending belong to relay_store). Part of the Store facade (store.h).
//
// Locking (store_core.h): addVerdict writes on the write connection under its lock; every read
// here goes to the verdict reader connection under its own lock, so it never waits for a symptom
// group commit (tests/aggregator/core/store_split_test.cpp holds a group open and reads).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class VerdictStore : protected StorePart {
 public:
  // Appends revision n+1 (history kept); returns the revision number, 0 on failure.
  int addVerdict(const VerdictRow& v, std::string* error);
  std::optional<VerdictRow> latestVerdict(const std::string& job_id);
  std::vector<VerdictRow> verdictHistory(const std::string& job_id);
  // Latest revision of every job whose latest verdict is provisional.
  std::vector<VerdictRow> openVerdicts();
  // The same two without the diagnosis (VerdictHead).
  std::optional<VerdictHead> latestVerdictHead(const std::string& job_id);
  std::vector<VerdictHead> openVerdictHeads();
  // Latest revision of every job that ended in [since, until].
  std::vector<VerdictRow> latestVerdicts(int64_t since_ns, int64_t until_ns);

 protected:
  explicit VerdictStore(StoreCore& core) : StorePart(core) {}

 private:
  // The connection verdict reads use, and the lock that guards it (the reader's, else the write
  // connection's): held for as long as the ReadLock lives.
  class ReadLock {
   public:
    explicit ReadLock(VerdictStore& s);
    sql::Db* db() const { return db_; }

   private:
    std::unique_lock<std::mutex> reader_;
    std::unique_lock<std::recursive_mutex> writer_;
    sql::Db* db_;
  };
};

}  // namespace faultline::aggregator

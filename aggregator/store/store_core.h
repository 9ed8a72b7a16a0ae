// What the parts of the store share (store.h lists the parts and the tables each owns): the
// connections, the locks that say who may use them, the clock and the decoded-symptom cache.
// Internal to aggregator/store/; callers see only Store.
//
// Locking. Two connections, one lock each:
//   - the write connection (`db`) and `mu`: every write, every read not listed below, the group
//     commit (a group holds `mu` from beginGroup to endGroup), the symptom cache and the prune
//     cursor. Recursive: the calls inside a group lock it again.
//   - the verdict reader (`reader`) and `reader_mu`: reads of verdicts (VerdictStore's latest,
//     history, open and head reads). Never held together with `mu`, so a verdict read never waits
//     for a symptom group commit: SQLite in WAL mode lets a reader in beside the writer (it sees
//     the last commit), PostgreSQL's readers never wait for writers. A store without a second
//     connection (read-only, or none could be opened) reads verdicts on `db` under `mu`.
// The payload dictionaries (`dictionaries`) lock on their own: either connection reads with them.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "aggregator/clock.h"
#include "aggregator/store/db.h"
#include "aggregator/store/symptom_cache.h"
#include "aggregator/store/symptom_dictionary.h"
#include "common/symptom.h"

namespace faultline::aggregator {

struct StoreCore {
  StoreCore(std::unique_ptr<sql::Db> write, const Clock& c) : db(std::move(write)), clock(c) {}

  // ---- guarded by mu ----
  std::unique_ptr<sql::Db> db;
  std::recursive_mutex mu;
  std::atomic<int> waiters{0};  // threads queued for mu: a group ends early to let them in
  bool in_group = false;
  bool group_failed = false;  // a write inside the group failed: endGroup rolls back
  SymptomCache cache{0};
  // Symptoms written in the open group, cached when endGroup commits.
  std::deque<std::pair<int64_t, common::Symptom>> cache_pending;  // a deque: never moved to grow
  // The dictionary new symptom payloads will be packed with (symptom_dictionary.h), while none is
  // current: the compact payloads written so far (its samples, up to dictionary_train_rows), and
  // one trained and inserted by the open transaction, current once that commits (rows the same
  // transaction writes are packed with it: they commit or roll back with it).
  std::vector<std::string> dictionary_samples;
  size_t dictionary_train_rows = 0;  // 0: never train (rows stay compact)
  std::shared_ptr<const PayloadDictionary> pending_dictionary;
  // Where the running prune pass stands, per table: the next time stamp to look at.
  struct PruneCursor {
    int64_t symptoms = INT64_MIN, batches = INT64_MIN, node_events = INT64_MIN, unmatched = INT64_MIN;
  } prune_cursor;

  // ---- guarded by reader_mu ----
  std::unique_ptr<sql::Db> reader;  // null: verdict reads go to db under mu
  std::mutex reader_mu;

  // ---- thread-safe on their own ----
  // The symptom payloads' dictionaries, by id, as far as this process has read or made them:
  // shared by both connections (a dictionary never changes once stored).
  PayloadDictionaries dictionaries;

  const Clock& clock;
};

// The base of each part of the store: the shared core and the names its statements use.
class StorePart {
 protected:
  explicit StorePart(StoreCore& core) : core_(core), db_(core.db.get()), clock_(core.clock) {}

  // Holds the write connection's lock (StoreCore::mu), counted as a waiter while it queues.
  class Lock {
   public:
    explicit Lock(StorePart& p) : core_(p.core_) {
      ++core_.waiters;
      core_.mu.lock();
      --core_.waiters;
    }
    ~Lock() { core_.mu.unlock(); }
    Lock(const Lock&) = delete;
    Lock& operator=(const Lock&) = delete;

   private:
    StoreCore& core_;
  };

  // Inside a transaction that writes symptoms: PostgreSQL advisory lock 7146603 held shared until
  // it ends, so SymptomStore::settledSymptomId() can wait for it. No-op on SQLite.
  bool holdSymptomWrites(std::string* error = nullptr) {
    return !db_->postgres() || db_->exec("SELECT pg_advisory_xact_lock_shared(7146603)", error);
  }

  StoreCore& core_;
  sql::Db* const db_;  // the write connection (core_.db)
  const Clock& clock_;
};

}  // namespace faultline::aggregator

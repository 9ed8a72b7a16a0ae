// The store split by what it keeps (store.h): reads of verdicts have their own connection and lock
// (store_core.h), so a symptom group commit held open by the ingest thread never holds them up.
#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "tests/aggregator/core/store_util.h"
#include "tests/aggregator/core/test_util.h"

using namespace faultline;
using namespace faultline::aggregator;
using namespace faultline::aggregator::testing;

namespace {

// A one-way gate between two threads: open() once, wait() returns when it is (false at the deadline).
class Gate {
 public:
  void open() {
    std::lock_guard lock(mu_);
    open_ = true;
    cv_.notify_all();
  }
  bool wait(std::chrono::seconds deadline) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, deadline, [&] { return open_; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

VerdictRow testVerdict(const std::string& job_id) {
  VerdictRow v;
  v.job_id = job_id;
  v.created_ns = kT0;
  v.status = "provisional";
  v.reason = "job_end";
  v.diagnosis.sub_domain = common::SubDomain::kHardware;
  v.diagnosis.terminal_state = "fail";
  return v;
}

}  // namespace

TEST_CASE("store: a verdict read completes while a symptom group commit is open on another thread",
          "[store][verdicts]") {
  TempDir dir;
  ManualClock clock(kT0);
  auto store = openStore(dir.file("split.db"), clock);
  std::string error;
  recordTestJob(*store, "77", "gpu-01", kT0 - 100 * kSec, kT0, "FAILED");
  REQUIRE(store->addVerdict(testVerdict("77"), &error) == 1);

  // The ingest thread: a group opened, a batch written into it, then held until the reads are done.
  Gate group_open, reads_done;
  std::promise<bool> ended;
  std::thread ingest([&] {
    std::string err;
    if (!store->beginGroup(&err)) {
      group_open.open();
      ended.set_value(false);
      return;
    }
    auto b = makeBatch("gpu-01", 1, {makeSymptom("gpu-01", "gpu.xid.79", kT0 - 10 * kSec)});
    const bool stored = store->ingestBatchGrouped(b, b.header.agent_id).status == IngestResult::Status::kStored;
    group_open.open();
    reads_done.wait(std::chrono::seconds(60));  // released by the test below (or its deadline)
    ended.set_value(store->endGroup(&err) && stored);
  });
  REQUIRE(group_open.wait(std::chrono::seconds(60)));

  // Every verdict read, on this thread, while the group holds the write connection: each must
  // finish (a read that queued for the write lock would sit until the deadline and fail).
  auto reads = std::async(std::launch::async, [&] {
    auto latest = store->latestVerdict("77");
    auto head = store->latestVerdictHead("77");
    auto history = store->verdictHistory("77");
    auto open = store->openVerdicts();
    auto heads = store->openVerdictHeads();
    auto ended_jobs = store->latestVerdicts(kT0 - kSec, kT0 + kSec);
    return latest && latest->revision == 1 && head && head->terminal_state == "fail" && history.size() == 1 &&
           open.size() == 1 && heads.size() == 1 && ended_jobs.size() == 1;
  });
  const bool finished = reads.wait_for(std::chrono::seconds(20)) == std::future_status::ready;
  reads_done.open();
  ingest.join();
  CHECK(finished);
  if (finished) CHECK(reads.get());
  CHECK(ended.get_future().get());
  // The group committed: its symptom is there, and a write after it queues as before.
  CHECK(store->counts().symptoms == 1);
  REQUIRE(store->addVerdict(testVerdict("77"), &error) == 2);
  CHECK(store->latestVerdict("77")->revision == 2);  // the reader sees the commit at once
}

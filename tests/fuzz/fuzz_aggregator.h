// The aggregator as the HTTP and relay fuzz targets meet it: a real Store (an SQLite file in the
// process's scratch directory), a VerdictEngine over the real rules, the Api with a write token
// and the store file for the dashboard's reads, and an Ingestor. Rebuilt from an empty store
// every kInputsPerStore inputs so the database stays small and each input stays fast.
#pragma once

#include <memory>
#include <string>

#include "aggregator/http/api.h"
#include "aggregator/ingest/ingestor.h"
#include "aggregator/metrics/metrics.h"
#include "aggregator/store/store.h"
#include "aggregator/verdicts/verdict_engine.h"
#include "tests/fuzz/fuzz_util.h"

namespace faultline::fuzz {

class Aggregator {
 public:
  static constexpr int kInputsPerStore = 2000;
  static constexpr const char* kWriteToken = "w-token";
  // 2024-06-01T12:00:00Z: after the samples' jobs, so their windows are in the past.
  static constexpr int64_t kNow = int64_t{1717243200} * 1'000'000'000;

  // The aggregator for the next input (a fresh one every kInputsPerStore calls). `fresh` is then
  // called on it first, to seed what every input should find (a job, a verdict).
  template <typename Fresh>
  Aggregator& next(Fresh&& fresh) {
    if (!store_ || ++inputs_ >= kInputsPerStore) {
      reset();
      fresh(*this);
    }
    return *this;
  }

  aggregator::Store& store() { return *store_; }
  aggregator::Api& api() { return *api_; }
  aggregator::Ingestor& ingestor() { return *ingestor_; }
  aggregator::ManualClock& clock() { return clock_; }

  aggregator::HttpResponse call(const std::string& method, const std::string& target, const std::string& body) {
    return api_->handle({method, target, std::string("Bearer ") + kWriteToken, body});
  }

 private:
  void reset() {
    inputs_ = 0;
    api_.reset();
    ingestor_.reset();
    engine_.reset();
    store_.reset();
    metrics_ = std::make_unique<aggregator::Metrics>();
    const std::string file = (scratchDir() / "fuzz.db").string();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(file + suffix);
    std::string error;
    store_ = aggregator::Store::open(file, clock_, {}, &error);
    if (!store_) fail("store: %s", error.c_str());
    engine_ = std::make_unique<aggregator::VerdictEngine>(*store_, clock_, realRules(), aggregator::VerdictOptions{},
                                                         metrics_.get());
    aggregator::ApiOptions options;
    options.write_token = kWriteToken;
    api_ = std::make_unique<aggregator::Api>(*store_, engine_.get(), *metrics_, clock_, options);
    api_->setStoreFile(file);
    ingestor_ = std::make_unique<aggregator::Ingestor>(*store_, *metrics_, clock_);
  }

  aggregator::ManualClock clock_{kNow};
  std::unique_ptr<aggregator::Metrics> metrics_;
  std::unique_ptr<aggregator::Store> store_;
  std::unique_ptr<aggregator::VerdictEngine> engine_;
  std::unique_ptr<aggregator::Api> api_;
  std::unique_ptr<aggregator::Ingestor> ingestor_;
  int inputs_ = 0;
};

}  // namespace faultline::fuzz

// The live aggregator's metric evidence: a worker thread that asks --prometheus for a job's
// metric symptoms (queryMetricEvidence) when the verdict engine requests it, so a slow or dead
// endpoint never holds the io thread that answers HTTP and ticks verdicts. Each answer is handed
// to `deliver`, which the aggregator posts back to the io thread (VerdictEngine::onMetricEvidence).
// Requests for a job already waiting are merged; the queue is bounded (oldest dropped, counted).
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "aggregator/evidence/prometheus.h"

namespace faultline::aggregator {

class MetricWorker {
 public:
  using Deliver = std::function<void(const std::string& job_id, MetricEvidence evidence)>;
  using Now = std::function<int64_t()>;
  // `rules` must outlive the worker. Starts the thread.
  MetricWorker(PrometheusOptions options, std::shared_ptr<const common::RuleSet> rules, Deliver deliver, Now now,
               size_t max_queue = 1024);
  ~MetricWorker();  // stops: the query under way finishes (bounded by the options' timeout), the rest is dropped
  // Thread-safe, never blocks on the endpoint.
  void request(const common::JobInfo& job);
  uint64_t dropped() const;

 private:
  void run();
  PrometheusOptions options_;
  std::shared_ptr<const common::RuleSet> rules_;
  Deliver deliver_;
  Now now_;
  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<common::JobInfo> queue_;
  uint64_t dropped_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace faultline::aggregator

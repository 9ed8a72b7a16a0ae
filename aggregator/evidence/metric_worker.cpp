#include "aggregator/evidence/metric_worker.h"

#include <algorithm>

namespace faultline::aggregator {

MetricWorker::MetricWorker(PrometheusOptions options, std::shared_ptr<const common::RuleSet> rules, Deliver deliver,
                           Now now, size_t max_queue)
    : options_(std::move(options)), rules_(std::move(rules)), deliver_(std::move(deliver)), now_(std::move(now)),
      max_queue_(std::max<size_t>(max_queue, 1)) {
  thread_ = std::thread([this] { run(); });
}

MetricWorker::~MetricWorker() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MetricWorker::request(const common::JobInfo& job) {
  {
    std::lock_guard lock(mu_);
    auto same = std::find_if(queue_.begin(), queue_.end(), [&](const auto& j) { return j.job_id == job.job_id; });
    if (same != queue_.end()) {
      *same = job;  // the newest description of the job (a refined end, more nodes)
      return;
    }
    if (queue_.size() >= max_queue_) {
      queue_.pop_front();
      ++dropped_;
    }
    queue_.push_back(job);
  }
  cv_.notify_one();
}

uint64_t MetricWorker::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void MetricWorker::run() {
  for (;;) {
    common::JobInfo job;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    deliver_(job.job_id, queryMetricEvidence(options_, *rules_, job, now_()));
  }
}

}  // namespace faultline::aggregator

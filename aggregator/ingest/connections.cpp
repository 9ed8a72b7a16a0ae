#include "aggregator/ingest/connections.h"

namespace faultline::aggregator {

void ConnectionTracker::accepted(int fd) {
  std::lock_guard lock(mu_);
  fds_[fd] = ++generations_;
}

void ConnectionTracker::disconnected(int fd, int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  const uint64_t generation = it->second;
  fds_.erase(it);
  for (auto& [host, b] : hosts_)
    if (b.fd == fd && b.generation == generation && b.disconnected_ns == 0) b.disconnected_ns = now_ns;
}

void ConnectionTracker::seen(const std::string& host, int fd) {
  std::lock_guard lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;  // read after its connection closed
  Binding& b = hosts_[host];
  b.fd = fd;
  b.generation = it->second;
  b.disconnected_ns = 0;
}

int64_t ConnectionTracker::disconnectedAt(const std::string& host) const {
  std::lock_guard lock(mu_);
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.disconnected_ns;
}

}  // namespace faultline::aggregator

#include "aggregator/ingest/connections.h"

namespace faultline::aggregator {

void ConnectionTracker::accepted(int fd) {
  std::lock_guard lock(mu_);
  fds_[fd] = Connection{++generations_, ""};
}

void ConnectionTracker::disconnected(int fd, int64_t now_ns) {
  std::lock_guard lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;
  const Connection c = std::move(it->second);
  fds_.erase(it);
  // The host is unbound only if this connection is still the one it was last seen on.
  if (auto h = hosts_.find(c.host); h != hosts_.end() && h->second.generation == c.generation &&
                                    h->second.disconnected_ns == 0)
    h->second.disconnected_ns = now_ns;
}

void ConnectionTracker::seen(const std::string& host, int fd) {
  std::lock_guard lock(mu_);
  auto it = fds_.find(fd);
  if (it == fds_.end()) return;  // read after its connection closed
  it->second.host = host;
  hosts_[host] = Binding{it->second.generation, 0};
}

int64_t ConnectionTracker::disconnectedAt(const std::string& host) const {
  std::lock_guard lock(mu_);
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.disconnected_ns;
}

}  // namespace faultline::aggregator

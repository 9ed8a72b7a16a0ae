#include "aggregator/ingest/refusals.h"

#include <algorithm>

namespace faultline::aggregator {

namespace {

// "tcp://10.1.2.3:51234" or "10.1.2.3:51234" -> "10.1.2.3"; "[::1]:5" -> "::1". A retrying agent
// comes from a new port each time.
std::string withoutPort(const std::string& peer) {
  std::string p = peer;
  if (auto scheme = p.find("://"); scheme != std::string::npos) p = p.substr(scheme + 3);
  if (!p.empty() && p.front() == '[') {
    auto close = p.find(']');
    return close == std::string::npos ? p : p.substr(1, close - 1);
  }
  if (std::count(p.begin(), p.end(), ':') == 1) p = p.substr(0, p.find(':'));
  return p;
}

}  // namespace

std::string refusalHint(const std::string& reason) {
  if (reason == "unknown key")
    return "the key is not in the allow dir: file the agent's public key as HOST.pub there (a site relay's as "
           "relays/SITE.pub) and reload the aggregator (SIGHUP)";
  if (reason == "wrong server key")
    return "the peer's curve_server_public_key is not this aggregator's public key: copy the aggregator's .pub "
           "to the agent's config";
  if (reason == "not CURVE")
    return "the peer connected without CurveZMQ: set curve_server_public_key and the agent's keys in its config";
  if (reason == "protocol error") return "the peer is not a faultline agent of a compatible version, or not one at all";
  if (reason == "hostname mismatch")
    return "an agent's key speaks for another host: each node needs its own key, filed under its own hostname";
  if (reason == "relay: site mismatch")
    return "the relay's key is filed under another site name than its --relay-site: rename relays/SITE.pub or "
           "fix --relay-site";
  return "";
}

uint64_t RefusalLog::record(const Refusal& r, int64_t now_ns) {
  std::lock_guard lock(mu_);
  ++total_;
  const std::string peer = withoutPort(r.peer);
  auto same = [&](const Refusal& e) {
    return e.reason == r.reason && e.peer == peer && e.key == r.key && e.host == r.host && e.detail == r.detail;
  };
  if (auto it = std::find_if(entries_.begin(), entries_.end(), same); it != entries_.end()) {
    Refusal e = std::move(*it);
    entries_.erase(it);
    e.last_ns = now_ns;
    const uint64_t count = ++e.count;
    entries_.push_front(std::move(e));
    return count;
  }
  Refusal e = r;
  e.peer = peer;
  e.first_ns = e.last_ns = now_ns;
  e.count = 1;
  entries_.push_front(std::move(e));
  if (entries_.size() > capacity_) entries_.pop_back();
  return 1;
}

std::vector<Refusal> RefusalLog::recent() const {
  std::lock_guard lock(mu_);
  return {entries_.begin(), entries_.end()};
}

uint64_t RefusalLog::total() const {
  std::lock_guard lock(mu_);
  return total_;
}

}  // namespace faultline::aggregator

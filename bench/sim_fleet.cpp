#include "bench/sim_fleet.h"

#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace faultline::bench {

namespace {
constexpr int64_t kMs = 1'000'000;
constexpr int64_t kSec = 1'000'000'000;
}  // namespace

int64_t steadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t wallNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

SimFleet::SimFleet(zmq::context_t& ctx, SimFleetOptions options)
    : ctx_(ctx), o_(std::move(options)), ep_(::epoll_create1(EPOLL_CLOEXEC)) {}

SimFleet::~SimFleet() {
  for (auto& a : agents_) a.sock.reset();
  ::close(ep_);
}

size_t SimFleet::add(SimAgent agent) {
  agent.in_flight = std::make_unique<uplink::InFlight>(o_.ack_timeout_ns, o_.ack_timeout_max_ns);
  agents_.push_back(std::move(agent));
  return agents_.size() - 1;
}

// Socket options as the agent's shipper sets them.
void SimFleet::connect(size_t i) {
  SimAgent& a = agents_[i];
  a.sock = std::make_unique<zmq::socket_t>(ctx_, zmq::socket_type::dealer);
  a.sock->set(zmq::sockopt::linger, 0);
  a.sock->set(zmq::sockopt::immediate, 1);
  a.sock->set(zmq::sockopt::routing_id, a.host);
  a.sock->set(zmq::sockopt::reconnect_ivl, 500);
  a.sock->set(zmq::sockopt::reconnect_ivl_max, 30000);
  a.sock->set(zmq::sockopt::curve_serverkey, o_.server_key);
  a.sock->set(zmq::sockopt::curve_publickey, a.public_key);
  a.sock->set(zmq::sockopt::curve_secretkey, a.secret_key);
  a.sock->connect(a.endpoint.empty() ? o_.endpoint : a.endpoint);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = i;
  ::epoll_ctl(ep_, EPOLL_CTL_ADD, a.sock->get(zmq::sockopt::fd), &ev);
}

// An agent is tried when its ZMQ_FD says its state changed (the pipe attached), plus a sweep
// over all every second: 2,000 pending connections must not cost a busy loop on a 2-core box
// shared with the aggregator.
bool SimFleet::sendFirstHeartbeats(const std::vector<size_t>& which, int64_t deadline_ns) {
  connecting_ = true;
  size_t want = 0;
  for (size_t i : which) want += !agents_[i].first_heartbeat_sent;
  const size_t goal = first_heartbeats_ + want;
  int64_t next_sweep = 0;
  while (first_heartbeats_ < goal && steadyNs() < deadline_ns) {
    if (steadyNs() >= next_sweep) {
      for (size_t i : which)
        if (!agents_[i].first_heartbeat_sent) sendHeartbeat(agents_[i], true);
      next_sweep = steadyNs() + kSec;
    }
    waitAndDrain(50);
  }
  connecting_ = false;
  return first_heartbeats_ >= goal;
}

PhaseStats SimFleet::run(const std::vector<size_t>& which, size_t batches, int64_t spread_ns, int64_t deadline_ns) {
  PhaseStats st;
  cur_ = &st;
  st.agents = which.size();
  for (size_t i : which) {
    SimAgent& a = agents_[i];
    a.limit = std::min(a.batches.size(), a.next + batches);
    st.total_batches += a.limit - a.next;
  }
  st.start_ns = steadyNs();
  std::vector<std::pair<int64_t, size_t>> starts;
  for (size_t k = 0; k < which.size(); ++k)
    starts.push_back({st.start_ns + (which.size() > 1 ? spread_ns * int64_t(k) / int64_t(which.size()) : 0), which[k]});
  size_t started = 0;
  int64_t next_scan = st.start_ns + 100 * kMs;
  while (!st.complete()) {
    int64_t now = steadyNs();
    if (now > deadline_ns) break;
    for (; started < starts.size() && starts[started].first <= now; ++started) {
      SimAgent& a = agents_[starts[started].second];
      a.active = true;
      a.next_heartbeat_ns = now + o_.heartbeat_ns;
      service(starts[started].second);
    }
    waitAndDrain(started < starts.size() ? 0 : 2);
    if (now >= next_scan) {
      scan(which, now);
      next_scan = now + 100 * kMs;
    }
  }
  // Resent batches still queued at the aggregator are acked again: wait for those acks (only then
  // is the aggregator idle), outside the phase's time.
  while (st.duplicate_acks < st.resends && steadyNs() < deadline_ns) waitAndDrain(5);
  for (size_t i : which) agents_[i].active = false;
  cur_ = nullptr;
  return st;
}

bool SimFleet::sendFrames(SimAgent& a, std::string_view type, const std::string& payload) {
  try {
    if (!a.sock->send(zmq::buffer(type), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    a.sock->send(zmq::buffer(payload), zmq::send_flags::dontwait);  // a message's later parts never block
    return true;
  } catch (const zmq::error_t&) {
    return false;
  }
}

bool SimFleet::sendHeartbeat(SimAgent& a, bool first) {
  common::HeartbeatData hb;
  hb.agent_id = a.host;
  hb.hostname = a.host;
  hb.node = a.host;
  hb.boot_id = a.boot_id;
  hb.agent_version = "bench";
  hb.ruleset_version = o_.ruleset_version;
  hb.created_ns = wallNs();
  hb.started_ns = hb.created_ns;
  hb.sources = {{"kmsg", "kmsg", "ok", "", a.acked, 0, 0, 0},
                {"/var/log/slurm/job.out", "application", "ok", "", a.acked, 0, 0, 0}};
  hb.spool_batches = a.batches.size() - a.acked;
  hb.next_sequence = a.batches.size() + 1;
  hb.inventory_hash = common::inventoryHash(a.inventory);
  if (first) hb.inventory = a.inventory;
  if (!sendFrames(a, common::kTypeHeartbeat, common::encodeHeartbeat(hb))) return false;
  if (!a.first_heartbeat_sent) {
    a.first_heartbeat_sent = true;
    a.connected_ns = steadyNs();
    ++first_heartbeats_;
  }
  if (cur_) ++cur_->heartbeats;
  return true;
}

// Sends while the window has room; true when anything went out.
bool SimFleet::topUp(SimAgent& a) {
  bool any = false;
  // What the timer released goes first, as the agent's outbox picks the oldest sequence first.
  while (a.active && !a.again.empty() && a.in_flight->size() < o_.in_flight) {
    uint64_t seq = a.again.front();
    if (!a.first_sent_ns.count(seq)) {  // acked meanwhile (its first send's ack was late)
      a.again.erase(a.again.begin());
      continue;
    }
    if (!sendFrames(a, common::kTypeBatch, a.batches[seq - 1])) return any;  // no connection: scan() retries
    a.in_flight->sent(seq, steadyNs());
    if (o_.fixed_timeout) a.last_sent_ns[seq] = steadyNs();
    a.again.erase(a.again.begin());
    ++cur_->resends;
    any = true;
  }
  while (a.active && a.in_flight->size() + a.again.size() < o_.in_flight && a.next < a.limit) {
    if (!sendFrames(a, common::kTypeBatch, a.batches[a.next])) break;  // no connection: scan() retries
    int64_t now = steadyNs();
    a.in_flight->sent(a.next + 1, now);
    a.first_sent_ns[a.next + 1] = now;
    if (o_.fixed_timeout) a.last_sent_ns[a.next + 1] = now;
    ++a.next;
    any = true;
  }
  return any;
}

// Receives everything queued on one socket. ZMQ_FD only says "look", and a send may consume the
// signal of an ack that is waiting, so this runs after sends too, until nothing moves.
void SimFleet::service(size_t i) {
  SimAgent& a = agents_[i];
  if (connecting_ && !a.first_heartbeat_sent) sendHeartbeat(a, true);
  while (true) {
    bool got = false;
    while (true) {
      zmq::message_t type, payload;
      if (!a.sock->recv(type, zmq::recv_flags::dontwait)) break;
      got = true;
      if (!type.more() || !a.sock->recv(payload, zmq::recv_flags::dontwait)) {
        if (cur_) ++cur_->bad_messages;
        continue;
      }
      while (payload.more()) (void)a.sock->recv(payload, zmq::recv_flags::dontwait);
      onMessage(a, type.to_string_view(), payload.to_string_view());
    }
    bool sent = topUp(a);
    if (!got && !sent && !(a.sock->get(zmq::sockopt::events) & ZMQ_POLLIN)) break;
  }
}

void SimFleet::onMessage(SimAgent& a, std::string_view type, std::string_view payload) {
  auto ack = type == common::kTypeAck ? common::decodeAck(payload) : std::nullopt;
  if (!ack || ack->agent_id != a.host) {
    if (cur_) ++cur_->bad_messages;
    return;
  }
  int64_t now = steadyNs();
  a.in_flight->acked(ack->sequence, now);
  auto it = a.first_sent_ns.find(ack->sequence);
  if (it == a.first_sent_ns.end()) {
    if (cur_) ++cur_->duplicate_acks;  // the second ack of a resent batch
    return;
  }
  ++a.acked;
  if (cur_) {
    cur_->latency_ns.push_back(now - it->second);
    ++cur_->batches;
    cur_->symptoms += a.batch_symptoms[ack->sequence - 1];
    cur_->last_ack_ns = now;
  }
  a.first_sent_ns.erase(it);
  a.last_sent_ns.erase(ack->sequence);
}

void SimFleet::waitAndDrain(int timeout_ms) {
  epoll_event evs[512];
  int n = ::epoll_wait(ep_, evs, 512, timeout_ms);
  for (int k = 0; k < n; ++k) service(static_cast<size_t>(evs[k].data.u64));
}

// Resends what was not acked in time, sends due heartbeats, retries sends that found no
// connection.
void SimFleet::scan(const std::vector<size_t>& which, int64_t now) {
  for (size_t i : which) {
    SimAgent& a = agents_[i];
    if (!a.active) continue;
    if (o_.fixed_timeout) {
      // The old agent: every batch out longer than the timeout goes again.
      std::vector<uint64_t> late;
      a.in_flight->forEach([&](uint64_t seq) { late.push_back(seq); });
      for (uint64_t seq : late)
        if (now - a.last_sent_ns[seq] >= o_.ack_timeout_ns) {
          a.again.push_back(seq);
          a.in_flight->forget(seq);
        }
    } else {
      a.in_flight->due(now, &a.again);
    }
    std::sort(a.again.begin(), a.again.end());
    if (now >= a.next_heartbeat_ns && sendHeartbeat(a, false)) a.next_heartbeat_ns = now + o_.heartbeat_ns;
    service(i);
  }
}

}  // namespace faultline::bench

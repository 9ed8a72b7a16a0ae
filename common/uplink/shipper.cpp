#include "common/uplink/shipper.h"

#include <boost/asio/post.hpp>

#include <atomic>
#include <cstring>

#include "common/uplink/log.h"
#include "common/protocol.h"

namespace faultline::uplink {

using common::kZstdSuffix;

Shipper::Shipper(boost::asio::io_context& io, zmq::context_t& zmq, const Clock& clock, Outbox& outbox,
                 ShipperOptions options, Logger* log)
    : io_(io), zmq_(zmq), clock_(clock), outbox_(outbox), options_(std::move(options)), log_(log),
      fd_(io), monitor_fd_(io), tick_timer_(io), throttle_timer_(io), retry_timer_(io),
      bucket_(options_.rate_bytes_per_sec, options_.rate_burst_bytes, clock.steadyNs()),
      in_flight_(options_.ack_timeout_ns, options_.ack_timeout_max_ns),
      link_(clock,
            LinkWatch::Options{.name = options_.log_name,
                               .key_file = options_.key_file,
                               .curve = !options_.curve_server_key.empty(),
                               .unreachable_after_ns = options_.unreachable_after_ns},
            [this](int priority, const std::string& line) {
              if (options_.link_log) options_.link_log(priority, line);
              else if (log_ && priority <= 3) log_->error("{}", line);
              else if (log_ && priority == 4) log_->warn("{}", line);
              else if (log_) log_->info("{}", line);
            }) {}

Shipper::~Shipper() { stop(); }

bool Shipper::start(std::string* error) {
  try {
    socket_ = std::make_unique<zmq::socket_t>(zmq_, zmq::socket_type::dealer);
    socket_->set(zmq::sockopt::linger, 0);
    // Refuse to queue onto a connection that is not up: a send then fails fast (EAGAIN) and the
    // batch stays in the spool instead of in a queue that a reconnect would drop.
    socket_->set(zmq::sockopt::immediate, 1);
    socket_->set(zmq::sockopt::sndhwm, static_cast<int>(options_.max_in_flight) + 16);
    socket_->set(zmq::sockopt::routing_id, options_.agent_id);
    socket_->set(zmq::sockopt::reconnect_ivl, 500);
    socket_->set(zmq::sockopt::reconnect_ivl_max, 30000);
    if (!options_.curve_server_key.empty()) {
      std::string pub = options_.curve_public_key;
      if (pub.empty()) {
        char derived[41] = {};
        if (zmq_curve_public(derived, options_.curve_secret_key.c_str()) != 0) {
          *error = "curve: cannot derive the public key from the secret key";
          return false;
        }
        pub = derived;
      }
      socket_->set(zmq::sockopt::curve_serverkey, options_.curve_server_key);
      socket_->set(zmq::sockopt::curve_publickey, pub);
      socket_->set(zmq::sockopt::curve_secretkey, options_.curve_secret_key);
    }
    // Unique within the process (inproc names are per context; shippers may share one).
    static std::atomic<uint64_t> monitors{0};
    const std::string monitor_ep = "inproc://faultline-shipper-monitor-" + std::to_string(++monitors);
    if (zmq_socket_monitor(socket_->handle(), monitor_ep.c_str(),
                           ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_CONNECTED |
                               ZMQ_EVENT_CONNECT_DELAYED | ZMQ_EVENT_CONNECT_RETRIED |
                               ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
      throw zmq::error_t();
    monitor_ = std::make_unique<zmq::socket_t>(zmq_, zmq::socket_type::pair);
    monitor_->set(zmq::sockopt::linger, 0);
    monitor_->connect(monitor_ep);
    for (const auto& ep : options_.endpoints) socket_->connect(ep);
    int fd = socket_->get(zmq::sockopt::fd);
    fd_.assign(fd);
    monitor_fd_.assign(monitor_->get(zmq::sockopt::fd));
  } catch (const zmq::error_t& e) {
    *error = std::string("zmq: ") + e.what();
    releaseSockets();
    return false;
  } catch (const boost::system::system_error& e) {
    *error = std::string("zmq fd: ") + e.what();
    releaseSockets();
    return false;
  }
  stopped_ = false;
  armFd();
  armMonitor();
  armTick();
  boost::asio::post(io_, [this] { kick(); });
  return true;
}

void Shipper::stop() {
  stopped_ = true;
  tick_timer_.cancel();
  throttle_timer_.cancel();
  retry_timer_.cancel();
  releaseSockets();
}

void Shipper::releaseSockets() {
  for (auto* d : {&fd_, &monitor_fd_}) {
    if (!d->is_open()) continue;
    boost::system::error_code ec;
    d->cancel(ec);
    d->release();
  }
  if (socket_ && monitor_) zmq_socket_monitor(socket_->handle(), nullptr, 0);
  monitor_.reset();
  socket_.reset();
}

void Shipper::armFd() {
  if (stopped_ || waiting_) return;
  waiting_ = true;
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    waiting_ = false;
    if (ec || stopped_) return;
    processIncoming();
    kick();
    armFd();
  });
}

void Shipper::armMonitor() {
  if (stopped_ || monitor_waiting_ || !monitor_) return;
  monitor_waiting_ = true;
  // ZMQ_FD signals only once the socket has looked at its commands: ask first, wait after.
  bool pending = false;
  try {
    pending = monitor_->get(zmq::sockopt::events) & ZMQ_POLLIN;
  } catch (const zmq::error_t&) {
  }
  if (pending) {
    boost::asio::post(io_, [this] {
      monitor_waiting_ = false;
      if (stopped_) return;
      processMonitor();
      armMonitor();
    });
    return;
  }
  monitor_fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read, [this](const boost::system::error_code& ec) {
    monitor_waiting_ = false;
    if (ec || stopped_) return;
    processMonitor();
    armMonitor();
  });
}

// Each event is two frames: 2 bytes event id + 4 bytes value, then the endpoint.
void Shipper::processMonitor() {
  bool lost = false, up = false;
  try {
    while (monitor_->get(zmq::sockopt::events) & ZMQ_POLLIN) {
      zmq::message_t head, endpoint;
      if (!monitor_->recv(head, zmq::recv_flags::dontwait)) break;
      if (head.more()) (void)monitor_->recv(endpoint, zmq::recv_flags::dontwait);
      if (head.size() < 6) continue;
      uint16_t event = 0;
      uint32_t value = 0;
      std::memcpy(&event, head.data(), sizeof event);
      std::memcpy(&value, static_cast<const char*>(head.data()) + sizeof event, sizeof value);
      link_.onEvent(event, value, endpoint.to_string());
      if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH || event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) armRefusedRetry();
      lost = lost || event == ZMQ_EVENT_DISCONNECTED;
      up = up || event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    }
  } catch (const zmq::error_t& e) {
    if (log_) log_->warn("{}: zmq monitor: {}", options_.log_name, e.what());
  }
  if (lost) {
    // ZeroMQ dropped what was queued for the connection, and an aggregator that died lost what it
    // had not stored: everything out goes again (duplicates are acknowledged and dropped).
    std::vector<uint64_t> again;
    in_flight_.lost(&again);
    stats_.resent += again.size();
    ++stats_.disconnects;
    // The dead connection's pipe may still take sends for a moment (into nowhere): hold them
    // until a handshake finishes or the next tick.
    held_ = true;
  }
  if (up) {
    held_ = false;
    acked_at_up_ = stats_.acked;
    kick();
  }
}

void Shipper::armRefusedRetry() {
  if (retry_armed_ || stopped_ || options_.refused_retry_ms <= 0) return;
  retry_armed_ = true;
  retry_timer_.expires_after(std::chrono::milliseconds(options_.refused_retry_ms));
  retry_timer_.async_wait([this](const boost::system::error_code& ec) {
    retry_armed_ = false;
    if (ec || stopped_ || !socket_) return;
    for (const auto& ep : options_.endpoints) {
      if (link_.state(ep) == LinkWatch::State::kUp) continue;
      try {
        socket_->disconnect(ep);
      } catch (const zmq::error_t&) {
        // Not connected any more: connect() below is all it takes.
      }
      try {
        socket_->connect(ep);
      } catch (const zmq::error_t& e) {
        if (log_) log_->warn("{}: {}: reconnect: {}", options_.log_name, ep, e.what());
      }
    }
  });
}

void Shipper::armTick() {
  if (stopped_ || options_.tick_ms <= 0) return;
  tick_timer_.expires_after(std::chrono::milliseconds(options_.tick_ms));
  tick_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    tick();
    armTick();
  });
}

void Shipper::armThrottle(int64_t wait_ns) {
  if (throttled_ || stopped_) return;
  throttled_ = true;
  ++stats_.throttled;
  throttle_timer_.expires_after(std::chrono::nanoseconds(wait_ns));
  throttle_timer_.async_wait([this](const boost::system::error_code& ec) {
    throttled_ = false;
    if (ec || stopped_) return;
    kick();
  });
}

bool Shipper::sendFrames(std::string_view type, const std::string& payload) {
  if (!socket_) return false;
  try {
    auto r = socket_->send(zmq::buffer(type), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    if (!r) return false;
    // ZeroMQ sends multipart messages atomically: the second frame cannot fail once the first
    // was accepted, short of the context terminating.
    socket_->send(zmq::buffer(payload), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    if (log_) log_->warn("{}: zmq send: {}", options_.log_name, e.what());
    return false;
  }
  stats_.bytes_sent += payload.size();
  return true;
}

size_t Shipper::sendMessage(const std::string& type, const std::string& packed) {
  if (options_.zstd) {
    std::string small = common::compressZstd(packed, options_.zstd_level);
    if (!small.empty() && small.size() < packed.size()) {
      if (!sendFrames(type + std::string(kZstdSuffix), small)) return 0;
      stats_.bytes_packed += packed.size();
      ++stats_.compressed;
      return small.size();
    }
  }
  if (!sendFrames(type, packed)) return 0;
  stats_.bytes_packed += packed.size();
  return packed.size();
}

void Shipper::kick() {
  if (stopped_ || !socket_ || held_) return;
  bool blocked = false;
  while (in_flight_.size() < options_.max_in_flight) {
    std::vector<uint64_t> exclude;
    in_flight_.forEach([&](uint64_t seq) { exclude.push_back(seq); });
    auto next = outbox_.unacked(1, options_.critical_first, exclude);
    if (next.empty()) break;
    const auto& b = next.front();
    int64_t now = clock_.steadyNs();
    // The cap is checked against the packed size (an upper bound of what zstd sends), charged
    // with what actually went out.
    if (int64_t wait = bucket_.waitNs(b.payload.size(), now); wait > 0) {
      armThrottle(wait);
      break;
    }
    if (!outbox_.beforeSend(b.sequence)) break;  // could not note the send: not sent, the tick retries
    size_t sent = sendMessage(options_.batch_type, b.payload);
    outbox_.afterSend(b.sequence, sent != 0);
    if (sent == 0) {  // not connected (yet): the tick retries, or the pipe's arrival below
      blocked = true;
      break;
    }
    bucket_.take(sent, now);  // only what actually went out counts
    in_flight_.sent(b.sequence, now);
    ++stats_.sent;
  }
  // Sending consumes the fd's edge: look for acks that arrived meanwhile.
  processIncoming();
  // A send refused for want of a connection, whose pipe then arrived while the socket looked at
  // its commands (just now, or in the failing send itself): ZMQ_FD's edge for it is gone, and
  // nothing else would send before the next tick. Go again while a send can succeed.
  // (A few times in a row at most: a send that fails with the socket writable is for the tick.)
  if (!blocked) {
    rekicks_ = 0;
  } else if (!held_ && !stopped_ && rekicks_ < 3 && socketWritable()) {
    ++rekicks_;
    boost::asio::post(io_, [this] { kick(); });
  }
}

bool Shipper::socketWritable() {
  try {
    return socket_ && (socket_->get(zmq::sockopt::events) & ZMQ_POLLOUT);
  } catch (const zmq::error_t&) {
    return false;
  }
}

void Shipper::tick() {
  // What due() releases is no longer out: kick() picks it again from the outbox.
  std::vector<uint64_t> again;
  const size_t due = in_flight_.due(clock_.steadyNs(), &again);
  stats_.timed_out += due;
  stats_.resent += again.size();
  // Connected, sending, and not one ack since the link came up: refused after the handshake.
  if (due && stats_.acked == acked_at_up_) link_.unacknowledged(due);
  held_ = false;
  kick();
}

bool Shipper::sendHeartbeat(const std::string& payload) {
  if (stopped_) return false;
  bool ok = sendMessage(options_.heartbeat_type, payload) > 0;
  if (ok) ++stats_.heartbeats;
  else ++stats_.heartbeats_dropped;
  processIncoming();
  return ok;
}

void Shipper::processIncoming() {
  if (!socket_) return;
  bool acked = false;
  try {
    while (socket_->get(zmq::sockopt::events) & ZMQ_POLLIN) {
      std::vector<zmq::message_t> frames;
      while (true) {
        zmq::message_t m;
        if (!socket_->recv(m, zmq::recv_flags::dontwait)) break;
        bool more = m.more();
        frames.push_back(std::move(m));
        if (!more) break;
      }
      if (frames.size() != 2 || frames[0].to_string_view() != common::kTypeAck) {
        ++stats_.bad_messages;
        continue;
      }
      auto ack = common::decodeAck(frames[1].to_string_view());
      if (!ack || ack->agent_id != options_.agent_id) {
        ++stats_.bad_messages;
        continue;
      }
      outbox_.ack(ack->sequence);
      if (in_flight_.acked(ack->sequence, clock_.steadyNs())) {
        ++stats_.acked;
        stats_.last_ack_ns = clock_.nowNs();
      }
      acked = true;
    }
  } catch (const zmq::error_t& e) {
    if (log_) log_->warn("{}: zmq receive: {}", options_.log_name, e.what());
  }
  if (acked) boost::asio::post(io_, [this] { kick(); });
}

}  // namespace faultline::uplink

#include "common/uplink/link_watch.h"

#include <fmt/format.h>
#include <zmq.h>

#include <cstring>

namespace faultline::uplink {

LinkWatch::LinkWatch(const common::Clock& clock, Options options, Sink sink)
    : clock_(clock), options_(std::move(options)), sink_(std::move(sink)) {}

const char* LinkWatch::stateName(State s) {
  switch (s) {
    case State::kConnecting: return "connecting";
    case State::kHandshaking: return "handshaking";
    case State::kUp: return "up";
    case State::kUnreachable: return "unreachable";
    case State::kKeyRefused: return "key refused";
    case State::kHandshakeClosed: return "handshake closed";
    case State::kProtocolError: return "protocol error";
    case State::kLost: return "lost";
  }
  return "?";
}

LinkWatch::State LinkWatch::state(const std::string& endpoint) const {
  auto it = links_.find(endpoint);
  return it == links_.end() ? State::kConnecting : it->second.state;
}

uint64_t LinkWatch::failures(const std::string& endpoint) const {
  auto it = links_.find(endpoint);
  return it == links_.end() ? 0 : it->second.failures;
}

bool LinkWatch::anyUp() const {
  for (const auto& [ep, link] : links_)
    if (link.state == State::kUp) return true;
  return false;
}

void LinkWatch::trouble(Link& link, const std::string& endpoint, State s, int priority, const std::string& line) {
  const int64_t now = clock_.steadyNs();
  if (link.trouble_since_ns == 0) link.trouble_since_ns = now;
  ++link.failures;
  link.state = s;
  if (s == State::kUnreachable && now - link.trouble_since_ns < options_.unreachable_after_ns) return;
  const bool fresh = link.logged_state != s || link.logged_ns == 0;
  if (!fresh && now - link.logged_ns < options_.repeat_ns) return;
  std::string text = fmt::format("{}: {}: {}", options_.name, endpoint, line);
  if (!fresh) text += fmt::format(" ({} more failed attempts since the last report)", link.failures - link.failures_at_log);
  if (!anyUp()) text += links_.size() > 1 ? "; no aggregator endpoint is connected" : "";
  link.logged_state = s;
  link.logged_ns = now;
  link.failures_at_log = link.failures;
  sink_(priority, text);
}

void LinkWatch::unacknowledged(uint64_t timed_out) {
  unacked_ += timed_out;
  const int64_t now = clock_.steadyNs();
  // Three timeouts (the timeout backs off each time) before a slow aggregator is called a refusing one.
  if (unacked_ < 3 || (unacked_logged_ns_ != 0 && now - unacked_logged_ns_ < options_.repeat_ns)) return;
  std::string endpoint;
  for (const auto& [ep, link] : links_)
    if (link.state == State::kUp) endpoint = ep;
  if (endpoint.empty()) return;
  sink_(3, fmt::format("{}: {}: the aggregator takes the connection but acknowledged none of {} batches sent: it "
                       "refuses them, and its log and `faultline agents --refusals` say why (a key filed under "
                       "another name than {}: another hostname, or another site)",
                       options_.name, endpoint, unacked_, options_.key_file));
  unacked_logged_ns_ = now;
  unacked_ = 0;
}

void LinkWatch::onEvent(uint16_t event, uint32_t value, const std::string& endpoint) {
  Link& link = links_[endpoint];
  switch (event) {
    case ZMQ_EVENT_CONNECT_DELAYED:  // a new attempt started
      link.attempt_connected = false;
      return;
    case ZMQ_EVENT_CONNECTED:
      link.attempt_connected = true;
      if (link.state != State::kUp) link.state = State::kHandshaking;
      return;
    case ZMQ_EVENT_CONNECT_RETRIED:
      // After a refused handshake libzmq reconnects too; only an attempt that never connected
      // means the endpoint cannot be reached.
      if (!link.attempt_connected) {
        const int64_t now = clock_.steadyNs();
        if (link.trouble_since_ns == 0) link.trouble_since_ns = now;
        trouble(link, endpoint, State::kUnreachable, 4,
                fmt::format("cannot reach the aggregator ({} failed connects in {} s, retrying): check that it "
                            "runs and listens on this address and port, and that no firewall drops the port",
                            link.failures + 1, (now - link.trouble_since_ns) / 1'000'000'000));
      }
      link.attempt_connected = false;
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
      trouble(link, endpoint, State::kKeyRefused, 3,
              fmt::format("the aggregator refused this sender's key (ZAP status {}): its allow dir has no {} "
                          "holding this host's public key; file it there and reload the aggregator (SIGHUP)",
                          value, options_.key_file));
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
      trouble(link, endpoint, State::kHandshakeClosed, 3,
              options_.curve
                  ? fmt::format("the connection closed during the CurveZMQ handshake ({}): curve_server_public_key "
                                "is most likely not this aggregator's public key (compare it with the aggregator's "
                                ".pub), or this endpoint is not a faultline aggregator",
                                std::strerror(static_cast<int>(value)))
                  : fmt::format("the connection closed during the ZMTP handshake ({}): the endpoint is not a "
                                "faultline aggregator, or it requires CurveZMQ (set curve_server_public_key)",
                                std::strerror(static_cast<int>(value))));
      return;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
      trouble(link, endpoint, State::kProtocolError, 3,
              value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                  ? std::string(options_.curve ? "the endpoint does not use CurveZMQ: is it a faultline aggregator "
                                                 "started with --curve-secret-key?"
                                               : "the endpoint requires CurveZMQ: set curve_server_public_key and "
                                                 "this host's keys")
                  : fmt::format("handshake protocol error 0x{:08x}: the endpoint is not a faultline aggregator of a "
                                "compatible version",
                                value));
      return;
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED: {
      const bool recovered = link.logged_ns != 0;
      const uint64_t failures = link.failures;
      const int64_t since = link.trouble_since_ns;
      const int64_t lost_logged = link.lost_logged_ns;
      link = Link{};
      link.state = State::kUp;
      link.lost_logged_ns = lost_logged;
      if (recovered) {
              const int64_t secs = since ? (clock_.steadyNs() - since) / 1'000'000'000 : 0;
        sink_(6, failures ? fmt::format("{}: {}: connected after {} failed attempts in {} s", options_.name, endpoint,
                                        failures, secs)
                          : fmt::format("{}: {}: reconnected after {} s", options_.name, endpoint, secs));
      }
      return;
    }
    case ZMQ_EVENT_DISCONNECTED:
      // A lost connection (an aggregator restart, a network blip): written at most once per
      // repeat_ns, however often the link flaps.
      if (link.state == State::kUp) {
        const int64_t now = clock_.steadyNs();
        link.state = State::kLost;
        link.trouble_since_ns = now;
        if (link.lost_logged_ns == 0 || now - link.lost_logged_ns >= options_.repeat_ns) {
                  sink_(4, fmt::format("{}: {}: connection to the aggregator lost; reconnecting (batches stay spooled)",
                               options_.name, endpoint));
          link.lost_logged_ns = now;
          link.logged_state = State::kLost;
          link.logged_ns = now;
        }
      }
      return;
    default:
      return;
  }
}

}  // namespace faultline::uplink

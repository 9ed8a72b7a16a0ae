// LinkWatch: the words an agent (or a site relay) writes when its link to the aggregator cannot
// be made, from the ZeroMQ monitor events libzmq 4.3 sends in each case (the sequences below were
// read off real sockets: a refused key, a wrong server key, a closed port). Manual clock.
#include "common/uplink/link_watch.h"

#include <catch2/catch.hpp>
#include <zmq.h>

#include <string>
#include <utility>
#include <vector>

using faultline::common::ManualClock;
using faultline::uplink::LinkWatch;

namespace {

constexpr int64_t kLinkSec = 1'000'000'000;
const std::string kLinkEp = "tcp://10.0.0.1:7400";

struct LinkRig {
  ManualClock clock;
  std::vector<std::pair<int, std::string>> lines;
  LinkWatch watch;
  explicit LinkRig(LinkWatch::Options o = {})
      : watch(clock, std::move(o), [this](int p, const std::string& l) { lines.emplace_back(p, l); }) {}
  // One connect attempt that never connects, then libzmq's retry.
  void refusedConnect(const std::string& ep = kLinkEp) {
    watch.onEvent(ZMQ_EVENT_CONNECT_DELAYED, EINPROGRESS, ep);
    watch.onEvent(ZMQ_EVENT_CLOSED, 0, ep);
    watch.onEvent(ZMQ_EVENT_CONNECT_RETRIED, 500, ep);
  }
  void handshake(uint16_t failure, uint32_t value, const std::string& ep = kLinkEp) {
    watch.onEvent(ZMQ_EVENT_CONNECT_DELAYED, EINPROGRESS, ep);
    watch.onEvent(ZMQ_EVENT_CONNECTED, 17, ep);
    watch.onEvent(failure, value, ep);
    watch.onEvent(ZMQ_EVENT_DISCONNECTED, 17, ep);
    watch.onEvent(ZMQ_EVENT_CONNECT_RETRIED, 500, ep);
  }
  void up(const std::string& ep = kLinkEp) {
    watch.onEvent(ZMQ_EVENT_CONNECT_DELAYED, EINPROGRESS, ep);
    watch.onEvent(ZMQ_EVENT_CONNECTED, 17, ep);
    watch.onEvent(ZMQ_EVENT_HANDSHAKE_SUCCEEDED, 0, ep);
  }
};

}  // namespace

TEST_CASE("link watch: a refused key is an error line naming the key file to add, once per ten minutes",
          "[link]") {
  LinkWatch::Options o;
  o.key_file = "gpu-01.pub";
  LinkRig w(o);
  w.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400);
  REQUIRE(w.lines.size() == 1);
  CHECK(w.lines[0].first == 3);
  CHECK_THAT(w.lines[0].second, Catch::Contains("tcp://10.0.0.1:7400") && Catch::Contains("refused this sender's key") &&
                                    Catch::Contains("ZAP status 400") && Catch::Contains("gpu-01.pub") &&
                                    Catch::Contains("SIGHUP"));
  CHECK(w.watch.state(kLinkEp) == LinkWatch::State::kKeyRefused);
  // Retries within the repeat interval are counted, not written.
  for (int i = 0; i < 20; ++i) {
    w.clock.advance(25 * kLinkSec);
    w.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400);
  }
  CHECK(w.lines.size() == 1);
  w.clock.advance(120 * kLinkSec);  // 620 s after the first line
  w.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400);
  REQUIRE(w.lines.size() == 2);
  CHECK_THAT(w.lines[1].second, Catch::Contains("21 more failed attempts"));
  // Fixed on the aggregator: one line says so.
  w.up();
  REQUIRE(w.lines.size() == 3);
  CHECK(w.lines[2].first == 6);
  CHECK_THAT(w.lines[2].second, Catch::Contains("connected after 22 failed attempts"));
  CHECK(w.watch.state(kLinkEp) == LinkWatch::State::kUp);
}

TEST_CASE("link watch: a connection closed during the CurveZMQ handshake points at curve_server_public_key",
          "[link]") {
  LinkRig w;
  w.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL, ECONNRESET);
  REQUIRE(w.lines.size() == 1);
  CHECK_THAT(w.lines[0].second, Catch::Contains("closed during the CurveZMQ handshake") &&
                                    Catch::Contains("curve_server_public_key"));
  CHECK(w.watch.state(kLinkEp) == LinkWatch::State::kHandshakeClosed);
  // The reconnect after it connected is not "unreachable".
  CHECK(w.lines.size() == 1);
}

TEST_CASE("link watch: a mechanism mismatch says which side lacks CurveZMQ", "[link]") {
  LinkRig curve;
  curve.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH);
  REQUIRE(curve.lines.size() == 1);
  CHECK_THAT(curve.lines[0].second, Catch::Contains("does not use CurveZMQ"));
  LinkWatch::Options plain_options;
  plain_options.curve = false;
  LinkRig plain(plain_options);
  plain.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL, ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH);
  REQUIRE(plain.lines.size() == 1);
  CHECK_THAT(plain.lines[0].second, Catch::Contains("requires CurveZMQ"));
}

TEST_CASE("link watch: an unreachable endpoint is written only after failing for a while", "[link]") {
  LinkRig w;  // 30 s before the first line
  w.refusedConnect();
  w.clock.advance(10 * kLinkSec);
  w.refusedConnect();
  CHECK(w.lines.empty());
  CHECK(w.watch.state(kLinkEp) == LinkWatch::State::kUnreachable);
  w.clock.advance(25 * kLinkSec);
  w.refusedConnect();
  REQUIRE(w.lines.size() == 1);
  CHECK(w.lines[0].first == 4);
  CHECK_THAT(w.lines[0].second, Catch::Contains("cannot reach the aggregator (3 failed connects in 35 s") &&
                                    Catch::Contains("firewall"));
  w.clock.advance(30 * kLinkSec);
  w.refusedConnect();
  CHECK(w.lines.size() == 1);
}

TEST_CASE("link watch: a lost connection is one warning however often it flaps, and a second endpoint is "
          "named when none is up",
          "[link]") {
  LinkRig w;
  w.up();
  CHECK(w.lines.empty());  // nothing was wrong: no "connected" line
  w.watch.onEvent(ZMQ_EVENT_DISCONNECTED, 17, kLinkEp);
  REQUIRE(w.lines.size() == 1);
  CHECK_THAT(w.lines[0].second, Catch::Contains("connection to the aggregator lost"));
  CHECK(w.watch.state(kLinkEp) == LinkWatch::State::kLost);
  w.up();
  REQUIRE(w.lines.size() == 2);
  CHECK_THAT(w.lines[1].second, Catch::Contains("reconnected"));
  for (int i = 0; i < 5; ++i) {
    w.clock.advance(kLinkSec);
    w.watch.onEvent(ZMQ_EVENT_DISCONNECTED, 17, kLinkEp);
    w.up();
  }
  CHECK(w.lines.size() == 2);

  LinkRig two;
  const std::string other = "tcp://10.0.0.2:7400";
  two.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400, other);
  two.handshake(ZMQ_EVENT_HANDSHAKE_FAILED_AUTH, 400, kLinkEp);
  REQUIRE(two.lines.size() == 2);
  CHECK_THAT(two.lines[1].second, Catch::Contains("no aggregator endpoint is connected"));
}

TEST_CASE("link watch: a link that is up but never acknowledged is called refused after three timeouts",
          "[link]") {
  LinkWatch::Options o;
  o.key_file = "relays/edge1.pub";
  LinkRig w(o);
  w.up();
  w.watch.unacknowledged(1);
  w.watch.unacknowledged(1);
  CHECK(w.lines.empty());  // a slow aggregator is not a refusing one yet
  w.watch.unacknowledged(1);
  REQUIRE(w.lines.size() == 1);
  CHECK_THAT(w.lines[0].second, Catch::Contains("acknowledged none of 3 batches") &&
                                    Catch::Contains("relays/edge1.pub") && Catch::Contains("--refusals"));
  w.watch.unacknowledged(5);
  CHECK(w.lines.size() == 1);
}

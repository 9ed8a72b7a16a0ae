// The shipper against a minimal acking ZeroMQ receiver on 127.0.0.1: acks delete from the spool,
// unacknowledged batches are resent after the (manual-clock) timeout, the receiver being down
// lets the spool fill and then drain in order, CurveZMQ works with a generated key pair.
#include "agent/agent.h"
#include "common/uplink/shipper.h"

#include <catch2/catch.hpp>

#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::uplink;
using namespace faultline::agent::testing;

namespace {

void spoolBatches(Spool& spool, int n, common::Severity sev = common::Severity::kError) {
  for (int i = 0; i < n; ++i) {
    common::SymptomBatchData b;
    b.header.agent_id = "agent-1";
    common::Symptom s;
    s.rule_id = "r" + std::to_string(i);
    s.severity = sev;
    s.count = 1;
    b.symptoms = {s};
    SpoolCommit c;
    c.batches = {b};
    std::string error;
    REQUIRE(spool.commit(c, &error));
  }
}

ShipperOptions options(const std::string& endpoint) {
  ShipperOptions o;
  o.endpoints = {endpoint};
  o.agent_id = "agent-1";
  o.tick_ms = 0;  // the test drives tick() with the manual clock
  o.ack_timeout_ns = 5'000'000'000;
  return o;
}

// A shipper whose receiver took `n` batches and acknowledged none of them (yet).
struct UnackedRig {
  explicit UnackedRig(int n) {
    rx.ack = false;
    std::string error;
    spool = Spool::open(":memory:", {}, &error);
    REQUIRE(spool);
    spoolBatches(*spool, n);
    shipper = std::make_unique<Shipper>(io, ctx, clock, *spool, options(rx.endpoint()));
    REQUIRE(shipper->start(&error));
    REQUIRE(runUntil(io, [&] {
      rx.pump();
      shipper->kick();
      return rx.received == uint64_t(n);
    }));
  }
  zmq::context_t ctx;
  Receiver rx{ctx};
  boost::asio::io_context io;
  ManualClock clock;
  std::unique_ptr<Spool> spool;
  std::unique_ptr<Shipper> shipper;
};

}  // namespace

TEST_CASE("shipper: batches are acknowledged and leave the spool", "[shipper]") {
  zmq::context_t ctx;
  Receiver rx(ctx);
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  REQUIRE(spool);
  spoolBatches(*spool, 5);
  Shipper shipper(io, ctx, clock, *spool, options(rx.endpoint()));
  REQUIRE(shipper.start(&error));
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    shipper.kick();
    return spool->stats().batches == 0;
  }));
  CHECK(rx.batches.size() == 5);
  CHECK(rx.order == std::vector<uint64_t>{1, 2, 3, 4, 5});
  CHECK(shipper.stats().acked == 5);
  CHECK(shipper.inFlight() == 0);
  shipper.stop();
}

TEST_CASE("shipper: receiver down, spool fills (bounded), drains in order when it is back", "[shipper]") {
  zmq::context_t ctx;
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  SpoolOptions so;
  so.max_bytes = 64 << 10;
  auto spool = Spool::open(":memory:", so, &error);
  REQUIRE(spool);
  // Find a free port: bind, read it back, close.
  std::string endpoint;
  {
    Receiver probe(ctx);
    endpoint = probe.endpoint();
  }
  auto o = options(endpoint);
  o.max_in_flight = 4;
  Shipper shipper(io, ctx, clock, *spool, o);
  REQUIRE(shipper.start(&error));
  spoolBatches(*spool, 2000);  // ~50 bytes each: over the 64 KiB bound
  io.restart();
  io.poll();
  shipper.kick();
  CHECK(shipper.stats().sent == 0);  // ZMQ_IMMEDIATE: nothing queued without a connection
  auto st = spool->stats();
  CHECK(st.bytes <= so.max_bytes);
  CHECK(st.dropped_symptoms > 0);
  uint64_t kept = st.batches;
  uint64_t first_kept = spool->unacked(1, false)[0].sequence;

  Receiver rx(ctx, endpoint);
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    clock.advance(1'000'000'000);
    shipper.tick();
    return spool->stats().batches == 0;
  }, std::chrono::seconds(30)));
  CHECK(rx.batches.size() == kept);
  CHECK(rx.batches.front().header.sequence == first_kept);
  bool ordered = true;
  for (size_t i = 1; i < rx.batches.size(); ++i)
    ordered = ordered && rx.batches[i].header.sequence > rx.batches[i - 1].header.sequence;
  CHECK(ordered);
  shipper.stop();
}

TEST_CASE("shipper: an unacknowledged batch is resent after the timeout, duplicates are harmless", "[shipper]") {
  UnackedRig r(1);
  // References, not a structured binding: clang before 16 cannot capture one in a lambda.
  auto& rx = r.rx;
  auto& io = r.io;
  auto& clock = r.clock;
  auto& spool = *r.spool;
  auto& shipper = *r.shipper;
  shipper.tick();  // not yet timed out
  rx.ack = true;
  clock.advance(6'000'000'000);
  shipper.tick();
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    return spool.stats().batches == 0;
  }));
  CHECK(rx.received == 2);
  CHECK(rx.duplicates == 1);
  CHECK(rx.batches.size() == 1);
  CHECK(shipper.stats().resent == 1);
}

TEST_CASE("shipper: critical batches go first, the byte-rate cap holds sends back", "[shipper]") {
  zmq::context_t ctx;
  Receiver rx(ctx);
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  spoolBatches(*spool, 3, common::Severity::kWarning);
  spoolBatches(*spool, 1, common::Severity::kCritical);
  auto o = options(rx.endpoint());
  o.max_in_flight = 1;
  o.rate_bytes_per_sec = 100;
  o.rate_burst_bytes = 100;
  Shipper shipper(io, ctx, clock, *spool, o);
  REQUIRE(shipper.start(&error));
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    shipper.kick();
    return rx.received >= 1 && shipper.inFlight() == 0;
  }));
  CHECK(rx.order.front() == 4);  // the critical one, though spooled last
  // The bucket is empty now: nothing more until the (manual) clock refills it.
  rx.pump();
  shipper.kick();
  CHECK(rx.received == 1);
  CHECK(shipper.stats().throttled >= 1);
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    clock.advance(1'000'000'000);
    shipper.kick();
    return spool->stats().batches == 0;
  }));
  CHECK(rx.order == std::vector<uint64_t>{4, 1, 2, 3});
}

TEST_CASE("shipper: CurveZMQ with a generated key pair", "[shipper]") {
  char server_pub[41], server_sec[41], agent_pub[41], agent_sec[41];
  REQUIRE(zmq_curve_keypair(server_pub, server_sec) == 0);
  REQUIRE(zmq_curve_keypair(agent_pub, agent_sec) == 0);
  zmq::context_t ctx;
  Receiver rx(ctx, "tcp://127.0.0.1:*", server_sec);
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  spoolBatches(*spool, 2);
  auto o = options(rx.endpoint());
  o.curve_secret_key = agent_sec;
  o.curve_server_key = server_pub;
  Shipper shipper(io, ctx, clock, *spool, o);
  REQUIRE(shipper.start(&error));
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    shipper.kick();
    return spool->stats().batches == 0;
  }));
  CHECK(rx.batches.size() == 2);

  SECTION("a wrong server key gets nothing through") {
    char other_pub[41], other_sec[41];
    REQUIRE(zmq_curve_keypair(other_pub, other_sec) == 0);
    auto spool2 = Spool::open(":memory:", {}, &error);
    spoolBatches(*spool2, 1);
    auto o2 = o;
    o2.curve_server_key = other_pub;
    Shipper bad(io, ctx, clock, *spool2, o2);
    REQUIRE(bad.start(&error));
    runUntil(io, [&] {
      rx.pump();
      bad.kick();
      return false;
    }, std::chrono::milliseconds(300));
    CHECK(rx.batches.size() == 2);
    CHECK(spool2->stats().batches == 1);
  }
}

TEST_CASE("shipper: compression zstd sends batch+zstd, the receiver inflates it, acks as usual", "[shipper]") {
  zmq::context_t ctx;
  Receiver rx(ctx);
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  REQUIRE(spool);
  // A batch with repetitive evidence, as an NCCL storm produces: compresses well.
  common::SymptomBatchData b;
  b.header.agent_id = "agent-1";
  for (int i = 0; i < 50; ++i) {
    common::Symptom s;
    s.rule_id = "nccl.ib_completion_error";
    s.node = "gpu-node-1";
    s.device = "mlx5_" + std::to_string(i % 8) + ":1";
    s.severity = common::Severity::kError;
    s.count = 1000;
    s.evidence = {"NCCL WARN NET/IB : Got completion from peer 10.1.2.3<45678> with status=12 opcode=1 len=0 vendor err 129"};
    b.symptoms.push_back(s);
  }
  SpoolCommit c;
  c.batches = {b};
  REQUIRE(spool->commit(c, &error));
  auto packed = spool->unacked(1, false).front().payload.size();
  auto o = options(rx.endpoint());
  o.zstd = true;
  Shipper shipper(io, ctx, clock, *spool, o);
  REQUIRE(shipper.start(&error));
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    shipper.kick();
    return spool->stats().batches == 0;
  }));
  CHECK(rx.types["batch+zstd"] == 1);
  CHECK(rx.types.count("batch") == 0);
  REQUIRE(rx.batches.size() == 1);
  CHECK(rx.batches[0].symptoms.size() == 50);
  CHECK(rx.batches[0].symptoms[49].evidence == b.symptoms[49].evidence);
  CHECK(shipper.stats().compressed == 1);
  CHECK(shipper.stats().bytes_packed == packed);
  CHECK(shipper.stats().bytes_sent < packed / 2);
  // A heartbeat too small to gain from zstd goes out plain.
  HeartbeatData hb;
  hb.agent_id = "agent-1";
  REQUIRE(runUntil(io, [&] {
    shipper.sendHeartbeat(encodeHeartbeat(hb));
    rx.pump();
    return !rx.heartbeats.empty();
  }));
  CHECK(rx.types.count("heartbeat") == 1);
  shipper.stop();
}

TEST_CASE("shipper: a slow receiver gets one batch again per timeout, not every batch", "[shipper]") {
  UnackedRig r(8);  // the receiver sits on 8 batches
  // References, not a structured binding: clang before 16 cannot capture one in a lambda.
  auto& rx = r.rx;
  auto& io = r.io;
  auto& clock = r.clock;
  auto& spool = *r.spool;
  auto& shipper = *r.shipper;
  CHECK(shipper.ackTimeoutNs() == 5'000'000'000);
  clock.advance(6'000'000'000);
  shipper.tick();
  CHECK(shipper.stats().timed_out == 8);
  CHECK(shipper.stats().resent == 1);  // a fixed timeout sent all 8 again here
  CHECK(shipper.ackTimeoutNs() == 10'000'000'000);
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    return rx.received == 9;
  }));
  CHECK(rx.order.back() == 1);
  clock.advance(9'000'000'000);  // 15 s: the others' backed-off timeout is not over yet
  shipper.tick();
  CHECK(shipper.stats().resent == 1);
  clock.advance(2'000'000'000);  // 17 s: it is; again only the oldest
  shipper.tick();
  CHECK(shipper.stats().resent == 2);
  CHECK(shipper.ackTimeoutNs() == 20'000'000'000);
  rx.ack = true;  // it catches up: the last resend is acked and every other batch goes again in turn
  REQUIRE(runUntil(io, [&] {
    rx.pump();
    clock.advance(1'000'000'000);
    shipper.tick();
    return spool.stats().batches == 0;
  }, std::chrono::seconds(30)));
  CHECK(rx.batches.size() == 8);
  CHECK(shipper.stats().acked == 8);
  CHECK(shipper.stats().disconnects == 0);
}

TEST_CASE("shipper: batches out when the receiver dies go again as soon as it is back, without a timeout",
          "[shipper]") {
  zmq::context_t ctx;
  boost::asio::io_context io;
  ManualClock clock;
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  spoolBatches(*spool, 8);
  auto rx = std::make_unique<Receiver>(ctx);
  const std::string endpoint = rx->endpoint();
  rx->ack = false;
  Shipper shipper(io, ctx, clock, *spool, options(endpoint));
  REQUIRE(shipper.start(&error));
  REQUIRE(runUntil(io, [&] {
    rx->pump();
    shipper.kick();
    return rx->received == 8;
  }));
  rx.reset();  // dies with 8 batches it never stored
  REQUIRE(runUntil(io, [&] { return shipper.stats().disconnects == 1; }));
  CHECK(shipper.stats().resent == 8);
  rx = std::make_unique<Receiver>(ctx, endpoint);
  // The clock never moves: only the disconnect can have sent them again.
  bool drained = runUntil(io, [&] {
    rx->pump();
    return spool->stats().batches == 0;
  }, std::chrono::seconds(30));
  INFO("sent " << shipper.stats().sent << " resent " << shipper.stats().resent << " acked "
               << shipper.stats().acked << " in flight " << shipper.inFlight() << " disconnects "
               << shipper.stats().disconnects << " received " << rx->received);
  REQUIRE(drained);
  CHECK(rx->batches.size() == 8);
  CHECK(shipper.stats().timed_out == 0);
  CHECK(shipper.stats().acked == 8);
}

// The sender's retransmission timer (common/uplink/in_flight.h), driven with explicit steady
// times: the timeout before any ack, its adaptation to measured round trips (Karn: resends do not
// count), the back-off, one probe per timeout, and everything out going again when the
// connection is lost.
#include "common/uplink/in_flight.h"

#include <catch2/catch.hpp>

using faultline::uplink::InFlight;

namespace {
constexpr int64_t kS = 1'000'000'000;

std::vector<uint64_t> due(InFlight& f, int64_t now, size_t* timed_out = nullptr) {
  std::vector<uint64_t> again;
  size_t n = f.due(now, &again);
  if (timed_out) *timed_out = n;
  return again;
}
}  // namespace

TEST_CASE("in flight: the configured timeout holds until an ack is measured, then follows the round trip",
          "[shipper][in_flight]") {
  InFlight f(10 * kS, 60 * kS);
  CHECK(f.timeoutNs() == 10 * kS);
  f.sent(1, 0);
  CHECK(due(f, 10 * kS - 1).empty());
  // A fast link: the timeout stays at the floor.
  REQUIRE(f.acked(1, 2'000'000));
  CHECK(f.smoothedRttNs() == 2'000'000);
  CHECK(f.timeoutNs() == 10 * kS);
  CHECK_FALSE(f.acked(1, 3'000'000));  // a second ack of the same batch
  // Acks that take 20 s: SRTT moves towards 20 s, and the timeout with it (SRTT + 4 RTTVAR, capped).
  int64_t t = kS;
  for (uint64_t seq = 2; seq < 40; ++seq) {
    f.sent(seq, t);
    REQUIRE(f.acked(seq, t + 20 * kS));
    t += 21 * kS;
  }
  CHECK(f.smoothedRttNs() > 19 * kS);
  CHECK(f.smoothedRttNs() <= 20 * kS);
  CHECK(f.timeoutNs() > 20 * kS);
  CHECK(f.timeoutNs() <= 60 * kS);
}

TEST_CASE("in flight: a timeout sends only the oldest batch again and doubles the timeout", "[shipper][in_flight]") {
  InFlight f(10 * kS, 60 * kS);
  for (uint64_t seq = 1; seq <= 4; ++seq) f.sent(seq, 0);
  size_t timed_out = 0;
  CHECK(due(f, 10 * kS, &timed_out) == std::vector<uint64_t>{1});
  CHECK(timed_out == 4);
  CHECK(f.backoff() == 2);
  CHECK(f.timeoutNs() == 20 * kS);
  CHECK(f.size() == 3);  // 2..4 wait, 1 is to be sent again
  CHECK_FALSE(f.contains(1));
  f.sent(1, 10 * kS);
  // Nothing more until the backed-off timeout has passed for the others too.
  CHECK(due(f, 29 * kS).empty());
  // Then again only one: the oldest (1, whose resend went unanswered as well).
  CHECK(due(f, 30 * kS, &timed_out) == std::vector<uint64_t>{1});
  CHECK(timed_out == 4);
  CHECK(f.backoff() == 4);
  CHECK(f.timeoutNs() == 40 * kS);
  f.sent(1, 30 * kS);
  // The back-off stops at the ceiling.
  due(f, 70 * kS);
  CHECK(f.timeoutNs() == 60 * kS);
}

TEST_CASE("in flight: a slow receiver that acks its queue in order gets one probe, not every batch again",
          "[shipper][in_flight]") {
  InFlight f(10 * kS, 60 * kS);
  for (uint64_t seq = 1; seq <= 16; ++seq) f.sent(seq, 0);
  CHECK(due(f, 10 * kS) == std::vector<uint64_t>{1});
  f.sent(1, 10 * kS);
  // The queue drains at 15 s: the first send of 1 is acked (it looks like the probe's ack), then
  // 2..16 right behind it, each a measured 15 s round trip.
  REQUIRE(f.acked(1, 15 * kS));
  for (uint64_t seq = 2; seq <= 16; ++seq) REQUIRE(f.acked(seq, 15 * kS + 1'000'000 * int64_t(seq)));
  CHECK(f.size() == 0);
  // After the grace period nothing is left to send again; the timeout now covers 15 s.
  CHECK(due(f, 20 * kS).empty());
  CHECK(f.backoff() == 1);
  CHECK(f.timeoutNs() > 15 * kS);
  // The next batches wait longer than 15 s without a resend.
  f.sent(17, 20 * kS);
  CHECK(due(f, 35 * kS).empty());
}

TEST_CASE("in flight: when the connection drops every batch out goes again at once, resends measure nothing",
          "[shipper][in_flight]") {
  InFlight f(10 * kS, 60 * kS);
  f.sent(1, 0);
  REQUIRE(f.acked(1, 1'000'000));
  for (uint64_t seq = 2; seq <= 9; ++seq) f.sent(seq, kS);
  CHECK(due(f, 11 * kS) == std::vector<uint64_t>{2});
  CHECK(f.backoff() == 2);
  f.sent(2, 11 * kS);
  // The receiver died with 2..9 in its queue: no waiting for the backed-off timeout.
  std::vector<uint64_t> again;
  f.lost(&again);
  CHECK(again == std::vector<uint64_t>{2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(f.size() == 0);
  for (uint64_t seq = 2; seq <= 9; ++seq) f.sent(seq, 12 * kS);
  // Acks of batches sent twice measure nothing (Karn), and do not reset the back-off.
  for (uint64_t seq = 2; seq <= 9; ++seq) REQUIRE(f.acked(seq, 12 * kS + 7'000'000));
  CHECK(f.smoothedRttNs() == 1'000'000);
  CHECK(f.backoff() == 2);
  // The first measured ack does.
  f.sent(10, 15 * kS);
  REQUIRE(f.acked(10, 15 * kS + 1'000'000));
  CHECK(f.backoff() == 1);
  CHECK(f.timeoutNs() == 10 * kS);
}

TEST_CASE("in flight: an ack of the first send after the batch was released for a resend cancels the resend",
          "[shipper][in_flight]") {
  InFlight f(10 * kS, 60 * kS);
  f.sent(1, 0);
  CHECK(due(f, 10 * kS) == std::vector<uint64_t>{1});
  // Not sent again yet (no connection), and the first send's ack arrives: not out, so false.
  CHECK_FALSE(f.acked(1, 11 * kS));
  // Sent later anyway (the caller's queue had it): it counts as a first send, its ack measures.
  f.sent(1, 12 * kS);
  REQUIRE(f.acked(1, 12 * kS + 5'000'000));
  CHECK(f.smoothedRttNs() == 5'000'000);
  f.forget(1);
  CHECK(f.size() == 0);
}

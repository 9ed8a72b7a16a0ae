// The agent's half of issue 30: error lines no rule matched become template sightings
// (agent/unmatched_templates.h) — counted, bounded per batch and in memory — and leave the node
// on the batch path (common/wire.h UnmatchedTemplate), through a real file source, spool and
// ZeroMQ shipper to an acking receiver.
#include "agent/unmatched_templates.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <set>

#include "agent/agent.h"
#include "agent/sources/file_source.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

constexpr int64_t kNs = 1'717'243'200'000'000'000;  // 2024-06-01T12:00:00Z

common::LogRecord record(const std::string& text, int64_t ns = kNs, bool timed = true) {
  common::LogRecord r;
  r.text = text;
  r.time_ns = ns;
  r.time_known = timed;
  return r;
}

}  // namespace

TEST_CASE("unmatched templates: error lines group into sightings, benign lines do not count", "[unmatched]") {
  UnmatchedTemplates u;
  u.add(record("orbitald: cannot reconcile ledger 0x3f2a: quorum failure", kNs + 5), common::SourceKind::kJournal, 0);
  u.add(record("orbitald: cannot reconcile ledger 0x77b1: quorum failure", kNs + 1), common::SourceKind::kJournal, 0);
  u.add(record("orbitald: ledger 0x77b1 reconciled in 12 ms", kNs + 2), common::SourceKind::kJournal, 0);
  // A traceback joined into one record: each line judged on its own.
  u.add(record("Traceback (most recent call last):\n  File \"x.py\", line 3\nZeroDivisionError: division by zero",
               kNs + 9, false),
        common::SourceKind::kApplication, kNs + 100);
  uint64_t left = 0, left_lines = 0;
  auto got = u.take(&left, &left_lines);
  CHECK(left == 0);
  CHECK(left_lines == 0);
  REQUIRE(got.size() == 3);
  std::map<std::string, common::UnmatchedTemplate> by_text;
  for (const auto& t : got) by_text[t.text] = t;
  REQUIRE(by_text.count("orbitald: cannot reconcile ledger <HEX>: quorum failure"));
  const auto& ledger = by_text["orbitald: cannot reconcile ledger <HEX>: quorum failure"];
  CHECK(ledger.count == 2);
  CHECK(ledger.time_known);
  CHECK(ledger.first_ns == kNs + 1);  // the earlier stamp, not the first read
  CHECK(ledger.first_line == "orbitald: cannot reconcile ledger 0x77b1: quorum failure");
  CHECK(ledger.kind == common::SourceKind::kJournal);
  for (const auto& [text, t] : by_text) {
    if (t.kind != common::SourceKind::kApplication) continue;
    CHECK_FALSE(t.time_known);
    CHECK(t.first_ns == kNs + 100);  // unstamped: when the agent read it
  }
  CHECK(by_text.count("Traceback (most recent call last):"));
  CHECK(by_text.count("ZeroDivisionError: division by zero"));
  CHECK(u.stats().lines == 4);
  // Taken: the next interval starts empty.
  CHECK(u.take(nullptr, nullptr).empty());
  u.add(record("orbitald: cannot reconcile ledger 0x1234: quorum failure", kNs + 50), common::SourceKind::kJournal, 0);
  got = u.take(nullptr, nullptr);
  REQUIRE(got.size() == 1);
  CHECK(got[0].count == 1);
  CHECK(got[0].first_ns == kNs + 50);
}

TEST_CASE("unmatched templates: at most max_per_batch a take, new templates first, the rest counted", "[unmatched]") {
  UnmatchedTemplatesOptions o;
  o.max_per_batch = 4;
  UnmatchedTemplates u(o);
  // An old, chatty template from an earlier interval...
  for (int i = 0; i < 50; ++i)
    u.add(record("worker pool error: queue full " + std::to_string(i)), common::SourceKind::kJournal, 0);
  CHECK(u.take(nullptr, nullptr).size() == 1);
  for (int i = 0; i < 50; ++i)
    u.add(record("worker pool error: queue full " + std::to_string(i)), common::SourceKind::kJournal, 0);
  // ... and six new ones of distinct shapes (their first words differ: six templates).
  const char* words[] = {"alpha", "bravo", "charlie", "delta", "echo", "foxtrot"};
  for (int k = 0; k < 6; ++k)
    for (int i = 0; i <= k; ++i)
      u.add(record(std::string(words[k]) + " subsystem failed to attach", kNs + k), common::SourceKind::kKernel, 0);
  uint64_t left = 0, left_lines = 0;
  auto got = u.take(&left, &left_lines);
  REQUIRE(got.size() == 4);
  CHECK(left == 3);
  // The new ones first, fewest lines first: alpha (1), bravo (2), charlie (3), delta (4); echo,
  // foxtrot and the chatty old one are left out with their 5 + 6 + 50 lines.
  CHECK(got[0].text == "alpha subsystem failed to attach");
  CHECK(got[3].text == "delta subsystem failed to attach");
  CHECK(left_lines == 61);
  CHECK(u.stats().left_out == 3);
  CHECK(u.stats().shipped == 5);
}

TEST_CASE("unmatched templates: put back after a failed commit, counted with the next take", "[unmatched]") {
  UnmatchedTemplates u;
  u.add(record("raft: election timeout on peer 7"), common::SourceKind::kJournal, 0);
  auto first = u.take(nullptr, nullptr);
  REQUIRE(first.size() == 1);
  u.putBack(first);
  u.add(record("mount error(112): Host is down"), common::SourceKind::kKernel, 0);
  auto again = u.take(nullptr, nullptr);
  REQUIRE(again.size() == 2);
  std::set<std::string> texts;
  for (const auto& t : again) texts.insert(t.text);
  CHECK(texts.count(first[0].text));
  CHECK(u.take(nullptr, nullptr).empty());
}

TEST_CASE("unmatched templates: memory stays bounded under 100,000 distinct error lines", "[unmatched]") {
  UnmatchedTemplates u;  // the agent's defaults
  size_t peak = 0;
  for (int i = 0; i < 100'000; ++i) {
    // Distinct constant words (no number to mask): every line a new template, lines of ~200 bytes.
    std::string word;
    for (int v = i; v > 0 || word.empty(); v /= 26) word += static_cast<char>('a' + v % 26);
    u.add(record("svc" + word + " failed: the " + word + " handler " + std::string(150, 'x') + word + " aborted"),
          common::SourceKind::kJournal, 0);
    if (i % 1000 == 999) {
      peak = std::max(peak, u.memoryBytes());
      if (i % 5000 == 4999) u.take(nullptr, nullptr);  // a batch now and then
    }
  }
  INFO("peak " << peak << " bytes");
  CHECK(peak < UnmatchedTemplates::kMaxMemoryBytes);
  CHECK(u.miner().size() <= UnmatchedTemplatesOptions{}.max_templates);
  CHECK(u.pending() <= 2 * UnmatchedTemplatesOptions{}.max_templates);
  CHECK(u.stats().lines == 100'000);
}

TEST_CASE("agent: an error line no rule matched leaves the node as a template count, not as lines",
          "[agent][unmatched]") {
  TempDir dir;
  boost::asio::io_context io;
  ManualClock clock{kNs + 60'000'000'000};
  Logger log{clock, 0};
  zmq::context_t ctx;
  Receiver rx{ctx};
  const std::string path = dir.file("app.log");
  {
    std::ofstream f(path);
    f << "2024-06-01T12:00:01+0000 gpu-node-1 orbitald[311]: starting ledger sync\n"
      << "2024-06-01T12:00:02+0000 gpu-node-1 orbitald[311]: cannot reconcile ledger 0x3f2a: quorum failure\n"
      << "2024-06-01T12:00:03+0000 gpu-node-1 orbitald[311]: cannot reconcile ledger 0x3f2b: quorum failure\n"
      << "2024-06-01T12:00:04+0000 gpu-node-1 orbitald[311]: cannot reconcile ledger 0x3f2c: quorum failure\n";
  }
  for (bool mine : {true, false}) {
    INFO("mine_unmatched " << mine);
    std::string error;
    auto spool = Spool::open(dir.file(mine ? "spool-on.db" : "spool-off.db"), {}, &error);
    REQUIRE(spool);
    Shipper shipper(io, ctx, clock, *spool, shipperTo(rx));
    REQUIRE(shipper.start(&error));
    std::vector<std::unique_ptr<Source>> sources;
    FileOptions f;
    f.path = path;
    f.from_start = true;
    f.fallback_poll_ms = 0;
    sources.push_back(std::make_unique<FileSource>(io, f));
    AgentOptions o;
    o.agent_id = "agent-1";
    o.hostname = "gpu-node-1";
    o.boot_id = "boot-1";
    o.batch_interval_ms = 0;
    o.heartbeat_interval_ms = 0;
    o.mine_unmatched = mine;
    Agent agent(io, clock, shippedRules(), std::move(sources), *spool, &shipper, o, log);
    agent.start();
    rx.batches.clear();
    // The parser holds the last record back (a continuation may follow); the commit flushes it.
    REQUIRE(runUntil(io, [&] { return agent.sourceHealth()[0].records >= 3; }));
    REQUIRE(agent.commit());
    CHECK(agent.sourceHealth()[0].records == 4);
    if (mine) {
      REQUIRE(runUntil(io, [&] {
        rx.pump();
        return spool->stats().batches == 0 && !rx.batches.empty();
      }));
      std::vector<common::UnmatchedTemplate> got;
      for (const auto& b : rx.batches) {
        CHECK(b.symptoms.empty());  // the lines matched no rule
        got.insert(got.end(), b.unmatched.begin(), b.unmatched.end());
      }
      REQUIRE(got.size() == 1);
      CHECK(got[0].text == "cannot reconcile ledger <HEX>: quorum failure");
      CHECK(got[0].count == 3);
      CHECK(got[0].first_line == "cannot reconcile ledger 0x3f2a: quorum failure");
      CHECK(got[0].time_known);
      CHECK(got[0].first_ns == kNs + 2'000'000'000);
      CHECK(got[0].kind == common::SourceKind::kJournal);
      CHECK(agent.stats().unmatched_records == 3);
    } else {
      // Nothing to send: no batch at all, and the miner saw nothing.
      CHECK(spool->stats().batches == 0);
      CHECK(spool->stats().next_sequence == 1);
      CHECK(agent.stats().unmatched_records == 0);
      CHECK(agent.unmatched().stats().lines == 0);
    }
    agent.stop();
    shipper.stop();
  }
}

// file_globs are expanded again while the agent runs: a log file created later (a new job's
// application log) is picked up at the next discovery, read from its first line, and never added
// twice.
#include <catch2/catch.hpp>
#include <fstream>
#include <memory>

#include "agent/agent.h"
#include "agent/sources/file_source.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

const char* kNcclWarn =
    "2024-06-01T12:00:05.123456+00:00 gpu-node-1 python[4242]: gpu-node-1:4242:4300 [3] NCCL WARN NET/IB : Got "
    "completion from peer 10.1.2.3<45678> with status=12 opcode=1 len=0 vendor err 129 (Recv) localGid ::ffff:10.1.2.4 "
    "remoteGids::ffff:10.1.2.3";

void appendLine(const std::string& path, const std::string& line) { std::ofstream(path, std::ios::app) << line << "\n"; }

// A file source on `path` (inotify only, reads `delay_ms` after a change, and every 2 * delay_ms
// while a writer keeps appending) counting its records into *records, started and past its first
// look at the file.
std::unique_ptr<FileSource> startDelayed(boost::asio::io_context& io, const std::string& path, int delay_ms,
                                         uint64_t* records) {
  FileOptions o;
  o.path = path;
  o.fallback_poll_ms = 0;
  o.read_delay_ms = delay_ms;
  o.steady_read_delay_ms = 2 * delay_ms;
  auto src = std::make_unique<FileSource>(io, o);
  src->start("", [records](common::LogRecord&&, common::SourceKind) { ++*records; });
  REQUIRE(runUntil(io, [&] { return src->checkpoint().size() > 0; }));
  return src;
}

}  // namespace

TEST_CASE("file_globs: expansion lists regular files, sorted, once", "[file_globs]") {
  TempDir dir;
  appendLine(dir.file("b.log"), "x");
  appendLine(dir.file("a.log"), "x");
  appendLine(dir.file("a.txt"), "x");
  std::filesystem::create_directory(dir.file("dir.log"));
  auto files = expandFileGlobs({dir.file("*.log"), dir.file("a.*"), dir.file("none-*.log")});
  CHECK(files == std::vector<std::string>{dir.file("a.log"), dir.file("a.txt"), dir.file("b.log")});
}

TEST_CASE("file_globs: a file that appears later is followed from its first line", "[file_globs][agent]") {
  TempDir dir;
  std::string logs = dir.file("logs");
  std::filesystem::create_directory(logs);
  appendLine(logs + "/job-1.log", "starting");
  boost::asio::io_context io;
  ManualClock clock(1'717'243'200'000'000'000);
  Logger log(clock, 0);
  std::string error;
  auto spool = Spool::open(":memory:", {}, &error);
  REQUIRE(spool);
  const std::vector<std::string> globs = {logs + "/*.log"};
  auto makeFile = [&](const std::string& path, bool from_start) {
    FileOptions o;
    o.path = path;
    o.from_start = from_start;
    o.fallback_poll_ms = 0;
    return std::make_unique<FileSource>(io, o);
  };
  std::vector<std::unique_ptr<Source>> sources;
  for (const auto& p : expandFileGlobs(globs)) sources.push_back(makeFile(p, false));
  AgentOptions ao;
  ao.agent_id = "agent-1";
  ao.hostname = "gpu-node-1";
  ao.batch_interval_ms = 0;
  ao.heartbeat_interval_ms = 0;
  ao.discovery_interval_ns = 30'000'000'000;
  Agent agent(io, clock, shippedRules(), std::move(sources), *spool, nullptr, ao, log);
  int discoveries = 0;
  agent.setSourceDiscovery([&](const std::vector<std::string>& known) {
    ++discoveries;
    std::vector<std::unique_ptr<Source>> fresh;
    for (const auto& p : expandFileGlobs(globs))
      if (std::find(known.begin(), known.end(), p) == known.end()) fresh.push_back(makeFile(p, true));
    return fresh;
  });
  agent.start();
  CHECK(agent.sourceCount() == 1);

  // A new job writes its log before the agent has looked again: nothing may be missed.
  appendLine(logs + "/job-2.log", kNcclWarn);
  appendLine(logs + "/job-2.log", kNcclWarn);
  clock.advance(10'000'000'000);
  agent.periodic();  // not due yet
  CHECK(discoveries == 0);
  CHECK(agent.sourceCount() == 1);
  clock.advance(20'000'000'000);
  agent.periodic();
  CHECK(discoveries == 1);
  REQUIRE(agent.sourceCount() == 2);
  CHECK(agent.stats().sources_added == 1);
  // (The parser holds a record back until the next line shows it is complete; a commit flushes.)
  REQUIRE(runUntil(io, [&] {
    agent.commit();
    return agent.stats().records == 2;
  }));
  // ... and it keeps being followed.
  appendLine(logs + "/job-2.log", kNcclWarn);
  REQUIRE(runUntil(io, [&] {
    agent.commit();
    for (auto& s : agent.sourceHealth())
      if (s.name == logs + "/job-2.log" && s.records == 3) return true;
    return false;
  }));
  CHECK(agent.stats().symptoms == 3);
  // The next expansion finds nothing new.
  clock.advance(30'000'000'000);
  agent.periodic();
  CHECK(discoveries == 2);
  CHECK(agent.sourceCount() == 2);
  // Its checkpoint is committed with the rest.
  REQUIRE(agent.commit());
  CHECK(spool->checkpoints().count(logs + "/job-2.log") == 1);
  agent.stop();
}

TEST_CASE("file source: with a read delay, many appends are read in one wakeup, none lost", "[file_globs]") {
  TempDir dir;
  std::string path = dir.file("app.log");
  appendLine(path, "start");
  boost::asio::io_context io;
  uint64_t records = 0;
  auto src = startDelayed(io, path, 50, &records);
  for (int i = 0; i < 200; ++i) appendLine(path, kNcclWarn);
  REQUIRE(runUntil(io, [&] {
    src->flush();
    return records == 200;
  }));
  appendLine(path, kNcclWarn);
  REQUIRE(runUntil(io, [&] {
    src->flush();
    return records == 201;
  }));
  src->stop();
}

TEST_CASE("file source: with a read delay, a steady writer is read on the timer, a rotation meanwhile and a later write are not lost",
          "[file_globs]") {
  TempDir dir;
  std::string path = dir.file("app.log");
  appendLine(path, "start");
  boost::asio::io_context io;
  uint64_t records = 0, written = 0;
  auto src = startDelayed(io, path, 20, &records);
  // The writer appends at every turn of the loop, so each read finds new lines (the timer path).
  REQUIRE(runUntil(io, [&] {
    appendLine(path, kNcclWarn);
    ++written;
    return records >= 100;
  }));
  // logrotate while lines keep coming: the old file gets its last lines, then a new file starts.
  REQUIRE(::rename(path.c_str(), (path + ".1").c_str()) == 0);
  for (int i = 0; i < 3; ++i, ++written) appendLine(path + ".1", kNcclWarn);
  for (int i = 0; i < 5; ++i, ++written) appendLine(path, kNcclWarn);
  REQUIRE(runUntil(io, [&] {
    src->flush();
    return records == written;
  }));
  // The writer stops: the next read finds nothing and the source waits for inotify again; one
  // more line wakes it.
  REQUIRE(runUntil(io, [&] { return src->idle(); }));
  appendLine(path, kNcclWarn);
  ++written;
  REQUIRE(runUntil(io, [&] {
    src->flush();
    return records == written;
  }));
  CHECK(src->health().status == "ok");
  src->stop();
}

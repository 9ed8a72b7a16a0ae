// Crash test: the real faultline-agent binary is SIGKILLed at random points while a log is being
// appended, and restarted; the receiver must count every symptom exactly once — the same
// per-rule occurrence counts as the offline engine run over the same file.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <random>

#include "tests/agent/test_util.h"
#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"

extern char** environ;

using namespace faultline;
using namespace faultline::agent::testing;

namespace {

pid_t spawnAgent(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Waits on the receiver's socket (not a sleep) for up to `ms`, acking as batches arrive.
void pumpFor(Receiver& rx, int ms) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    rx.waitReadable(std::chrono::milliseconds(2));
    rx.pump();
  }
}

std::map<std::string, uint64_t> offlineCounts(const std::string& path) {
  auto rules = shippedRules();
  common::RuleEngine engine(rules);
  std::map<std::string, uint64_t> counts;
  common::MatchContext ctx;
  ctx.node = "crash-node";
  ctx.kind = common::SourceKind::kFabricManager;
  auto parser = common::makeStreamParser(common::LogFormat::kFabricManager, {}, [&](common::LogRecord&& r) {
    if (auto s = engine.extract(r, ctx)) counts[s->rule_id] += s->count;
  });
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  parser->feed(all);
  parser->finish();
  return counts;
}

}  // namespace

TEST_CASE("crash: SIGKILL at random points while logs are appended, every symptom exactly once", "[crash]") {
  TempDir dir;
  zmq::context_t ctx;
  Receiver rx(ctx);
  std::string log = dir.file("fabricmanager.log");
  std::ofstream(log).flush();
  const std::vector<std::string> args = {
      FAULTLINE_AGENT_BIN, "--journald", "false", "--kmsg", "false", "--fabricmanager-log", log,
      "--files-from-start", "true", "--file-poll-ms", "20", "--endpoints", rx.endpoint(),
      "--spool-path", dir.file("spool.db"), "--batch-interval-ms", "20", "--aggregate-window-s", "0",
      "--ack-timeout-ms", "200", "--rules-dirs", std::string(FAULTLINE_SOURCE_DIR) + "/rules",
      "--rules-override-dir", "", "--log-rate-per-minute", "0", "--hostname", "crash-node",
      "--agent-id", "crash-agent", "--heartbeat-interval-s", "1"};
  const std::vector<std::string> lines = {
      "[Sat Jun 01 2024 12:00:01] [ERROR] [tid 2211] detected NVSwitch fatal error 12020 on fid 0 on NVSwitch pci "
      "bus id 00000000:06:00.0 physical id 9 port 17",
      "[Sat Jun 01 2024 12:00:02] [ERROR] [tid 2211] received GPU NVLink fatal error on fid 0 on GPU pci bus id "
      "00000000:07:00.0 port 11",
      "[Sat Jun 01 2024 12:00:03] [INFO] [tid 2211] benign chatter that matches no rule",
  };
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);  // reproduce the append pattern (not the kill timing) with this seed
  std::mt19937 rng(seed);
  int kills = 0;
  size_t written = 0;
  for (int round = 0; round < 25; ++round) {
    pid_t pid = spawnAgent(args);
    REQUIRE(pid > 0);
    // Append while the agent runs, in bursts, then kill it at a random instant. The first burst
    // waits until the agent has shipped something, so kills land in a live pipeline, not during
    // startup.
    int bursts = 2 + static_cast<int>(rng() % 4);
    for (int b = 0; b < bursts; ++b) {
      uint64_t before = rx.received;
      std::ofstream out(log, std::ios::app);
      if (b == 0) {  // something to ship for sure
        out << lines[0] << "\n";
        ++written;
      }
      int n = 1 + static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) out << lines[rng() % lines.size()] << "\n";
      written += static_cast<size_t>(n);
      out.flush();
      if (b == 0) {
        auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (rx.received == before && std::chrono::steady_clock::now() < until) pumpFor(rx, 5);
        REQUIRE(rx.received > before);
      } else {
        pumpFor(rx, static_cast<int>(rng() % 60));
      }
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    ++kills;
    // Also append while it is down.
    std::ofstream out(log, std::ios::app);
    out << lines[round % 2] << "\n";
    ++written;
  }
  auto expected = offlineCounts(log);
  uint64_t expected_total = 0;
  for (const auto& [r, c] : expected) expected_total += c;
  REQUIRE(expected_total > 100);
  // Final run: let it drain everything.
  pid_t pid = spawnAgent(args);
  REQUIRE(pid > 0);
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rx.occurrences() < expected_total && std::chrono::steady_clock::now() < end) pumpFor(rx, 50);
  pumpFor(rx, 300);  // anything extra would show up as an over-count
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
  INFO("kills " << kills << ", lines " << written << ", batches " << rx.batches.size() << ", resent duplicates "
                << rx.duplicates);
  CHECK(rx.countsByRule() == expected);
  CHECK(rx.bad == 0);
}

// The whole pipeline on one io_context: FIFO-as-kmsg and a Fabric Manager file → rule engine →
// aggregation → spool → shipper → a minimal acking receiver. Also: a restart resumes open
// aggregation groups and checkpoints, so nothing is counted twice or lost.
#include "agent/agent.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "agent/config.h"
#include "agent/sources/file_source.h"
#include "agent/sources/kmsg_source.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

const char* kXid79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.";
const char* kFmFatal =
    "[Sat Jun 01 2024 12:00:01] [ERROR] [tid 2211] detected NVSwitch fatal error 12020 on fid 0 on NVSwitch pci bus id "
    "00000000:06:00.0 physical id 9 port 17";

struct Harness {
  TempDir dir;
  std::string fifo = dir.file("kmsg");
  std::string fm = dir.file("fabricmanager.log");
  std::string spool_path = dir.file("spool.db");
  boost::asio::io_context io;
  ManualClock clock{1'717'243'203'000'000'000};  // 3 s after the boot below: inside the windows
  Logger log{clock, 0};
  zmq::context_t ctx;
  Receiver rx{ctx};
  int writer = -1;

  Harness() {
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::ofstream(fm).flush();
  }
  ~Harness() {
    if (writer >= 0) ::close(writer);
  }
  void kmsg(uint64_t seq, const std::string& text) {
    if (writer < 0) writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    std::string rec = "3," + std::to_string(seq) + "," + std::to_string(seq * 1000) + ",-;" + text + "\n";
    REQUIRE(::write(writer, rec.data(), rec.size()) == static_cast<ssize_t>(rec.size()));
  }
  void fmLine(const std::string& line) {
    std::ofstream f(fm, std::ios::app);
    f << line << "\n";
  }
  std::vector<std::unique_ptr<Source>> sources() {
    std::vector<std::unique_ptr<Source>> s;
    KmsgOptions k;
    k.path = fifo;
    k.boot_id = "boot-1";
    k.boot_time_ns = 1'717'243'200'000'000'000;
    s.push_back(std::make_unique<KmsgSource>(io, k));
    FileOptions f;
    f.path = fm;
    f.format = common::LogFormat::kFabricManager;
    f.from_start = true;
    f.fallback_poll_ms = 0;
    s.push_back(std::make_unique<FileSource>(io, f));
    return s;
  }
  AgentOptions options() {
    AgentOptions o;
    o.agent_id = "agent-1";
    o.hostname = "gpu-node-1";
    o.boot_id = "boot-1";
    o.batch_interval_ms = 0;  // commits driven by the test
    o.heartbeat_interval_ms = 0;
    o.aggregate_window_ns = 10'000'000'000;
    return o;
  }
  ShipperOptions shipperOptions() {
    ShipperOptions so;
    so.endpoints = {rx.endpoint()};
    so.agent_id = "agent-1";
    so.tick_ms = 0;
    return so;
  }
};

}  // namespace

TEST_CASE("agent: kmsg + Fabric Manager lines become a handful of symptoms at the receiver", "[agent]") {
  Harness h;
  std::string error;
  auto spool = Spool::open(h.spool_path, {}, &error);
  REQUIRE(spool);
  Shipper shipper(h.io, h.ctx, h.clock, *spool, h.shipperOptions());
  REQUIRE(shipper.start(&error));
  Agent agent(h.io, h.clock, shippedRules(), h.sources(), *spool, &shipper, h.options(), h.log);
  agent.start();
  // A burst of identical Xids, a benign line, and a Fabric Manager fatal error.
  for (uint64_t seq = 1; seq <= 500; ++seq) h.kmsg(seq, seq == 250 ? "usb 1-1: new high-speed USB device" : kXid79);
  h.fmLine(kFmFatal);
  REQUIRE(runUntil(h.io, [&] { return agent.stats().records == 500; }));
  // The Fabric Manager parser holds its last record until the next line; a commit flushes it.
  REQUIRE(agent.commit());
  CHECK(agent.stats().records == 501);
  CHECK(agent.stats().symptoms == 500);
  CHECK(agent.openGroups() == 2);      // both still inside their window
  CHECK(spool->stats().batches == 0);  // nothing ready yet
  h.clock.advance(3600'000'000'000);   // an hour later: windows closed
  REQUIRE(agent.commit());
  REQUIRE(runUntil(h.io, [&] {
    h.rx.pump();
    return spool->stats().batches == 0 && h.rx.batches.size() >= 1;
  }));
  auto counts = h.rx.countsByRule();
  CHECK(counts["xid.79"] == 499);
  CHECK(counts["fm.nvswitch_fatal"] == 1);
  size_t symptoms = 0;
  for (const auto& b : h.rx.batches) {
    symptoms += b.symptoms.size();
    CHECK(b.header.agent_id == "agent-1");
    CHECK(b.header.boot_id == "boot-1");
    CHECK_FALSE(b.header.ruleset_version.empty());
    CHECK(b.sources.size() == 2);
  }
  CHECK(symptoms == 2);  // 500 matching lines left the node as two symptoms
  const auto& xid = h.rx.batches[0].symptoms[0].rule_id == "xid.79" ? h.rx.batches[0].symptoms[0]
                                                                   : h.rx.batches.back().symptoms[0];
  CHECK(xid.device == "0000:3b:00.0");
  CHECK(xid.node == "gpu-node-1");
  CHECK(xid.first_ns == 1'717'243'200'000'000'000 + 1'000'000);
  CHECK(xid.evidence.size() <= common::Symptom::kMaxEvidence);
  agent.stop();
  shipper.stop();
}

TEST_CASE("agent: restart resumes open groups and checkpoints, nothing twice, nothing lost", "[agent]") {
  Harness h;
  std::string error;
  {
    auto spool = Spool::open(h.spool_path, {}, &error);
    Agent agent(h.io, h.clock, shippedRules(), h.sources(), *spool, nullptr, h.options(), h.log);
    agent.start();
    for (uint64_t seq = 1; seq <= 10; ++seq) h.kmsg(seq, kXid79);
    h.fmLine(kFmFatal);
    REQUIRE(runUntil(h.io, [&] { return agent.stats().records == 10; }));
    REQUIRE(agent.commit());
    REQUIRE(agent.stats().records == 11);
    // Records read after the last commit are not checkpointed: they are read again after the
    // "crash" below (the FIFO stands in for a ring buffer that still holds them).
    for (uint64_t seq = 11; seq <= 15; ++seq) h.kmsg(seq, kXid79);
    REQUIRE(runUntil(h.io, [&] { return agent.stats().records == 16; }));
    // no stop(): simulate a crash (the destructor only cancels)
  }
  auto spool = Spool::open(h.spool_path, {}, &error);
  REQUIRE(spool);
  Shipper shipper(h.io, h.ctx, h.clock, *spool, h.shipperOptions());
  REQUIRE(shipper.start(&error));
  Agent agent(h.io, h.clock, shippedRules(), h.sources(), *spool, &shipper, h.options(), h.log);
  agent.start();
  CHECK(agent.openGroups() == 2);  // restored from the spool
  // The device replays its ring buffer on reopen; the checkpoint (seq 10) filters what was done.
  for (uint64_t seq = 1; seq <= 15; ++seq) h.kmsg(seq, kXid79);
  REQUIRE(runUntil(h.io, [&] { return agent.stats().records == 5; }));
  h.clock.advance(3600'000'000'000);
  REQUIRE(agent.commit());
  REQUIRE(runUntil(h.io, [&] {
    h.rx.pump();
    return spool->stats().batches == 0 && !h.rx.batches.empty();
  }));
  auto counts = h.rx.countsByRule();
  CHECK(counts["xid.79"] == 15);
  CHECK(counts["fm.nvswitch_fatal"] == 1);
  agent.stop();
  shipper.stop();
}

TEST_CASE("agent: heartbeat carries versions, boot id and each source's status", "[agent]") {
  Harness h;
  std::string error;
  auto spool = Spool::open(h.spool_path, {}, &error);
  Agent agent(h.io, h.clock, shippedRules(), h.sources(), *spool, nullptr, h.options(), h.log);
  agent.start();
  auto hb = agent.heartbeat();
  CHECK(hb.agent_id == "agent-1");
  CHECK(hb.boot_id == "boot-1");
  CHECK(hb.agent_version == FAULTLINE_VERSION);
  CHECK_FALSE(hb.ruleset_version.empty());
  REQUIRE(hb.sources.size() == 2);
  CHECK(hb.sources[0].name == "kmsg");
  CHECK(hb.sources[0].status == "ok");
  agent.stop();
}

TEST_CASE("config: YAML, flags override it, problems listed with file:line", "[config]") {
  TempDir dir;
  std::string path = dir.file("agent.yaml");
  {
    std::ofstream f(path);
    f << "endpoints: [tcp://agg:7400]\nbatch_interval_ms: 500\nkernel_source: journal\njournald: false\n";
  }
  const char* argv[] = {"faultline-agent", "--config", path.c_str(), "--batch-interval-ms", "250", "--kmsg", "false"};
  auto p = parseCommandLine(7, argv);
  CHECK(p.errors.empty());
  CHECK(p.config.endpoints == std::vector<std::string>{"tcp://agg:7400"});
  CHECK(p.config.batch_interval_ms == 250);
  CHECK(p.config.kernel_source == "journal");
  CHECK_FALSE(p.config.journald);
  CHECK_FALSE(p.config.kmsg);

  std::vector<std::string> errors;
  AgentConfig c;
  applyYaml("batch_interval_ms: 5\nbogus: 1\nendpoints: {a: 1}\n", "x.yaml", &c, &errors);
  REQUIRE(errors.size() == 2);
  CHECK(errors[0] == "x.yaml:2: unknown key 'bogus'");
  CHECK(errors[1].rfind("x.yaml:3: bad value for 'endpoints'", 0) == 0);
  validate(c, &errors);
  CHECK(errors.size() == 3);  // batch_interval_ms too small
}

TEST_CASE("agent: the lean rule set extracts the same symptoms as the full one", "[agent]") {
  auto full = shippedRules();
  auto lean = leanRuleSet(*full);
  CHECK(lean->version == full->version);
  REQUIRE(lean->rules.size() == full->rules.size());
  common::RuleEngine a(full), b(lean);
  size_t checked = 0;
  for (const auto& r : full->rules) {
    CHECK(lean->rules[&r - &full->rules[0]].meaning.empty());
    for (const auto& line : r.match_examples) {
      common::LogRecord rec;
      rec.text = line;
      rec.time_ns = 1'717'243'200'000'000'000;
      rec.time_known = true;
      common::MatchContext ctx;
      ctx.node = "gpu-node-1";
      ctx.source = "test";
      ctx.kind = r.sources.empty() ? common::SourceKind::kKernel : r.sources.front();
      auto x = a.extract(rec, ctx);
      auto y = b.extract(rec, ctx);
      REQUIRE(x.has_value() == y.has_value());
      if (!x) continue;
      CHECK(x->rule_id == y->rule_id);
      CHECK(x->device == y->device);
      CHECK(x->summary == y->summary);
      CHECK(x->fields == y->fields);
      ++checked;
    }
  }
  CHECK(checked > 100);
}

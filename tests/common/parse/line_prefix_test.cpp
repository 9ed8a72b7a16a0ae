// Launcher and orchestrator line prefixes: each shape alone, stacked, and every shipped rule's
// examples re-emitted under them still give the same symptom.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/parse/line_prefix.h"
#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"

using namespace faultline::common;
using faultline::common::parse::LinePrefix;
using faultline::common::parse::sameShape;
using faultline::common::parse::stripAfterStamp;
using faultline::common::parse::stripLauncherPrefix;

namespace {

struct Stripped {
  bool stripped = false;
  std::string rest;
  int rank = -1;
  std::string host;
};

Stripped strip(std::string_view line, const std::vector<std::string>& hosts = {}) {
  LinePrefix p;
  Stripped out;
  const HostSet set(hosts.begin(), hosts.end());
  out.stripped = stripLauncherPrefix(&line, &set, &p);
  out.rest = std::string(line);
  out.rank = p.rank;
  out.host = std::string(p.host);
  return out;
}

std::vector<LogRecord> parseApplication(const std::string& text, std::vector<std::string> hosts = {}) {
  std::vector<LogRecord> out;
  ParseOptions o;
  o.known_hosts = std::make_shared<const HostSet>(hosts.begin(), hosts.end());
  auto p = makeStreamParser(LogFormat::kApplication, o, [&](LogRecord&& r) { out.push_back(std::move(r)); });
  p->feed(text);
  p->finish();
  return out;
}

}  // namespace

TEST_CASE("launcher prefixes are removed, keeping the rank or host they name", "[prefix]") {
  auto s = strip("[1,13]<stdout>:RuntimeError: boom");
  CHECK(s.stripped);
  CHECK(s.rest == "RuntimeError: boom");
  CHECK(s.rank == 13);
  s = strip("[1,0]<stderr>:   File \"train.py\", line 3");
  CHECK(s.rest == "  File \"train.py\", line 3");  // one space eaten (Open MPI 5 writes one)
  s = strip("gpu-a01: NCCL WARN x");
  CHECK(s.host == "gpu-a01");
  CHECK(s.rest == "NCCL WARN x");
  CHECK(strip("10.0.0.7: [rank8]: Traceback (most recent call last):").host == "10.0.0.7");
  CHECK(strip("node017: x").host == "node017");
  CHECK(strip("ip-10-0-1-23.ec2.internal: x").host == "ip-10-0-1-23.ec2.internal");
  CHECK(strip("login: x", {"login"}).host == "login");  // any name the job lists
  s = strip("[pod/train-worker-0/pytorch] CUDA error: an illegal memory access was encountered");
  CHECK(s.rest == "CUDA error: an illegal memory access was encountered");
  s = strip("trainer-1  | RuntimeError: boom");
  CHECK(s.rest == "RuntimeError: boom");
  s = strip("(RayTrainWorker pid=812, ip=10.0.0.7) RuntimeError: boom");
  CHECK(s.rest == "RuntimeError: boom");
  s = strip("(worker1, rank=1, pid=2345, ip=10.0.0.2) RuntimeError: boom");
  CHECK(s.rank == 1);
  // Open MPI's own lines: "[HOST:PID] ".
  s = strip("[gpu-a01:48211] pml_ucx.c:419  Error: ucp_ep_create(proc=3) failed: Destination is unreachable");
  CHECK(s.host == "gpu-a01");
  CHECK(s.rest == "pml_ucx.c:419  Error: ucp_ep_create(proc=3) failed: Destination is unreachable");
  CHECK(strip("[node-0-2.local:11836] 7 more processes have sent help message").host == "node-0-2.local");
  CHECK(strip("[c7:2019618] x", {"c7"}).host == "c7");

  // What is message text, not a prefix, stays.
  for (const char* line : {"RuntimeError: CUDA error: unknown error", "python3: can't open file 'x.py'",
                           "torch.distributed.DistBackendError: NCCL error", "ib0: lost carrier",
                           "nvme0n1: I/O error", "gpu-a01:12345:12399 [3] NCCL WARN Cuda failure",
                           "(most recent call last)", "[rank3]: x", "[2024-06-01 10:00:00] x",
                           "Epoch 1 | loss 2.3", "ERROR: x", "[W ProcessGroupNCCL.cpp:2302] Warning",
                           "[12:34] x", "[c7:2019618]x", "[gpu-a01:123456789] x"}) {
    INFO(line);
    CHECK_FALSE(strip(line).stripped);
  }
  s = strip("kern: warning: [2026-04-22T21:26:20.599488292Z]: NVRM: Xid");
  CHECK(s.rest == "[2026-04-22T21:26:20.599488292Z]: NVRM: Xid");
  CHECK(strip("kern:     err: x").rest == "x");
  auto talos = parseApplication("192.168.11.119: kern: warning: [2026-04-22T21:26:20.599488292Z]: NVRM: Xid "
                                "(PCI:0000:48:00): 74, pid=1, name=python, NVLink: fatal error\n");
  REQUIRE(talos.size() == 1);
  CHECK(talos[0].time_known);
  CHECK(talos[0].host == "192.168.11.119");
  CHECK(talos[0].text.rfind("NVRM: Xid", 0) == 0);
  std::string_view cri = "stderr F RuntimeError: boom";
  CHECK(stripAfterStamp(&cri));
  CHECK(cri == "RuntimeError: boom");
  CHECK(sameShape("[2024-06-01 10:00:01] INFO - ", "[2024-06-01 10:00:07] INFO - "));
  CHECK_FALSE(sameShape("[2024-06-01 10:00:01] INFO - ", "[2024-06-01 10:00:01] WARN - "));
}

TEST_CASE("stacked prefixes and tracebacks under them become one record with rank and host", "[prefix]") {
  auto recs = parseApplication(
      "2024-06-01T10:00:00.123456789Z stderr F [rank3]: Traceback (most recent call last):\n"
      "2024-06-01T10:00:00.123456789Z stderr F [rank3]:   File \"train.py\", line 9, in <module>\n"
      "2024-06-01T10:00:00.123456789Z stderr F [rank3]: RuntimeError: CUDA error: an illegal memory access was "
      "encountered\n");
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].rank == 3);
  CHECK(recs[0].time_known);
  CHECK(recs[0].text ==
        "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered");

  recs = parseApplication(
      "worker-1: [rank8]: Traceback (most recent call last):\n"
      "worker-1: [rank8]:   File \"x.py\", line 1, in <module>\n"
      "worker-1: [rank8]: KeyError: 'a'\n");
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].rank == 8);
  CHECK(recs[0].host == "worker-1");

  // A prefix nothing knows, learned from the traceback header and followed by its shape.
  recs = parseApplication(
      "[2024-06-01, 10:00:01 UTC] {subprocess.py:93} INFO - Traceback (most recent call last):\n"
      "[2024-06-01, 10:00:01 UTC] {subprocess.py:93} INFO -   File \"x.py\", line 1, in <module>\n"
      "[2024-06-01, 10:00:02 UTC] {subprocess.py:93} INFO - ValueError: bad\n"
      "[2024-06-01, 10:00:02 UTC] {taskinstance.py:1937} ERROR - Task failed with exception\n");
  REQUIRE(recs.size() == 2);
  CHECK(recs[0].text == "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\nValueError: bad");
  CHECK(recs[1].text.find("Task failed with exception") != std::string::npos);
}

TEST_CASE("every rule example re-emitted under common launcher prefixes gives the same symptom", "[prefix][rules]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  RuleEngine engine(loaded.rules);
  MatchContext ctx{"", "rank.log", SourceKind::kApplication, {}};
  auto ruleOf = [&](const std::string& text) {
    std::string id;
    for (const auto& r : parseApplication(text, {"gpu-a01"}))
      if (auto s = engine.extract(r, ctx); s && id.empty()) id = s->rule_id;
    return id;
  };
  const std::vector<std::string> prefixes = {
      "[1,13]<stdout>:", "gpu-a01: ", "10.0.0.7: [rank8]: ", "2024-06-01T10:00:00.123456789Z stderr F ",
      "[pod/train-worker-0/pytorch] ", "trainer-1  | ", "(RayTrainWorker pid=812, ip=10.0.0.7) ",
      "worker-3: [default3]:"};
  size_t checked = 0;
  for (const auto& rule : loaded.rules->rules) {
    if (rule.deprecated || !rule.appliesTo(SourceKind::kApplication)) continue;
    for (const auto& ex : rule.match_examples) {
      const std::string bare = ruleOf(ex + "\n");
      if (bare != rule.id) continue;  // a kernel-side text the rank-log parser reads otherwise
      for (const auto& prefix : prefixes) {
        std::string wrapped;
        size_t start = 0;
        while (start <= ex.size()) {
          const size_t nl = std::min(ex.find('\n', start), ex.size());
          wrapped += prefix + ex.substr(start, nl - start) + "\n";
          start = nl + 1;
        }
        INFO(rule.id << " under '" << prefix << "':\n" << wrapped);
        CHECK(ruleOf(wrapped) == rule.id);
        ++checked;
      }
    }
  }
  CHECK(checked > 100);
}

TEST_CASE("UCX's epoch-stamped lines are a program's log with time and host, not dmesg", "[prefix]") {
  const std::string ucx =
      "[1678901234.123456] [gpu-a07:40211:0]        ib_mlx5_log.c:171  UCX  ERROR Transport retry count exceeded "
      "on mlx5_0:1/IB (synd 0x15 vend 0x81 hw_synd 0/0)\n";
  CHECK(detectFormat(ucx) == LogFormat::kApplication);
  auto recs = parseApplication(ucx);
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].time_known);
  CHECK(recs[0].time_ns == 1678901234123456000LL);
  CHECK(recs[0].host == "gpu-a07");
  CHECK(recs[0].text.rfind("ib_mlx5_log.c:171  UCX  ERROR Transport retry count exceeded", 0) == 0);
  // Real uptime stamps stay dmesg.
  CHECK(detectFormat("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n") ==
        LogFormat::kDmesgRaw);
}

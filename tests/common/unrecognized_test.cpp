// Evidence without rules (common/unrecognized.h): which unmatched error lines are unusual
// (spatial, cross-job, temporal), how they rank, the divergent node and when it is withheld; the
// error-word prefilter the parsers use to hand those lines on.
#include <catch2/catch.hpp>

#include "common/diagnosis.h"
#include "common/error_lexicon.h"
#include "common/job.h"
#include "common/parse/literal_scan.h"
#include "common/parse/stream_parser.h"
#include "common/unrecognized.h"

using namespace faultline::common;

namespace {

constexpr int64_t kUnrecSec = 1'000'000'000;
constexpr int64_t kUnrecT0 = 1'717'236'000 * kUnrecSec;  // 2024-06-01T10:00:00Z

LogRecord unrecRecord(std::string text, int64_t t = -1, uint64_t line = 1) {
  LogRecord r;
  r.text = std::move(text);
  r.time_known = t >= 0;
  r.time_ns = t >= 0 ? t : 0;
  r.line = line;
  return r;
}

// Three nodes with kernel logs; `odd` prints a driver error the others never print, everyone
// prints the same benign-looking error line at the start.
void threeNodes(UnmatchedLines& u, const std::string& odd) {
  for (const std::string node : {"n1", "n2", "n3"}) {
    u.beginSource(SourceKind::kKernel);
    u.add(unrecRecord("ACPI Error: AE_NOT_FOUND, while evaluating GPE method", kUnrecT0, 1), node);
    if (node == odd) u.add(unrecRecord("mlx5_core 0000:3b:00.0: cmd_work_handler failed with status 0x5", kUnrecT0 + 3500 * kUnrecSec, 900), node);
    u.add(unrecRecord("kernel: usb 1-1: new high-speed USB device number 2", kUnrecT0 + 10 * kUnrecSec, 2), node);  // no error word
    u.endSource(1000);
  }
}

UnusualContext unusualOver(std::set<std::string> nodes) {
  UnusualContext c;
  c.covered[SourceKind::kKernel] = std::move(nodes);
  c.start_ns = kUnrecT0;
  c.end_ns = kUnrecT0 + 3600 * kUnrecSec;
  return c;
}

Diagnosis unattributedVerdict() {
  Diagnosis d;
  d.sub_domain = SubDomain::kUnattributed;
  return d;
}

}  // namespace

TEST_CASE("unmatched lines: only error lines join, one template per shape, nodes and times kept",
          "[unrecognized]") {
  UnmatchedLines u;
  u.beginSource(SourceKind::kApplication);
  u.add(unrecRecord("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
            "ValueError: shapes (3,4) and (5,6) not aligned", -1, 10),
        "n1");
  u.add(unrecRecord("ValueError: shapes (7,8) and (1,2) not aligned", -1, 40), "n2");
  u.add(unrecRecord("step 100 loss 2.5", -1, 41), "n1");
  u.endSource(50);
  auto t = u.templates();
  REQUIRE(t.size() == 2);  // the traceback header and the ValueError; the File line holds no error word
  const auto& v = t[1];
  CHECK(v.count == 2);
  CHECK(v.first_line == "ValueError: shapes (3,4) and (5,6) not aligned");
  CHECK(v.first_node == "n1");
  CHECK(v.nodes.size() == 2);
  CHECK_FALSE(v.time_known);
  CHECK_FALSE(v.early);  // within the last 200 lines of a 50-line file
}

TEST_CASE("failure-indicating: spatial names the node that alone printed a line", "[unrecognized]") {
  UnmatchedLines u;
  threeNodes(u, "n2");
  auto ctx = unusualOver({"n1", "n2", "n3"});
  auto lines = findFailureIndicating(u.templates(), ctx);
  REQUIRE(lines.size() == 1);  // the ACPI line is on every node and old: not unusual
  CHECK(lines[0].first_line.find("cmd_work_handler failed") != std::string::npos);
  CHECK(lines[0].nodes == std::vector<std::string>{"n2"});
  REQUIRE(lines[0].why.size() == 2);
  CHECK(lines[0].why[0].rfind("spatial: printed by 1 of the 3 nodes with kernel logs (n2)", 0) == 0);
  CHECK(lines[0].why[1].rfind("temporal: first seen 100 s before the job's end", 0) == 0);

  auto lead = divergentNode(lines, {"n1", "n2", "n3"}, ctx, unattributedVerdict());
  REQUIRE(lead);
  CHECK(lead->node == "n2");
  CHECK(lead->confidence < 0.5);
  CHECK(confidenceBand(lead->confidence) == "lead");
  CHECK(lead->why.find("the logs of n2 hold error lines no other node printed") == 0);
}

TEST_CASE("divergent node: withheld without coverage, with a rule's node, for one node, on a tie",
          "[unrecognized]") {
  UnmatchedLines u;
  threeNodes(u, "n2");
  // n3 had no kernel logs: n2's line cannot be called its own (taxonomy: responsible nodes).
  auto partial = unusualOver({"n1", "n2"});
  auto lines = findFailureIndicating(u.templates(), partial);
  REQUIRE_FALSE(lines.empty());
  CHECK_FALSE(divergentNode(lines, {"n1", "n2", "n3"}, partial, unattributedVerdict()));
  // A rule already named a node: the lead is not given.
  auto full = unusualOver({"n1", "n2", "n3"});
  lines = findFailureIndicating(u.templates(), full);
  Diagnosis named = unattributedVerdict();
  named.sub_domain = SubDomain::kHardware;
  named.responsible.push_back({"n1", "", 0.9});
  CHECK_FALSE(divergentNode(lines, {"n1", "n2", "n3"}, full, named));
  CHECK(divergentNode(lines, {"n1", "n2", "n3"}, full, unattributedVerdict()));
  // A rule-based cause that names no node on purpose (job-wide, a service): no lead either.
  Diagnosis shared = unattributedVerdict();
  shared.sub_domain = SubDomain::kSystemSoftware;
  shared.cause = Cause{};
  shared.confidence = 0.8;
  CHECK_FALSE(divergentNode(lines, {"n1", "n2", "n3"}, full, shared));
  // A one-node job: spatial says nothing.
  UnmatchedLines one;
  one.beginSource(SourceKind::kKernel);
  one.add(unrecRecord("mlx5_core: cmd_work_handler failed with status 0x5", kUnrecT0 + 3590 * kUnrecSec), "n1");
  one.endSource(10);
  auto single = unusualOver({"n1"});
  auto l1 = findFailureIndicating(one.templates(), single);
  REQUIRE(l1.size() == 1);
  CHECK(l1[0].why == std::vector<std::string>{"temporal: first seen 10 s before the job's end"});
  CHECK_FALSE(divergentNode(l1, {"n1"}, single, unattributedVerdict()));
  // Two nodes each alone with a line at the same time: no lead.
  UnmatchedLines tie;
  for (const std::string node : {"n1", "n2"}) {
    tie.beginSource(SourceKind::kKernel);
    tie.add(unrecRecord(node == "n1" ? "disk sda failed to spin" : "fan 3 failure detected", kUnrecT0 + 3500 * kUnrecSec), node);
    tie.endSource(10);
  }
  auto two = unusualOver({"n1", "n2"});
  CHECK_FALSE(divergentNode(findFailureIndicating(tie.templates(), two), {"n1", "n2"}, two, unattributedVerdict()));
}

TEST_CASE("failure-indicating: a baseline run's templates are not unusual, the others are cross-job",
          "[unrecognized]") {
  UnmatchedLines u;
  threeNodes(u, "n2");
  auto ctx = unusualOver({"n1", "n2", "n3"});
  // The good run, mined the same way, printed the mlx5 line (another device, another status).
  UnmatchedLines good;
  good.beginSource(SourceKind::kKernel);
  good.add(unrecRecord("mlx5_core 0000:5e:00.0: cmd_work_handler failed with status 0x3", kUnrecT0), "n7");
  good.endSource(10);
  ctx.has_baseline = true;
  for (const auto& t : good.templates()) ctx.baseline.push_back(t.text);
  auto lines = findFailureIndicating(u.templates(), ctx);
  // The mlx5 line was in the good run too; the ACPI line was not, so it is now cross-job.
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].first_line.rfind("ACPI Error", 0) == 0);
  CHECK(lines[0].why == std::vector<std::string>{"cross-job: not in the baseline runs' logs"});
  CHECK(sameTemplate("a <*> c", "a b c"));
  CHECK(sameTemplate("a b c", "a <*> c"));
  CHECK_FALSE(sameTemplate("a b c", "a b d"));
  CHECK_FALSE(sameTemplate("a b", "a b c"));
}

TEST_CASE("failure-indicating: ranked most unusual first, bounded, untimed judged by position",
          "[unrecognized]") {
  UnmatchedLines u;
  u.beginSource(SourceKind::kApplication);
  u.add(unrecRecord("warning: deprecated option failed to parse", -1, 1), "n1");  // early in a long file
  u.add(unrecRecord("RuntimeError: NCCL communicator was aborted", -1, 990), "n1");
  u.add(unrecRecord("worker 3 crashed", -1, 995), "n1");
  u.endSource(1000);
  UnusualContext ctx;  // nothing covered, no times, no baseline: only position speaks
  auto lines = findFailureIndicating(u.templates(), ctx);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].why == std::vector<std::string>{"temporal: new in the last lines of its log"});
  // Same score and nodes, both untimed: fewer lines, then text.
  CHECK(lines[0].first_line.rfind("RuntimeError", 0) == 0);
  ctx.max_lines = 1;
  CHECK(findFailureIndicating(u.templates(), ctx).size() == 1);
}

TEST_CASE("unrecognized lines and the lead survive JSON, old documents read without them", "[unrecognized]") {
  Diagnosis d = unattributedVerdict();
  d.terminal_state = "fail";
  UnrecognizedLine l;
  l.template_text = "fan <NUM> failure detected";
  l.count = 3;
  l.nodes = {"n2"};
  l.first_line = "fan 3 failure detected";
  l.first_node = "n2";
  l.time_known = true;
  l.first_ns = kUnrecT0;
  l.why = {"spatial: x", "temporal: y"};
  d.unrecognized.push_back(l);
  d.divergent_node = DivergentNode{"n2", kDivergentNodeConfidence, "why"};
  auto j = toJson(d);
  CHECK(j["unrecognized"][0]["first_time"] == "2024-06-01T10:00:00.000Z");
  CHECK(j["divergent_node"]["confidence_band"] == "lead");
  std::string error;
  auto back = diagnosisFromJson(j, &error);
  REQUIRE(back);
  REQUIRE(back->unrecognized.size() == 1);
  CHECK(back->unrecognized[0].template_text == l.template_text);
  CHECK(back->unrecognized[0].first_ns == kUnrecT0);
  CHECK(back->unrecognized[0].why == l.why);
  REQUIRE(back->divergent_node);
  CHECK(back->divergent_node->node == "n2");
  j.erase("unrecognized");
  j.erase("divergent_node");
  back = diagnosisFromJson(j, &error);
  REQUIRE(back);
  CHECK(back->unrecognized.empty());
  CHECK_FALSE(back->divergent_node);
  CHECK(toJson(Diagnosis{})["unrecognized"].is_array());
  CHECK(toJson(Diagnosis{})["divergent_node"].is_null());
  CHECK(renderReport(d).find("lead:        n2 (25%, lead)") != std::string::npos);
  CHECK(renderReport(d).find("fan 3 failure detected") != std::string::npos);
}

TEST_CASE("error-word prefilter: every lexicon line holds a literal, the parser hands such lines on",
          "[unrecognized][lexicon]") {
  std::string error;
  auto scanner = LiteralScanner::buildExpressions(errorLexiconExpressions(), &error);
  INFO(error);
  REQUIRE(scanner);
  for (const char* line : {"RuntimeError: CUDA error", "OOMKilled", "Segmentation fault (core dumped)",
                           "NET/IB : Got completion from peer with error 12", "Connection timed out",
                           "nfs: server h not responding", "srun: error: task 3: Exited with exit code 1",
                           "CUDA_ERROR_INVALID_VALUE", "Stale file handle", "returncode 3", "cudaErrorNoDevice",
                           "file system is read-only", "FATAL: x", "task exited with exit status 2"}) {
    INFO(line);
    REQUIRE(carriesErrorLexicon(line));
    std::vector<int> ids;
    REQUIRE(scanner->literalsIn(line, &ids));
    CHECK_FALSE(ids.empty());
  }
  // A lexicon word inside another word is not a hit: these lines never reach the lexicon.
  for (const char* line : {"profile=\"docker-default\" name=x", "enable debug output", "install done",
                           "lowering kernel.perf_event_max_sample_rate"}) {
    INFO(line);
    CHECK_FALSE(carriesErrorLexicon(line));
    std::vector<int> ids;
    REQUIRE(scanner->literalsIn(line, &ids));
    CHECK(ids.empty());
  }
  // The parser: rules' literal "Xid" and the error words; a line with neither is not handed on,
  // a line with only an error word is, marked so the engine may skip it.
  auto rules = LiteralScanner::build({"Xid"}, &error);
  REQUIRE(rules);
  ParseOptions opts;
  opts.literals = rules;
  opts.error_words = scanner;
  std::vector<LogRecord> got;
  auto parser = makeStreamParser(LogFormat::kDmesgRaw, opts, [&](LogRecord&& r) { got.push_back(std::move(r)); });
  parser->feed("[  1.000000] systemd: started session 4\n[  2.000000] NVRM: Xid (PCI:0000:3b:00): 79\n"
               "[  3.000000] disk sda: I/O ERROR on sector 7\n[  3.500000] systemd: started session 5\n"
               "[  4.000000] all good\n");
  parser->finish();
  for (const auto& r : got) UNSCOPED_INFO(r.text << " absent=" << r.rule_literals_absent);
  auto find = [&](std::string_view what) -> const LogRecord* {
    for (const auto& r : got)
      if (r.text.find(what) != std::string::npos) return &r;
    return nullptr;
  };
  REQUIRE(find("Xid"));
  CHECK_FALSE(find("Xid")->rule_literals_absent);
  REQUIRE(find("I/O ERROR"));
  CHECK(find("I/O ERROR")->rule_literals_absent);
  CHECK_FALSE(find("session 4"));  // neither a rule literal nor an error word: not handed on
  CHECK_FALSE(find("session 5"));
  CHECK(parser->report().records == 5);
}

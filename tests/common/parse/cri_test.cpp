// CRI container logs (/var/log/pods): the line grammar, partial (P) lines joined per stream, the
// application reading of whole lines (ranks, tracebacks, the CRI stamp as time), physical line
// numbers, bad lines counted, a partial line cut by the end of the stream, and detection.
#include "common/parse/cri.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "common/parse/stream_parser.h"

using namespace faultline::common;
using faultline::common::parse::CriLine;
using faultline::common::parse::parseCriLine;

namespace {

struct CriRun {
  std::vector<LogRecord> records;
  ParseReport report;
};

// Feeds `text` in pieces of `chunk` bytes (any chunking must give the same records).
CriRun criRun(const std::string& text, size_t chunk = 1 << 20) {
  CriRun out;
  auto p = makeStreamParser(LogFormat::kCriLog, {},
                            [&](LogRecord&& r) { out.records.push_back(std::move(r)); });
  for (size_t i = 0; i < text.size(); i += chunk) p->feed(std::string_view(text).substr(i, chunk));
  p->finish();
  out.report = p->report();
  return out;
}

constexpr int64_t kCriT0 = 1717236000LL * 1'000'000'000;  // 2024-06-01T10:00:00Z

}  // namespace

TEST_CASE("cri: the line grammar", "[parse][cri]") {
  CriLine c;
  REQUIRE(parseCriLine("2024-06-01T10:00:00.123456789Z stderr F RuntimeError: boom", &c));
  CHECK(c.time_ns == kCriT0 + 123456789);
  CHECK(c.is_stderr);
  CHECK_FALSE(c.partial);
  CHECK(c.text == "RuntimeError: boom");
  REQUIRE(parseCriLine("2024-06-01T12:00:00.5+02:00 stdout P first half", &c));
  CHECK(c.time_ns == kCriT0 + 500'000'000);
  CHECK(c.partial);
  CHECK_FALSE(c.is_stderr);
  REQUIRE(parseCriLine("2024-06-01T10:00:00Z stdout F", &c));  // an empty line
  CHECK(c.text.empty());
  REQUIRE(parseCriLine("2024-06-01T10:00:00Z stdout F:x text", &c));  // further tags after ':'
  CHECK(c.text == "text");
  CHECK_FALSE(parseCriLine("2024-06-01T10:00:00 stdout F no zone", &c));
  CHECK_FALSE(parseCriLine("2024-06-01T10:00:00Z stdin F text", &c));
  CHECK_FALSE(parseCriLine("2024-06-01T10:00:00Z stdout X text", &c));
  CHECK_FALSE(parseCriLine("2024-06-01T10:00:00Z stdout FP text", &c));
  CHECK_FALSE(parseCriLine("[ 12.000000] NVRM: Xid", &c));
}

TEST_CASE("cri: partial lines are joined per stream, in any chunking", "[parse][cri]") {
  const std::string text =
      "2024-06-01T10:00:01.000000001Z stderr P [rank3]: RuntimeError: CUDA error: an illegal mem\n"
      "2024-06-01T10:00:01.000000002Z stdout F [rank0]: step 10 loss 2.1\n"
      "2024-06-01T10:00:01.000000003Z stderr P ory access was enco\n"
      "2024-06-01T10:00:01.000000004Z stderr F untered\n";
  for (size_t chunk : {size_t{1}, size_t{7}, size_t{1} << 20}) {
    INFO("chunk " << chunk);
    auto r = criRun(text, chunk);
    REQUIRE(r.records.size() == 2);
    const LogRecord* err = r.records[0].rank == 3 ? &r.records[0] : &r.records[1];
    const LogRecord* out = r.records[0].rank == 3 ? &r.records[1] : &r.records[0];
    CHECK(err->text == "RuntimeError: CUDA error: an illegal memory access was encountered");
    CHECK(err->line == 1);  // the first piece's physical line
    CHECK(err->time_known);
    CHECK(err->time_ns == kCriT0 + 1'000'000'001);  // the first piece's stamp
    CHECK(out->text == "step 10 loss 2.1");
    CHECK(out->line == 2);
    CHECK(r.report.lines == 4);
    CHECK(r.report.records == 2);
    CHECK(r.report.skipped == 0);
    CHECK_FALSE(r.report.truncated);
  }
}

TEST_CASE("cri: a traceback over several CRI lines is one record on its first line",
          "[parse][cri]") {
  auto r = criRun(
      "2024-06-01T10:00:00.100000000Z stdout F [rank1]: epoch 1\n"
      "2024-06-01T10:00:02.000000000Z stderr F [rank1]: Traceback (most recent call last):\n"
      "2024-06-01T10:00:02.000000100Z stderr F [rank1]:   File \"train.py\", line 9, in <module>\n"
      "2024-06-01T10:00:02.000000200Z stderr F [rank1]: KeyError: 'input_ids'\n");
  REQUIRE(r.records.size() == 2);
  const LogRecord& tb = r.records[0].text.rfind("Traceback", 0) == 0 ? r.records[0] : r.records[1];
  CHECK(tb.text ==
        "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nKeyError: "
        "'input_ids'");
  CHECK(tb.rank == 1);
  CHECK(tb.line == 2);
  CHECK(tb.time_ns == kCriT0 + 2'000'000'000);
}

TEST_CASE("cri: bad lines are counted and lose nothing around them, a cut partial line is emitted",
          "[parse][cri]") {
  auto r = criRun(
      "2024-06-01T10:00:00Z stdout F before\n"
      "this is not a CRI line\n"
      "2024-06-01T10:00:01Z stdout F after\n"
      "2024-06-01T10:00:02Z stderr P cut off in the mid");
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[0].text == "before");
  CHECK(r.records[1].text == "after");
  CHECK(r.records[1].line == 3);
  CHECK(r.records[2].text == "cut off in the mid");
  CHECK(r.records[2].line == 4);
  CHECK(r.report.lines == 4);
  CHECK(r.report.malformed == 1);
  CHECK(r.report.skipped == 1);
  CHECK(r.report.truncated);
  REQUIRE_FALSE(r.report.notes.empty());
  CHECK(r.report.notes.front().find("line 2") != std::string::npos);
}

TEST_CASE("cri: a line joined over the line limit is skipped as oversized, the next one comes",
          "[parse][cri]") {
  ParseOptions o;
  o.max_line_bytes = 100;
  std::vector<LogRecord> recs;
  auto p =
      makeStreamParser(LogFormat::kCriLog, o, [&](LogRecord&& r) { recs.push_back(std::move(r)); });
  const std::string piece(40, 'a');  // each physical line fits, the joined line does not
  for (int i = 0; i < 4; ++i) p->feed("2024-06-01T10:00:00Z stdout P " + piece + "\n");
  p->feed("2024-06-01T10:00:00Z stdout F end\n");
  p->feed("2024-06-01T10:00:01Z stdout F after\n");
  p->finish();
  REQUIRE(recs.size() == 1);
  CHECK(recs[0].text == "after");
  CHECK(recs[0].line == 6);
  CHECK(p->report().oversized == 5);
  CHECK(p->report().skipped == 5);
  CHECK(p->report().lines == 6);
}

TEST_CASE("cri: detected from a file's head, and not taken for a journal or an application log",
          "[parse][cri]") {
  CHECK(detectFormat("2024-06-01T10:00:00.123456789Z stdout F starting\n"
                     "2024-06-01T10:00:00.223456789Z stderr P partial\n"
                     "2024-06-01T10:00:00.323456789Z stderr F  line\n") == LogFormat::kCriLog);
  CHECK(detectFormat("2024-06-01T10:00:00+0000 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 79\n") ==
        LogFormat::kJournalShortIso);
  CHECK(detectFormat("2024-06-01T10:00:00.123Z INFO step 1\n") == LogFormat::kApplication);
  // `kubectl logs --timestamps`: a UTC stamp before the container's text, whose first word is no
  // host.
  CHECK(
      detectFormat("2024-07-08T10:02:30.880102114Z [default0]:[rank0]: world size 8\n"
                   "2024-07-08T10:31:39.004118220Z [default1]:[rank1]:[E708 10:31:39.003000 2215 "
                   "ProcessGroupNCCL.cpp:1297] [PG 0 Rank 1] NCCL watchdog thread terminated\n") ==
      LogFormat::kApplication);
  CHECK(formatName(LogFormat::kCriLog) == "cri");
  CHECK(sourceKindOf(LogFormat::kCriLog) == SourceKind::kApplication);
}

TEST_CASE("cri: the pending tail a line reader keeps back until the F piece", "[parse][cri]") {
  using faultline::common::parse::criPendingTail;
  const std::string full = "2024-06-01T10:00:00Z stdout F done\n";
  const std::string p_out = "2024-06-01T10:00:01Z stdout P half\n";
  const std::string f_err = "2024-06-01T10:00:02Z stderr F other stream\n";
  const std::string f_out = "2024-06-01T10:00:03Z stdout F rest\n";
  CHECK(criPendingTail(full) == 0);
  CHECK(criPendingTail(full + p_out) == p_out.size());
  // Another stream's whole lines after the piece wait with it (they are fed in file order).
  CHECK(criPendingTail(full + p_out + f_err) == p_out.size() + f_err.size());
  CHECK(criPendingTail(full + p_out + f_err + f_out) == 0);
  CHECK(criPendingTail("not cri\n") == 0);
}

// Malformed input: every parser must count, note and skip bad lines and keep the good ones.
#include <catch2/catch.hpp>

#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;

TEST_CASE("binary garbage lines are skipped, neighbours survive") {
  std::string input = "[    1.000000] before\n";
  input += std::string("\x00\x01\x02\xff\xfe garbage\x00", 13) + "\n";
  input += "[    2.000000] after\n";
  for (auto format : {LogFormat::kDmesgRaw, LogFormat::kApplication}) {
    CAPTURE(formatName(format));
    auto r = parseAll(format, input);
    REQUIRE(r.records.size() == 2);
    CHECK(r.records[1].line == 3);
    CHECK(r.report.binary == 1);
    CHECK(r.report.skipped == 1);
    CHECK(r.report.lines == 3);
    REQUIRE(r.report.notes.size() == 1);
    CHECK(r.report.notes[0].rfind("line 2: ", 0) == 0);
  }
}

TEST_CASE("a mostly-text line with a few bad bytes is repaired, colour codes dropped") {
  auto r = parseAll(LogFormat::kApplication,
                    "[rank0]: loss \xff is fine \xc3\xa9t\xc3\xa9 ok\n"
                    "\x1b[31mERROR\x1b[0m red text\n");
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].text == "loss ? is fine \xc3\xa9t\xc3\xa9 ok");
  CHECK(r.records[1].text == "ERROR red text");
  CHECK(r.report.binary == 0);
}

TEST_CASE("a 10 MB line fed in 64 KiB chunks is skipped without buffering it") {
  auto parser_input = std::string("[    1.000000] before\n");
  std::vector<LogRecord> records;
  auto parser = makeStreamParser(LogFormat::kDmesgRaw, {},
                                 [&](LogRecord&& r) { records.push_back(std::move(r)); });
  parser->feed(parser_input);
  const std::string chunk(64 << 10, 'x');
  parser->feed("[    1.500000] ");
  for (int i = 0; i < 160; ++i) parser->feed(chunk);  // 10 MiB, no newline yet
  parser->feed("\n[    2.000000] after\r\n");
  parser->finish();
  REQUIRE(records.size() == 2);
  CHECK(records[0].text == "before");
  CHECK(records[1].text == "after");
  CHECK(records[1].line == 3);
  const auto& rep = parser->report();
  CHECK(rep.oversized == 1);
  CHECK(rep.skipped == 1);
  CHECK(rep.lines == 3);
  CHECK_FALSE(rep.truncated);
}

TEST_CASE("oversized line in a single feed and at end of stream") {
  ParseOptions o;
  o.max_line_bytes = 16;
  auto r = parseAll(LogFormat::kApplication,
                    "short\n" + std::string(100, 'y') + "\nshort2\n" + std::string(50, 'z'), o, 7);
  REQUIRE(r.records.size() == 2);
  CHECK(r.report.oversized == 2);
  CHECK(r.report.truncated);
  CHECK(r.report.lines == 4);
}

TEST_CASE("CRLF endings, truncated last line, any chunking") {
  const std::string input =
      "2024-06-01T10:00:01+0000 gpu-a01 kernel: one\r\n"
      "2024-06-01T10:00:02+0000 gpu-a01 kernel: two\r\n"
      "2024-06-01T10:00:03+0000 gpu-a01 kernel: three (cut";
  for (size_t chunk : {size_t{0}, size_t{1}, size_t{5}}) {
    CAPTURE(chunk);
    auto r = parseAll(LogFormat::kJournalShortIso, input, {}, chunk);
    REQUIRE(r.records.size() == 3);
    CHECK(r.records[0].text == "one");
    CHECK(r.records[2].text == "three (cut");
    CHECK(r.report.truncated);
    CHECK(r.report.lines == 3);
  }
  auto whole = parseAll(LogFormat::kApplication, "a\r\nb\r\n");
  CHECK_FALSE(whole.report.truncated);
  REQUIRE(whole.records.size() == 2);
  CHECK(whole.records[1].text == "b");
}

TEST_CASE("notes are bounded to 8 while counters stay exact") {
  std::string input;
  for (int i = 0; i < 20; ++i) input += "{broken json\n";
  input += R"({"MESSAGE":"ok"})"
           "\n";
  auto r = parseAll(LogFormat::kJournalJson, input);
  REQUIRE(r.records.size() == 1);
  CHECK(r.records[0].line == 21);
  CHECK(r.report.malformed == 20);
  CHECK(r.report.skipped == 20);
  CHECK(r.report.notes.size() == 8);
  CHECK(r.report.notes[7].rfind("line 8: ", 0) == 0);
}

TEST_CASE("kJournalBinary as text counts every line malformed") {
  auto r = parseAll(LogFormat::kJournalBinary, "LPKSHHRH\nx\n");
  CHECK(r.records.empty());
  CHECK(r.report.malformed == 2);
}

TEST_CASE("every parser survives random bytes and keeps counts consistent") {
  std::string noise;
  uint32_t x = 12345;
  for (int i = 0; i < 200000; ++i) {
    x = x * 1103515245u + 12345u;
    noise.push_back(static_cast<char>((x >> 16) & 0xff));
  }
  for (auto format :
       {LogFormat::kDmesgRaw, LogFormat::kDmesgCtime, LogFormat::kDmesgIso, LogFormat::kConsole, LogFormat::kKmsg,
        LogFormat::kJournalShortIso, LogFormat::kJournalJson, LogFormat::kJournalExport,
        LogFormat::kSyslog, LogFormat::kFabricManager, LogFormat::kApplication}) {
    CAPTURE(formatName(format));
    auto r = parseAll(format, noise, {}, 4093);
    CHECK(r.report.records == r.records.size());
    CHECK(r.report.skipped <= r.report.lines);
    CHECK(r.report.notes.size() <= 8);
  }
}

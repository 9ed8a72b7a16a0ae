#include <catch2/catch.hpp>

#include "common/parse/line_grammar.h"
#include "parse_test_util.h"

using namespace faultline::common;

TEST_CASE("detectFormat recognises each format") {
  CHECK(detectFormat("[    0.000000] Linux version 6.5.0\n[    0.000001] Command line: x\n") ==
        LogFormat::kDmesgRaw);
  CHECK(detectFormat("kern  :info  : [    0.000000] Linux version 6.5.0\n") ==
        LogFormat::kDmesgRaw);
  CHECK(detectFormat("[Fri Aug 30 11:43:09 2024] NVRM: Xid 79\n") == LogFormat::kDmesgCtime);
  CHECK(detectFormat("2025-01-21T04:41:44,283302+00:00 NVRM: Xid 79\n") == LogFormat::kDmesgIso);
  CHECK(detectFormat("kern  :warn  : 2025-01-21T04:41:44,283302+00:00 x\n") ==
        LogFormat::kDmesgIso);
  CHECK(detectFormat("6,1234,5678901,-;pci 0000:3b:00.0: x\n SUBSYSTEM=pci\n") == LogFormat::kKmsg);
  CHECK(detectFormat("-- Logs begin at x --\n2024-06-01T10:00:01+0000 gpu-a01 kernel: x\n") ==
        LogFormat::kJournalShortIso);
  CHECK(detectFormat("2024-06-01T10:00:01.123456+00:00 gpu-a01 python3[1]: x\n") ==
        LogFormat::kJournalShortIso);
  CHECK(detectFormat(R"({"MESSAGE":"x","__REALTIME_TIMESTAMP":"1"})"
                     "\n") == LogFormat::kJournalJson);
  CHECK(detectFormat("__CURSOR=s=1\n__REALTIME_TIMESTAMP=1\nMESSAGE=x\n\n") ==
        LogFormat::kJournalExport);
  CHECK(detectFormat("Dec  2 11:38:27 gpu-a01 kernel: [  219.470001] x\n") == LogFormat::kSyslog);
  CHECK(detectFormat("[Mon Jan 01 2024 00:00:00] [INFO] [tid 1] x\n") ==
        LogFormat::kFabricManager);
  CHECK(detectFormat("[rank0]: hello\n0: hi\n") == LogFormat::kApplication);
  CHECK(detectFormat("") == LogFormat::kApplication);
  CHECK(detectFormat("\n\n") == LogFormat::kApplication);
}

TEST_CASE("detectFormat: rank log with a few kernel-looking lines stays application") {
  std::string log;
  for (int i = 0; i < 20; ++i) log += "[rank" + std::to_string(i % 4) + "]: step " + std::to_string(i) + "\n";
  log += "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79\n";
  log += "[ 1234.567891] NVRM: GPU has fallen off the bus\n";
  log += "Dec  2 11:38:27 gpu-a01 kernel: x\n";
  log += "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: v\n";
  log += "MY_ENV_VAR=1\nNCCL_DEBUG=INFO\n";
  CHECK(detectFormat(log) == LogFormat::kApplication);
}

TEST_CASE("detectFormat: mixed file takes the majority, head limit respected") {
  std::string log;
  for (int i = 0; i < 10; ++i) log += "[  10.00000" + std::to_string(i) + "] kernel line\n";
  for (int i = 0; i < 3; ++i) log += "2024-06-01 10:00:01,123 INFO app line\n";
  CHECK(detectFormat(log) == LogFormat::kDmesgRaw);
  std::string big;
  while (big.size() < 70000) big += "[    1.000000] kernel line\n";
  CHECK(detectFormat(big) == LogFormat::kDmesgRaw);
}

// Posted logs are often grep output: "grep -r Xid /var/log" or "grep -H ... messages*" put the
// file name (and with -n the line number) before every line, "-" instead of ":" on context lines.
TEST_CASE("grep output: the file-name prefix is detected and dropped from every line") {
  const std::string log =
      "messages:Jun 17 20:18:08 ip-172-31-27-211 kernel: INFO: task sim:78808 blocked for more than 120 seconds.\n"
      "messages:Jun 17 20:18:08 ip-172-31-27-211 kernel: Call Trace:\n"
      "messages-Jun 17 20:18:09 ip-172-31-27-211 kernel: context line after it\n"
      "--\n"
      "messages:Jun 17 20:20:44 ip-172-31-27-211 kernel: nfs: server nfs1 not responding, still trying\n";
  REQUIRE(detectFormat(log) == LogFormat::kSyslog);
  auto r = testing::parseAll(LogFormat::kSyslog, log);
  REQUIRE(r.records.size() == 4);
  for (const auto& rec : r.records) {
    CHECK(rec.time_known);
    CHECK(rec.host == "ip-172-31-27-211");
  }
  CHECK(r.records[0].text.rfind("INFO: task sim:78808", 0) == 0);
  CHECK(r.records[2].text == "context line after it");
  CHECK(r.records[3].text == "nfs: server nfs1 not responding, still trying");

  // With -n, and a dmesg file behind a path.
  const std::string dmesg =
      "/var/log/dmesg.1:12:[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n"
      "/var/log/dmesg.1:13:[ 1234.567999] NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.\n";
  REQUIRE(detectFormat(dmesg) == LogFormat::kDmesgRaw);
  auto d = testing::parseAll(LogFormat::kDmesgRaw, dmesg, {}, 7);
  REQUIRE(d.records.size() == 2);
  CHECK(d.records[0].monotonic_ns == 1234567890000LL);
  CHECK(d.records[0].text.rfind("NVRM: Xid", 0) == 0);
}

TEST_CASE("grep output: application lines with a colon are left alone") {
  CHECK(detectFormat("Error:cuda failed\nINFO:root:step 1\nWARNING:x\n") == LogFormat::kApplication);
  CHECK(parse::grepFilePrefix("INFO: step") == 0);                  // a blank after the colon
  CHECK(parse::grepFilePrefix("messages:Jun 17 20:18:08 h k: x") == 9);
  CHECK(parse::grepFilePrefix("/var/log/syslog:12:Jun 1 x") == 19);
  CHECK(parse::grepFilePrefix("http://example.org/x") == 0);         // "//" after the colon
  CHECK(parse::grepFilePrefix("12:34:56 x") == 0);                   // no letter in the name
  CHECK(parse::grepNamedPrefix("messages-Jun 17 x", "messages") == 9);
  CHECK(parse::grepNamedPrefix("messagesX:Jun 17 x", "messages") == 0);
  // A syslog line that merely starts with a word and a colon is not a grep prefix.
  auto r = testing::parseAll(LogFormat::kSyslog, "Jun 17 20:18:08 gpu1 kernel: x\n");
  REQUIRE(r.records.size() == 1);
  CHECK(r.records[0].text == "x");
}

// A node's console log (HPE Cray EX, conman): the console logger's wall-clock stamp before each
// kernel line. Its own lines (no kernel stamp after the wall stamp) vote with the kernel lines
// when the head has any; without those they are the application lines they look like.
TEST_CASE("detectFormat: console logs, wall-clock stamp before a raw dmesg line") {
  std::string noisy;
  for (int i = 0; i < 6; ++i) noisy += "[2025-07-16T20:42:4" + std::to_string(i) + "+08:00] <ConMan> noise\n";
  noisy += "[2025-07-16T20:42:48+08:00][1854229.275568][T4056360] RIP: 0010:x+0x1/0x2 [amdgpu]\n";
  const std::pair<std::string, LogFormat> cases[] = {
      {"[2025-07-16T20:42:48+08:00][1854229.275568][T4056360] Hardware name: HPE\n", LogFormat::kConsole},
      {"[2025-07-16T20:42:48.123456Z] [  12.345678] x\n", LogFormat::kConsole},
      {"[2025-07-16 20:42:48] [  12.345678][    T1] x\n", LogFormat::kConsole},
      {"[2025-07-16T20:42:48,5-05:00]<4>[  12.345678] x\n", LogFormat::kConsole},
      {noisy, LogFormat::kConsole},
      // Plain dmesg from a CONFIG_PRINTK_CALLER kernel stays raw dmesg.
      {"[   12.345678][    T1] x\n[  123.456789][ C3] y\n", LogFormat::kDmesgRaw},
      // An application's own bracketed ISO stamps, and epoch seconds behind one: application.
      {"[2025-07-16 20:42:48] INFO step 1\n[2025-07-16 20:42:49] INFO step 2\n", LogFormat::kApplication},
      {"[2025-07-16T20:42:48Z][1678901234.123456] [host:1:2] ucx x\n", LogFormat::kApplication},
      {"[2025-07-16T20:42:48Z]\n", LogFormat::kApplication},
      // slurmd: a job step where the uptime would be (samples/real/sys-toolkit-1177-...).
      {"[2025-05-19T09:38:16.163] [1848523.0] pyxis: starting container: pyxis_1848523.0\n", LogFormat::kApplication},
      {"[2025-05-19T09:38:16.163] [1848523.123] x\n[2025-05-19T09:38:16.163] [1848523.batch] y\n",
       LogFormat::kApplication},
      // Malformed wall stamps are no console stamps.
      {"[2025-13-16T20:42:48Z][  12.345678] x\n", LogFormat::kApplication},
      {"[2025-07-16T20:42:48+8:00][  12.345678] x\n", LogFormat::kApplication},
      {"[2025-07-16T20:42:48Z [  12.345678] x\n", LogFormat::kApplication},
  };
  for (const auto& [text, want] : cases) {
    CAPTURE(text);
    CHECK(detectFormat(text) == want);
  }
  parse::WallStamp w;
  REQUIRE(parse::parseBracketWallStamp("[2025-07-16T20:42:48+08:00][1", &w));
  CHECK(w.has_zone);
  CHECK(w.length == 27);
  CHECK(w.ns == 1752669768LL * testing::kSec);
  REQUIRE(parse::parseBracketWallStamp("[2025-07-16 20:42:48.25]", &w));
  CHECK_FALSE(w.has_zone);
  CHECK(w.ns == (1752669768LL + 8 * 3600) * testing::kSec + 250000000);
  CHECK_FALSE(parse::parseBracketWallStamp("[2025-07-16T20:42:48", &w));
  CHECK_FALSE(parse::parseBracketWallStamp("[ 2025-07-16T20:42:48]", &w));
}

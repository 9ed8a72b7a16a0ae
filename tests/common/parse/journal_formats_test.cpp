#include <catch2/catch.hpp>
#include <cstring>

#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;

TEST_CASE("journalctl short-iso: offsets, idents, markers, continuations") {
  const std::string input =
      "-- Logs begin at Sat 2024-06-01 09:00:00 UTC, end at Sat 2024-06-01 11:00:00 UTC. --\n"
      "2024-06-01T10:00:01+0000 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234\n"
      "2024-06-01T12:00:02+0200 gpu-a01 nvidia-persistenced[2211]: device 0000:3b:00.0 lost\n"
      "2024-06-01T05:00:03-05:00 gpu-a01 systemd[1]: Started Session 4 of user root.\n"
      "-- Boot 5f1c2a3b4c5d6e7f8091a2b3c4d5e6f7 --\n"
      "2024-06-01T10:00:04.123456+00:00 gpu-a01 python3[777]: Traceback (most recent call last):\n"
      "                                                         File \"x.py\", line 1\n"
      "2024-06-01T10:00:05Z gpu-a01 kernel: Call Trace:\n"
      "2024-06-01T10:00:05Z gpu-a01 kernel:  dump_stack+0x1/0x2\n"
      "-- No entries --\n";
  ParseOptions o;
  o.boot_id = "initial";
  auto r = parseAll(LogFormat::kJournalShortIso, input, o);
  REQUIRE(r.records.size() == 5);
  const int64_t t0 = 1717236000LL * kSec;  // 2024-06-01T10:00:00Z
  CHECK(r.records[0].time_ns == t0 + 1 * kSec);
  CHECK(r.records[0].host == "gpu-a01");
  CHECK(r.records[0].ident == "kernel");
  CHECK(r.records[0].text == "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234");
  CHECK(r.records[0].boot_id == "initial");
  CHECK(r.records[1].time_ns == t0 + 2 * kSec);
  CHECK(r.records[1].ident == "nvidia-persistenced");
  CHECK(r.records[2].time_ns == t0 + 3 * kSec);
  CHECK(r.records[2].ident == "systemd");
  CHECK(r.records[3].time_ns == t0 + 4 * kSec + 123456000);
  CHECK(r.records[3].text == "Traceback (most recent call last):\n  File \"x.py\", line 1");
  CHECK(r.records[3].boot_id == "5f1c2a3b4c5d6e7f8091a2b3c4d5e6f7");
  CHECK(r.records[4].text == "Call Trace:\n dump_stack+0x1/0x2");
  CHECK(r.report.lines == 10);
  CHECK(r.report.skipped == 3);  // three markers, no notes for them
  CHECK(r.report.malformed == 0);
  CHECK(r.report.notes.empty());
}

TEST_CASE("journalctl -o short (traditional form) parses with the short-iso parser") {
  ParseOptions o;
  o.default_year = 2024;
  auto r = parseAll(LogFormat::kJournalShortIso,
                    "Jun 01 10:00:01 gpu-a01 kernel: NVRM: Xid 79\n", o);
  REQUIRE(r.records.size() == 1);
  CHECK(r.records[0].time_ns == 1717236001LL * kSec);
}

TEST_CASE("recordFromJournalFields: ident fallbacks and timestamps") {
  std::map<std::string, std::string> f{{"MESSAGE", "hello\n"},
                                       {"__REALTIME_TIMESTAMP", "1717236001000123"},
                                       {"__MONOTONIC_TIMESTAMP", "5000000"},
                                       {"_BOOT_ID", "abc"},
                                       {"_HOSTNAME", "gpu-a01"},
                                       {"_COMM", "python3"},
                                       {"_SYSTEMD_UNIT", "train.service"},
                                       {"PRIORITY", "3"}};
  auto rec = recordFromJournalFields(f);
  REQUIRE(rec);
  CHECK(rec->text == "hello");
  CHECK(rec->time_known);
  CHECK(rec->time_ns == 1717236001000123000LL);
  CHECK(rec->monotonic_ns == 5 * kSec);
  CHECK(rec->boot_id == "abc");
  CHECK(rec->host == "gpu-a01");
  CHECK(rec->ident == "python3");
  CHECK(rec->priority == 3);
  f["SYSLOG_IDENTIFIER"] = "train";
  CHECK(recordFromJournalFields(f)->ident == "train");
  f["_TRANSPORT"] = "kernel";
  CHECK(recordFromJournalFields(f)->ident == "kernel");
  f.erase("SYSLOG_IDENTIFIER");
  f.erase("_COMM");
  f.erase("_TRANSPORT");
  CHECK(recordFromJournalFields(f)->ident == "train.service");
  f.erase("MESSAGE");
  CHECK_FALSE(recordFromJournalFields(f));
}

TEST_CASE("journalctl -o json: string, byte-array and null MESSAGE, broken lines") {
  const std::string input =
      R"({"__REALTIME_TIMESTAMP":"1717236001000000","__MONOTONIC_TIMESTAMP":"12000000",)"
      R"("_BOOT_ID":"b1","_HOSTNAME":"gpu-a01","_TRANSPORT":"kernel","PRIORITY":"4",)"
      R"("MESSAGE":"NVRM: Xid (PCI:0000:3b:00): 79"})"
      "\n"
      R"({"__REALTIME_TIMESTAMP":"1717236002000000","SYSLOG_IDENTIFIER":"python3",)"
      R"("MESSAGE":[108,105,110,101,49,10,108,105,110,101,50]})"
      "\n"
      R"({"__REALTIME_TIMESTAMP":"1717236003000000","MESSAGE":"trunc)"
      "\n"
      R"({"__REALTIME_TIMESTAMP":"1717236004000000","_COMM":"sshd","MESSAGE":null})"
      "\n"
      R"({"__REALTIME_TIMESTAMP":"1717236005000000","_COMM":"sshd"})"
      "\n"
      R"({"MESSAGE":["first","second"],"_SYSTEMD_UNIT":"x.service"})"
      "\n";
  auto r = parseAll(LogFormat::kJournalJson, input);
  REQUIRE(r.records.size() == 4);
  CHECK(r.records[0].ident == "kernel");
  CHECK(r.records[0].priority == 4);
  CHECK(r.records[0].monotonic_ns == 12 * kSec);
  CHECK(r.records[0].line == 1);
  CHECK(r.records[1].text == "line1\nline2");
  CHECK(r.records[1].ident == "python3");
  CHECK(r.records[2].text.empty());
  CHECK(r.records[2].ident == "sshd");
  CHECK(r.records[2].line == 4);
  CHECK(r.records[3].text == "first");
  CHECK(r.records[3].ident == "x.service");
  CHECK(r.report.malformed == 2);  // broken JSON, entry without MESSAGE
  CHECK(r.report.skipped == 2);
  CHECK(r.report.lines == 6);
  REQUIRE(r.report.notes.size() == 2);
  CHECK(r.report.notes[0].rfind("line 3: ", 0) == 0);
}

namespace {
std::string binaryField(std::string_view key, std::string_view data) {
  std::string out(key);
  out.push_back('\n');
  uint64_t n = data.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.append(data);
  out.push_back('\n');
  return out;
}
}  // namespace

TEST_CASE("journalctl -o export: text and binary fields, any chunking") {
  std::string input =
      "__CURSOR=s=abc;i=1\n"
      "__REALTIME_TIMESTAMP=1717236001000000\n"
      "__MONOTONIC_TIMESTAMP=7000000\n"
      "_BOOT_ID=b1\n"
      "_HOSTNAME=gpu-a01\n"
      "_TRANSPORT=kernel\n"
      "PRIORITY=3\n"
      "MESSAGE=NVRM: Xid (PCI:0000:3b:00): 79\n"
      "\n"
      "__REALTIME_TIMESTAMP=1717236002000000\n"
      "SYSLOG_IDENTIFIER=python3\n";
  input += binaryField("MESSAGE", std::string("Traceback\n  File \"x\"\nRuntimeError: \xff", 36));
  input +=
      "_PID=12\n"
      "\n"
      "__REALTIME_TIMESTAMP=1717236003000000\n"
      "_COMM=no-message\n"
      "\n";
  for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{64}}) {
    CAPTURE(chunk);
    auto r = parseAll(LogFormat::kJournalExport, input, {}, chunk);
    REQUIRE(r.records.size() == 2);
    CHECK(r.records[0].ident == "kernel");
    CHECK(r.records[0].text == "NVRM: Xid (PCI:0000:3b:00): 79");
    CHECK(r.records[0].line == 1);
    CHECK(r.records[0].time_ns == 1717236001LL * kSec);
    CHECK(r.records[1].ident == "python3");
    CHECK(r.records[1].text == "Traceback\n  File \"x\"\nRuntimeError: ?");
    CHECK(r.records[1].line == 10);
    CHECK(r.report.lines == 17);  // binary payload bytes are not lines
    CHECK(r.report.skipped == 3);  // the entry without MESSAGE, with its separator
    CHECK(r.report.malformed == 0);
    CHECK_FALSE(r.report.truncated);
  }
}

TEST_CASE("journalctl -o export: stream ending inside a binary field") {
  std::string input = "__REALTIME_TIMESTAMP=1717236001000000\nMESSAGE=ok\n\n";
  input += binaryField("MESSAGE", "0123456789").substr(0, 12);
  auto r = parseAll(LogFormat::kJournalExport, input);
  REQUIRE(r.records.size() == 1);
  CHECK(r.report.truncated);
  CHECK_FALSE(r.report.notes.empty());
}

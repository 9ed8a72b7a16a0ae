#include <catch2/catch.hpp>

#include "common/parse/boot_segments.h"
#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;

TEST_CASE("dmesg raw: monotonic stamps, boot time, stack-trace joining") {
  const std::string input =
      "[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02-amd64-054)\n"
      "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
      "[ 1235.000001] WARNING: CPU: 3 PID: 1 at kernel/foo.c:12 bar+0x1/0x2\n"
      "[ 1235.000002] Call Trace:\n"
      "[ 1235.000003]  <TASK>\n"
      "[ 1235.000004]  dump_stack_lvl+0x48/0x70\n"
      "[ 1235.000005]  </TASK>\n"
      "[ 1236.100000] nvidia-peermem: module loaded\n";
  SECTION("without boot time") {
    auto r = parseAll(LogFormat::kDmesgRaw, input);
    REQUIRE(r.records.size() == 5);
    CHECK(r.records[0].monotonic_ns == 0);
    CHECK_FALSE(r.records[0].time_known);
    CHECK(r.records[1].monotonic_ns == 1234 * kSec + 567890000);
    CHECK(r.records[1].text ==
          "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.");
    CHECK(r.records[1].ident == "kernel");
    CHECK(r.records[1].line == 2);
    CHECK(r.records[3].text ==
          "Call Trace:\n <TASK>\n dump_stack_lvl+0x48/0x70\n </TASK>");
    CHECK(r.records[3].line == 4);
    CHECK(r.records[4].line == 8);
    CHECK(r.report.lines == 8);
    CHECK(r.report.records == 5);
    CHECK(r.report.skipped == 0);
    CHECK(lineCountOf(r.records) == r.report.lines - r.report.skipped);
  }
  SECTION("with boot time") {
    ParseOptions o;
    o.boot_time_ns = 1'700'000'000 * kSec;
    o.boot_id = "b00t";
    auto r = parseAll(LogFormat::kDmesgRaw, input, o);
    REQUIRE(r.records.size() == 5);
    CHECK(r.records[1].time_known);
    CHECK(r.records[1].time_ns == 1'700'000'000 * kSec + 1234 * kSec + 567890000);
    CHECK(r.records[1].boot_id == "b00t");
  }
}

TEST_CASE("dmesg raw: unstamped line continues, decode prefix gives priority") {
  const std::string input =
      "kern  :err   : [  100.000001] mlx5_core 0000:17:00.0: cmd_work_handler:877: failed\n"
      "continuation without stamp\n"
      "kern  :warn  : [  100.5] pcieport 0000:00:01.0: AER: Corrected error received\n"
      "<3>[  101.000000] raw priority form\n";
  auto r = parseAll(LogFormat::kDmesgRaw, input);
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[0].priority == 3);
  CHECK(r.records[0].text ==
        "mlx5_core 0000:17:00.0: cmd_work_handler:877: failed\ncontinuation without stamp");
  CHECK(r.records[1].priority == 4);
  CHECK(r.records[1].monotonic_ns == 100 * kSec + 500000000);
  CHECK(r.records[2].priority == 3);
  CHECK(r.records[2].text == "raw priority form");
}

TEST_CASE("dmesg raw: leading unstamped line is malformed, noted") {
  auto r = parseAll(LogFormat::kDmesgRaw, "garbage first\n[    1.000000] ok\n");
  REQUIRE(r.records.size() == 1);
  CHECK(r.report.malformed == 1);
  CHECK(r.report.skipped == 1);
  REQUIRE(r.report.notes.size() == 1);
  CHECK(r.report.notes[0].rfind("line 1: ", 0) == 0);
}

TEST_CASE("dmesg -T: node-local ctime converted with utc_offset_sec") {
  ParseOptions o;
  o.utc_offset_sec = 2 * 3600;  // node at UTC+2
  auto r = parseAll(LogFormat::kDmesgCtime,
                    "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:b7:00): 48, pid=0, DBE\n"
                    "[Sat Aug  3 01:02:03 2024] single-digit day\n",
                    o);
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].time_known);
  // 2024-08-30T09:43:09Z
  CHECK(r.records[0].time_ns == 1725010989LL * kSec);
  CHECK(r.records[0].monotonic_ns == -1);
  CHECK(r.records[1].time_ns == (1722646923LL - 7200) * kSec);
}

TEST_CASE("dmesg -H: minute headers and deltas, local time, detected as dmesg -T") {
  const std::string input =
      "[  +0.000100] before any header: no time\n"
      "[May19 19:57] CMCI storm detected: switching to poll mode\n"
      "[  +0.000127] mce: [Hardware Error]: Machine check events logged\n"
      "[  +1.500000] EDAC skx MC3: HANDLING MCE MEMORY ERROR\n"
      "[May20 00:01] next day\n";
  CHECK(detectFormat(input) == LogFormat::kDmesgCtime);
  ParseOptions o;
  o.default_year = 2022;
  o.utc_offset_sec = -7 * 3600;
  auto r = parseAll(LogFormat::kDmesgCtime, input, o);
  REQUIRE(r.records.size() == 5);
  CHECK_FALSE(r.records[0].time_known);
  // 2022-05-19T19:57:00-07:00 = 2022-05-20T02:57:00Z = 1653015420
  CHECK(r.records[1].time_ns == 1653015420LL * kSec);
  CHECK(r.records[1].text == "CMCI storm detected: switching to poll mode");
  CHECK(r.records[2].time_ns == 1653015420LL * kSec + 127000);
  CHECK(r.records[3].time_ns == 1653015420LL * kSec + 127000 + 1500000000);
  CHECK(r.records[4].time_ns == (1653015420LL + 4 * 3600 + 4 * 60) * kSec);  // 00:01 local = 07:01Z
  CHECK(r.report.local_stamps == 4);
}

TEST_CASE("dmesg --time-format iso with and without --decode") {
  auto r = parseAll(LogFormat::kDmesgIso,
                    "2025-01-21T04:41:44,283302+00:00 NVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
                    "kern  :warn  : 2025-01-21T04:41:45,000000+01:00 watchdog: BUG: soft lockup\n"
                    "2025-01-21T04:41:46,000000+00:00  indented continuation\n");
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].time_ns == 1737434504LL * kSec + 283302000);
  CHECK(r.records[0].priority == -1);
  CHECK(r.records[0].text == "NVRM: GPU at PCI:0000:3b:00: GPU-1234");
  CHECK(r.records[1].priority == 4);
  CHECK(r.records[1].time_ns == (1737434505LL - 3600) * kSec);
  CHECK(r.records[1].text == "watchdog: BUG: soft lockup\n indented continuation");
}

TEST_CASE("parseKmsgRecord decodes header, escapes and dictionary") {
  auto rec = parseKmsgRecord(
      "3,1234,5678901,-,caller=T42;NVRM: Xid 79\\x0asecond line\n SUBSYSTEM=pci\n "
      "DEVICE=+pci:0000:3b:00.0\n");
  REQUIRE(rec);
  CHECK(rec->facility == 0);
  CHECK(rec->level == 3);
  CHECK(rec->seq == 1234);
  CHECK(rec->usec == 5678901);
  CHECK(rec->flags == '-');
  CHECK(rec->text == "NVRM: Xid 79\nsecond line");
  CHECK(rec->dict.at("SUBSYSTEM") == "pci");
  CHECK(rec->dict.at("DEVICE") == "+pci:0000:3b:00.0");
  auto user = parseKmsgRecord("14,5,6,c;hello");
  REQUIRE(user);
  CHECK(user->facility == 1);
  CHECK(user->level == 6);
  CHECK(user->flags == 'c');
  CHECK_FALSE(parseKmsgRecord("not,a;record"));
  CHECK_FALSE(parseKmsgRecord("6,1,2;missing flags"));
}

TEST_CASE("kmsg stream: dictionary lines belong to the previous record") {
  ParseOptions o;
  o.boot_time_ns = 1000 * kSec;
  auto r = parseAll(LogFormat::kKmsg,
                    "6,1,5000000,-;pci 0000:3b:00.0: enabling device\n"
                    " SUBSYSTEM=pci\n"
                    " DEVICE=+pci:0000:3b:00.0\n"
                    "4,2,6000000,-;tab\\x09here\n",
                    o);
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].monotonic_ns == 5 * kSec);
  CHECK(r.records[0].time_ns == 1005 * kSec);
  CHECK(r.records[0].priority == 6);
  CHECK(r.records[1].text == "tab\there");
  CHECK(r.records[1].line == 4);
  CHECK(r.report.lines == 4);
  CHECK(r.report.skipped == 0);
}

TEST_CASE("mixed files: a line of another stamped format is its own record with its own stamp", "[parse][mixed]") {
  // A dmesg file with a syslog line and a `dmesg -T` line pasted in, and a journal text file with
  // a raw dmesg line in it: each foreign line is a record of its own format (it used to be joined
  // to the record before it as a continuation, or skipped, and lost its stamp). Indented
  // continuations still join.
  ParseOptions o;
  o.boot_time_ns = 1'700'000'000 * kSec;
  o.default_year = 2024;
  SECTION("in a dmesg file") {
    auto r = parseAll(LogFormat::kDmesgRaw,
                      "[  100.000000] mlx5_core 0000:3b:00.0: link down\n"
                      "Jun 17 10:00:05 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
                      "[Mon Jun 17 10:00:07 2024] NVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
                      "[  101.000000] WARNING: CPU: 3 PID: 1 at x.c:1 y+0x1/0x2\n"
                      "  continued\n",
                      o);
    REQUIRE(r.records.size() == 4);
    CHECK(r.records[0].text == "mlx5_core 0000:3b:00.0: link down");
    CHECK(r.records[1].text == "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    CHECK(r.records[1].host == "gpu-a01");
    CHECK(r.records[1].time_known);
    CHECK(r.records[1].line == 2);
    CHECK(r.records[2].text == "NVRM: GPU at PCI:0000:3b:00: GPU-1234");
    CHECK(r.records[2].time_known);
    CHECK(r.records[2].line == 3);
    CHECK(r.records[3].text == "WARNING: CPU: 3 PID: 1 at x.c:1 y+0x1/0x2\n  continued");
    CHECK(r.report.lines == 5);
    CHECK(r.report.skipped == 0);
  }
  SECTION("in a journal text file") {
    auto r = parseAll(LogFormat::kJournalShortIso,
                      "2024-06-17T10:00:00+0000 gpu-a01 systemd[1]: Started Session 4.\n"
                      "[  250.500000] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\n"
                      "2024-06-17T10:00:09+0000 gpu-a01 kernel: pcieport 0000:00:01.0: AER: Uncorrected\n",
                      o);
    REQUIRE(r.records.size() == 3);
    CHECK(r.records[1].text == "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error");
    CHECK(r.records[1].monotonic_ns == 250'500'000'000);
    CHECK(r.records[1].time_ns == o.boot_time_ns.value() + 250'500'000'000);
    CHECK(r.records[1].ident == "kernel");
    CHECK(r.records[2].text == "pcieport 0000:00:01.0: AER: Uncorrected");
  }
}

TEST_CASE("dmesg raw: where the newest boot begins in a file appended across reboots") {
  using faultline::common::parse::newestBootStart;
  const std::string boot1 =
      "[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)\n"
      "[    1.250000] pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200\n"
      "[  300.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n";
  const std::string boot2 =
      "[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)\n"
      "[    1.250007] pci 0000:3b:00.0: [10de:2330] type 00 class 0x030200\n"
      "[  200.000000] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\n";
  SECTION("one boot: from the start") {
    CHECK(newestBootStart(boot1) == 0);
    CHECK(newestBootStart("") == 0);
    CHECK(newestBootStart("no stamps here\nnor here\n") == 0);
  }
  SECTION("dmesg -w >> FILE across a reboot: the second boot's first line") {
    CHECK(newestBootStart(boot1 + boot2) == boot1.size());
    // The same with --decode and <N> prefixes, CRLF endings and unstamped lines between.
    const std::string decoded =
        "kern  :info  : [    0.000000] Linux version 6.1.0\r\n"
        "kern  :err   : [  300.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1\r\n"
        "  a continuation line\r\n";
    const std::string next = "<6>[    0.000000] Linux version 6.1.0\r\n<3>[   12.000000] later\r\n";
    CHECK(newestBootStart(decoded + next) == decoded.size());
  }
  SECTION("three boots: the last") {
    CHECK(newestBootStart(boot1 + boot2 + boot1) == boot1.size() + boot2.size());
  }
  SECTION("dmesg >> FILE run twice in one boot: both dumps are of the newest boot") {
    // The second dump repeats the first one's last line (same stamp, same text) and goes on.
    const std::string later = boot1 + "[  400.000000] nvidia-peermem: module loaded\n";
    CHECK(newestBootStart(boot1 + later) == 0);
    // After a reboot, then two dumps of the new boot: from the new boot's first dump.
    CHECK(newestBootStart(boot2 + boot1 + later) == boot2.size());
  }
  SECTION("a ring buffer that overwrote the first dump's last line: taken as another boot") {
    // Nothing ties the dumps together: the earlier one is not placed (left out), never misplaced.
    const std::string second = "[  120.000000] the oldest line left\n[  350.000000] something newer\n";
    CHECK(newestBootStart(boot1 + second) == boot1.size());
  }
  SECTION("stamps a little out of order (CPUs) are not a reboot") {
    const std::string jitter =
        "[  100.000000] a\n[   99.600000] b from another CPU\n[  100.200000] c\n";
    CHECK(newestBootStart(jitter) == 0);
  }
  SECTION("two passes over pieces give the offset within the whole") {
    faultline::common::parse::BootSegments segments;
    const std::string all = boot1 + boot2;
    uint64_t off = 1000;  // the scan began at a checkpoint, not at 0
    for (size_t pos = 0; pos < all.size();) {
      size_t nl = all.find('\n', pos);
      segments.scan(std::string_view(all).substr(pos, nl - pos), off + pos);
      pos = nl + 1;
    }
    REQUIRE(segments.hasFallBack());
    CHECK(segments.lastSegmentStart() == off + boot1.size());
    CHECK(segments.newestBootStart() == off + boot1.size());
  }
}

#include <catch2/catch.hpp>

#include "common/parse/boot_segments.h"
#include "common/parse/line_grammar.h"
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

// CONFIG_PRINTK_CALLER: the kernel's console puts the caller right after the stamp, util-linux
// dmesg after the stamp's space; a thread "T<pid>" or a CPU "C<n>", right-aligned.
TEST_CASE("dmesg raw: the printk caller id is dropped, frames still join their header") {
  const std::string input =
      "[   12.345678][    T1] Run /init as init process\n"
      "[    1.000000] [Firmware Bug]: TSC ADJUST differs: CPU0 0 --> CPU1 -1\n"
      "[  123.456789][ C3] watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:4242]\n"
      "[  123.456790][ C3] Call Trace:\n"
      "[  123.456791][ C3]  <IRQ>\n"
      "[  123.456792][ C3]  nv_dma_map+0x1/0x2 [nvidia]\n"
      "[  124.000000] [  T812] util-linux form, caller kept out [T9]\n"
      "[  124.000001] [  T812]  indented frame under it\n"
      "[  124.000002][T4056360]\n";
  CHECK(detectFormat(input) == LogFormat::kDmesgRaw);
  auto r = parseAll(LogFormat::kDmesgRaw, input, {}, 5);
  REQUIRE(r.records.size() == 6);
  CHECK(r.records[0].text == "Run /init as init process");
  CHECK(r.records[0].monotonic_ns == 12 * kSec + 345678000);
  CHECK(r.records[1].text == "[Firmware Bug]: TSC ADJUST differs: CPU0 0 --> CPU1 -1");  // not a caller
  CHECK(r.records[2].text == "watchdog: BUG: soft lockup - CPU#3 stuck for 22s! [python3:4242]");
  CHECK(r.records[3].text == "Call Trace:\n <IRQ>\n nv_dma_map+0x1/0x2 [nvidia]");
  CHECK(r.records[3].line == 4);
  CHECK(r.records[4].text == "util-linux form, caller kept out [T9]\n indented frame under it");
  CHECK(r.records[5].text.empty());
  CHECK(r.report.skipped == 0);
  CHECK(lineCountOf(r.records) == r.report.lines);
  CHECK(parse::printkCallerLength("[    T1] x") == 8);
  CHECK(parse::printkCallerLength("[C12]") == 5);
  CHECK(parse::printkCallerLength("[T] x") == 0);
  CHECK(parse::printkCallerLength("[ T1 ] x") == 0);
  CHECK(parse::printkCallerLength("[X1] x") == 0);
}

// A node's console log as HPE Cray EX's console logger (conman) keeps it: the logger's wall-clock
// stamp, then the kernel's raw line with its caller id. Lines from
// samples/real-pending/sys-amdgpu-svm-evict-warn-kills-node-jax-setonix, a trace and console
// noise added.
TEST_CASE("console log: wall-clock stamp, uptime and caller, with the console's own lines kept") {
  const std::string input =
      "[2025-07-16T20:42:48+08:00][1854229.275568][T4056360] Hardware name: HPE HPE_CRAY_EX235A/HPE CRAY EX235A, BIOS 2.1.0 01-23-2025\n"
      "[2025-07-16T20:42:49+08:00][1854229.283887][T4056360] Workqueue: events svm_range_evict_svm_bo_worker [amdgpu]\n"
      "[2025-07-16T20:42:49+08:00][1854229.290017][T4056360] RIP: 0010:svm_range_evict_svm_bo_worker+0x313/0x330 [amdgpu]\n"
      "[2025-07-16T20:42:49+08:00][1854229.338874][T4056360] Call Trace:\n"
      "[2025-07-16T20:42:49+08:00][1854229.338875][T4056360]  <TASK>\n"
      "[2025-07-16T20:42:49.5+08:00] <ConMan> Console [nid002950] log at 2025-07-16 20:42:49 AWST.\n"
      "[2025-07-16T20:42:49+08:00][1854229.338876][T4056360]  process_one_work+0x1e2/0x3b0\n"
      "[2025-07-16T12:42:50Z][1854229.338877][T4056360]  </TASK>\n"
      "[2025-07-16T20:42:50+08:00]\n"
      "[2025-07-16 20:42:51] [ 1854230.000000][    C7] space-separated stamp without a zone: node-local\n"
      "[ 1854231.000000] no console stamp: raw dmesg\n";
  CHECK(detectFormat(input) == LogFormat::kConsole);
  CHECK(sourceKindOf(LogFormat::kConsole) == SourceKind::kKernel);
  CHECK(formatName(LogFormat::kConsole) == "console");
  ParseOptions o;
  o.utc_offset_sec = 8 * 3600;
  auto r = parseAll(LogFormat::kConsole, input, o, 11);
  REQUIRE(r.records.size() == 7);
  const auto& hw = r.records[0];
  CHECK(hw.time_known);
  CHECK(hw.time_ns == 1752669768LL * kSec);  // 12:42:48Z: the wall stamp, not boot + uptime
  CHECK(hw.monotonic_ns == 1854229 * kSec + 275568000);
  CHECK(hw.ident == "kernel");
  CHECK(hw.text == "Hardware name: HPE HPE_CRAY_EX235A/HPE CRAY EX235A, BIOS 2.1.0 01-23-2025");
  CHECK(r.records[2].text == "RIP: 0010:svm_range_evict_svm_bo_worker+0x313/0x330 [amdgpu]");
  // The console's own line is handed on at once; the trace it interrupts stays one record.
  const auto& noise = r.records[3];
  CHECK(noise.ident == "console");
  CHECK(noise.line == 6);
  CHECK(noise.time_ns == 1752669769LL * kSec + 500000000);
  CHECK(noise.monotonic_ns == -1);
  CHECK(noise.text == "<ConMan> Console [nid002950] log at 2025-07-16 20:42:49 AWST.");
  const auto& trace = r.records[4];
  CHECK(trace.line == 4);
  CHECK(trace.text == "Call Trace:\n <TASK>\n process_one_work+0x1e2/0x3b0\n </TASK>");
  CHECK(trace.time_ns == 1752669769LL * kSec);
  CHECK(r.records[5].time_ns == 1752669771LL * kSec);  // 20:42:51 at UTC+8
  CHECK(r.records[5].text == "space-separated stamp without a zone: node-local");
  CHECK(r.report.local_stamps == 1);
  CHECK_FALSE(r.records[6].time_known);  // no boot time given
  CHECK(r.records[6].monotonic_ns == 1854231 * kSec);
  CHECK(r.records[6].text == "no console stamp: raw dmesg");
  CHECK(r.report.skipped == 1);  // the stamp alone: a blank console line
  CHECK(r.report.malformed == 0);
  CHECK(lineCountOf(r.records) == r.report.lines - r.report.skipped);
}

// A line whose wall stamp does not parse is read as a raw dmesg file reads a line without its
// stamp: joined to the kernel record before it, or malformed when there is none.
TEST_CASE("console log: malformed stamps never lose the good lines around them") {
  const std::string input =
      "[2025-13-16T20:42:48+08:00][    1.000000][T1] month 13: no stamp, nothing to join\n"
      "[2025-07-16T20:42:48+08:00][    2.000000][T1] good\n"
      "[2025-07-16T20:42:4][    2.500000][T1] cut stamp\n"
      "[2025-07-16T20:42:48+08:00][    2.0000x0][T1] bad uptime: the console's own line\n"
      "[2025-07-16T20:42:48+08:00] [2.500] not printk's six digits: the console's own line too\n"
      "[9999-07-16T20:42:48Z][    3.000000] year out of range\n"
      "[2025-07-16T20:42:48+8:00][    3.500000] zone without its two digits\n"
      "[2025-07-16T20:42:49+08][    4.000000][T1] good again (an hour-only zone is one)\n"
      "[2025-07-16T20:42:49+08:00][ 1678901234.123456][T1] epoch-sized uptime still read\n";
  auto r = parseAll(LogFormat::kConsole, input, {}, 3);
  REQUIRE(r.records.size() == 5);
  CHECK(r.report.malformed == 1);
  CHECK(r.report.skipped == 1);
  CHECK(r.report.notes.at(0).rfind("line 1: ", 0) == 0);
  // The console's own lines are handed on while the kernel record before them still joins.
  CHECK(r.records[0].ident == "console");
  CHECK(r.records[0].line == 4);
  CHECK(r.records[0].text == "[    2.0000x0][T1] bad uptime: the console's own line");
  CHECK(r.records[1].ident == "console");
  CHECK(r.records[1].text == "[2.500] not printk's six digits: the console's own line too");
  CHECK(r.records[2].text ==
        "good\n[2025-07-16T20:42:4][    2.500000][T1] cut stamp\n"
        "[9999-07-16T20:42:48Z][    3.000000] year out of range\n"
        "[2025-07-16T20:42:48+8:00][    3.500000] zone without its two digits");
  CHECK(r.records[3].text == "good again (an hour-only zone is one)");
  CHECK(r.records[3].time_ns == 1752669769LL * kSec);
  CHECK(r.records[4].monotonic_ns == 1678901234LL * kSec + 123456000);
  CHECK(lineCountOf(r.records) == r.report.lines - r.report.skipped);
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
  // A dmesg file with a syslog line, a `dmesg -T` line and a console line pasted in, and a journal
  // text file with a raw dmesg line in it: each foreign line is a record of its own format (it used
  // to be joined to the record before it as a continuation, or skipped, and lost its stamp).
  // Indented continuations still join.
  ParseOptions o;
  o.boot_time_ns = 1'700'000'000 * kSec;
  o.default_year = 2024;
  SECTION("in a dmesg file") {
    auto r = parseAll(LogFormat::kDmesgRaw,
                      "[  100.000000] mlx5_core 0000:3b:00.0: link down\n"
                      "Jun 17 10:00:05 gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
                      "[Mon Jun 17 10:00:07 2024] NVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
                      "[2025-07-16T20:42:49+08:00][  100.500000][T4056360] RIP: 0010:x+0x1/0x2 [amdgpu]\n"
                      "[  101.000000] WARNING: CPU: 3 PID: 1 at x.c:1 y+0x1/0x2\n"
                      "  continued\n",
                      o);
    REQUIRE(r.records.size() == 5);
    CHECK(r.records[0].text == "mlx5_core 0000:3b:00.0: link down");
    CHECK(r.records[1].text == "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.");
    CHECK(r.records[1].host == "gpu-a01");
    CHECK(r.records[1].time_known);
    CHECK(r.records[1].line == 2);
    CHECK(r.records[2].text == "NVRM: GPU at PCI:0000:3b:00: GPU-1234");
    CHECK(r.records[2].time_known);
    CHECK(r.records[2].line == 3);
    CHECK(r.records[3].text == "RIP: 0010:x+0x1/0x2 [amdgpu]");  // a console line: its own wall stamp
    CHECK(r.records[3].time_ns == 1752669769LL * kSec);
    CHECK(r.records[3].monotonic_ns == 100'500'000'000);
    CHECK(r.records[4].text == "WARNING: CPU: 3 PID: 1 at x.c:1 y+0x1/0x2\n  continued");
    CHECK(r.report.lines == 6);
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

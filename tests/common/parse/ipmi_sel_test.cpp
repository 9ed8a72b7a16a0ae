// ipmitool SEL listings: field layout of `sel list` / `sel elist` (ipmitool 1.8.18 and 1.8.19+,
// table and -c), node-local stamps, records without wall time, detection.
#include <catch2/catch.hpp>

#include "common/job.h"
#include "common/parse/ipmi_sel.h"
#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;
using faultline::common::parse::IpmiSelLine;
using faultline::common::parse::parseIpmiSelLine;

TEST_CASE("ipmitool sel list line: id, stamp, text", "[parse][ipmi-sel]") {
  IpmiSelLine l;
  REQUIRE(parseIpmiSelLine("   3 | 06/01/2024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted", &l));
  CHECK(l.record_id == 3);
  CHECK(l.stamp == IpmiSelLine::Stamp::kWall);
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T10:12:03.000Z");
  CHECK_FALSE(l.utc);
  CHECK(l.text == "Memory #0x53 | Uncorrectable ECC | Asserted");

  // elist: the sensor's SDR name, an OEM-decorated description, en_US %X.
  REQUIRE(parseIpmiSelLine("  1a | 06/01/2024 | 10:12:03 AM | Memory CPU1_DIMM_A1 | Uncorrectable ECC (@DIMMA1(CPU1)) | Asserted", &l));
  CHECK(l.record_id == 0x1a);
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T10:12:03.000Z");
  CHECK(l.text == "Memory CPU1_DIMM_A1 | Uncorrectable ECC (@DIMMA1(CPU1)) | Asserted");
}

TEST_CASE("ipmitool 1.8.19+ stamps: %x and %X %Z in the C and en_US locales", "[parse][ipmi-sel]") {
  IpmiSelLine l;
  REQUIRE(parseIpmiSelLine("  21 | 06/01/24 | 10:16:00 UTC | Processor CPU2_Status | IERR | Asserted", &l));
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T10:16:00.000Z");
  CHECK(l.utc);
  REQUIRE(parseIpmiSelLine("  22 | 06/01/2024 | 12:16:30 PM CEST | Power Unit Pwr Unit Status | AC lost | Asserted", &l));
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T12:16:30.000Z");
  CHECK_FALSE(l.utc);
  REQUIRE(parseIpmiSelLine("  23 | 06/01/2024 | 12:05:00 AM PDT | Power Unit Pwr Unit Status | AC lost | Asserted", &l));
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T00:05:00.000Z");
  REQUIRE(parseIpmiSelLine("  24 | 2024-06-01 | 22:05:00 GMT | Fan FAN3 | Lower Critical going low  | Asserted", &l));
  CHECK(l.utc);
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T22:05:00.000Z");
}

TEST_CASE("SEL records without wall time", "[parse][ipmi-sel]") {
  IpmiSelLine l;
  REQUIRE(parseIpmiSelLine("   2 |  Pre-Init  |0000000012| System Event #0x01 | Timestamp Clock Sync | Asserted", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kPreInit);
  CHECK(l.text == "System Event #0x01 | Timestamp Clock Sync | Asserted");
  REQUIRE(parseIpmiSelLine("  1f | OEM record e0 | 0102030405060708090a0b0c0d", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kNone);
  CHECK(l.text == "OEM record e0 | 0102030405060708090a0b0c0d");
  REQUIRE(parseIpmiSelLine("  20 | Linux kernel panic: Fatal excep", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kNone);
  REQUIRE(parseIpmiSelLine("  25 | Unspecified | Unspecified | System Event #0x01 | OEM System boot event | Asserted", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kNone);
  CHECK(l.text == "System Event #0x01 | OEM System boot event | Asserted");
}

TEST_CASE("ipmitool -c sel list", "[parse][ipmi-sel]") {
  IpmiSelLine l;
  REQUIRE(parseIpmiSelLine("3,06/01/2024,10:12:03,Memory #0x53,Uncorrectable ECC,Asserted", &l));
  CHECK(l.csv);
  CHECK(l.record_id == 3);
  CHECK(l.text == "Memory #0x53,Uncorrectable ECC,Asserted");
  REQUIRE(parseIpmiSelLine("2, Pre-Init ,0000000012,System Event #0x01,Timestamp Clock Sync,Asserted", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kPreInit);
  REQUIRE(parseIpmiSelLine("1f,,,OEM record e0,0102030405060708090a0b0c0d", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kNone);

  const auto r = parseAll(LogFormat::kIpmiSel, "3,06/01/2024,10:12:03,Memory #0x53,Uncorrectable ECC,Asserted\n");
  REQUIRE(r.records.size() == 1);
  CHECK(r.records[0].text == "Memory #0x53 | Uncorrectable ECC | Asserted");
}

TEST_CASE("lines that are not SEL entries", "[parse][ipmi-sel]") {
  IpmiSelLine l;
  CHECK_FALSE(parseIpmiSelLine("SEL has no entries", &l));
  CHECK_FALSE(parseIpmiSelLine("   1 | foo | bar", &l));
  CHECK_FALSE(parseIpmiSelLine("   1 | 06/01/2024 | 10:12:03 |", &l));
  CHECK_FALSE(parseIpmiSelLine("   1 | 13/45/2024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted", &l));
  CHECK_FALSE(parseIpmiSelLine("   1 | 06/01/2024 | 25:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted", &l));
  CHECK_FALSE(parseIpmiSelLine("12 | epoch 3 | loss 0.51 | lr 1e-4", &l));
  CHECK_FALSE(parseIpmiSelLine("2024-06-01T10:12:03+0000 gpu-a01 ipmievd[812]: Memory sensor - Uncorrectable ECC", &l));
  CHECK_FALSE(parseIpmiSelLine("[rank3]: 1,2,3", &l));
}

TEST_CASE("SEL stamps are node-local time, UTC-named stamps are not shifted", "[parse][ipmi-sel]") {
  const std::string log =
      "   3 | 06/01/2024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted\n"
      "   2 |  Pre-Init  |0000000012| System Event #0x01 | Timestamp Clock Sync | Asserted\n"
      "  21 | 06/01/24 | 10:16:00 UTC | Processor CPU2_Status | IERR | Asserted\n"
      "SEL has no entries\n";
  ParseOptions o;
  o.utc_offset_sec = 7200;  // BMC clock set to the node's zone, two hours ahead of UTC
  const auto r = parseAll(LogFormat::kIpmiSel, log, o);
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[0].time_known);
  CHECK(formatTimeNs(r.records[0].time_ns) == "2024-06-01T08:12:03.000Z");
  CHECK(r.records[0].ident == "ipmi-sel");
  CHECK(r.records[0].line == 1);
  CHECK_FALSE(r.records[1].time_known);
  CHECK(r.records[1].monotonic_ns == -1);
  CHECK(formatTimeNs(r.records[2].time_ns) == "2024-06-01T10:16:00.000Z");
  CHECK(r.report.records == 3);
  CHECK(r.report.malformed == 1);
  CHECK(r.report.lines == 4);
}

TEST_CASE("SEL listings are detected, tables in rank logs are not", "[parse][ipmi-sel][detect]") {
  CHECK(detectFormat("   1 | 05/30/2024 | 22:01:15 | Event Logging Disabled #0x07 | Log area reset/cleared | Asserted\n"
                     "   2 |  Pre-Init  |0000000012| System Event #0x01 | Timestamp Clock Sync | Asserted\n"
                     "   3 | 06/01/2024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted\n") ==
        LogFormat::kIpmiSel);
  CHECK(detectFormat("3,06/01/2024,10:12:03,Memory #0x53,Uncorrectable ECC,Asserted\n"
                     "4,06/01/2024,10:12:04,Processor #0x09,IERR,Asserted\n") == LogFormat::kIpmiSel);
  CHECK(detectFormat("| epoch | loss |\n| 1 | 0.5 |\n   1 | 2 | 3\n") == LogFormat::kApplication);
}

TEST_CASE("posted ipmitool 1.8.19 elist lines", "[parse][ipmi-sel]") {
  // posted: https://github.com/ipmitool/ipmitool/issues/385 (ipmitool 1.8.19, %x %X %Z)
  const std::string log =
      "  3a | 12/14/22 | 23:09:44 CET | Memory #0x88 | Correctable ECC (CPU0_G1) | Asserted\n"
      "    e | 06/10/22 | 19:31:43 CEST | Memory #0x87 | Correctable ECC () | Asserted\n";
  CHECK(detectFormat(log) == LogFormat::kIpmiSel);
  ParseOptions o;
  o.utc_offset_sec = 3600;
  const auto r = parseAll(LogFormat::kIpmiSel, log, o);
  REQUIRE(r.records.size() == 2);
  CHECK(formatTimeNs(r.records[0].time_ns) == "2022-12-14T22:09:44.000Z");
  CHECK(r.records[0].text == "Memory #0x88 | Correctable ECC (CPU0_G1) | Asserted");
  CHECK(r.records[1].text == "Memory #0x87 | Correctable ECC () | Asserted");
  // posted: https://github.com/open-power/op-build/issues/607 (an OEM record with a stamp)
  IpmiSelLine l;
  REQUIRE(parseIpmiSelLine("  8b | 08/31/2016 | 06:21:15 | OEM record df | 040020 | 12616faaaaaa", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kWall);
  CHECK(l.text == "OEM record df | 040020 | 12616faaaaaa");
}

TEST_CASE("FreeIPMI ipmi-sel: header, padded columns, month names, PostInit", "[parse][ipmi-sel][freeipmi]") {
  // posted: https://github.com/thomas-krenn/check_ipmi_sensor_v3/issues/26 (ipmi-sel --output-event-state)
  const std::string log =
      "ID   | Date        | Time     | Name                                              | Type              | State    | Event\n"
      "1    | PostInit    | PostInit | Sensor #0                                         | OS Boot           | Nominal  | C: boot completed\n"
      "4    | Jul-20-2017 | 10:29:49 | Power Supply PS2 Status                           | Power Supply      | Critical | Power Supply Failure detected\n"
      "6    | Jul-20-2017 | 10:37:20 | Sensor #0                                         | OS Critical Stop  | Warning  | OS Graceful Shutdown\n";
  CHECK(detectFormat(log) == LogFormat::kIpmiSel);
  ParseOptions o;
  o.utc_offset_sec = 7200;
  const auto r = parseAll(LogFormat::kIpmiSel, log, o);
  REQUIRE(r.records.size() == 3);
  CHECK(r.report.malformed == 0);
  CHECK(r.report.skipped == 1);  // the header
  CHECK_FALSE(r.records[0].time_known);
  CHECK(r.records[0].text == "Sensor #0 | OS Boot | Nominal | C: boot completed");
  CHECK(formatTimeNs(r.records[1].time_ns) == "2017-07-20T08:29:49.000Z");
  CHECK(r.records[1].text == "Power Supply PS2 Status | Power Supply | Critical | Power Supply Failure detected");

  IpmiSelLine l;
  // format: chu11/freeipmi-mirror ipmi-sel/ipmi-sel.c (record id "%-Nu"), libfreeipmi/sel/ipmi-sel-string.c ("%b-%d-%Y")
  REQUIRE(parseIpmiSelLine("12   | Jun-01-2024 | 10:12:03 | DIMM_A1          | Memory            | Uncorrectable memory error", &l));
  CHECK(l.freeipmi);
  CHECK(l.record_id == 12);
  CHECK(formatTimeNs(l.wall_ns) == "2024-06-01T10:12:03.000Z");
  REQUIRE(parseIpmiSelLine("12,Jun-01-2024,10:12:03,DIMM_A1,Memory,Uncorrectable memory error", &l));
  CHECK(l.csv);
  CHECK(l.freeipmi);
  REQUIRE(parseIpmiSelLine("13   | Unspec.     | Unspec.  | DIMM_A1          | Memory            | Parity", &l));
  CHECK(l.stamp == IpmiSelLine::Stamp::kNone);
  CHECK_FALSE(parseIpmiSelLine("ID   | Date        | Time     | Name | Type | Event", &l));
  const auto c = parseAll(LogFormat::kIpmiSel, "ID,Date,Time,Name,Type,Event\n12,Jun-01-2024,10:12:03,DIMM_A1,Memory,Uncorrectable memory error\n");
  REQUIRE(c.records.size() == 1);
  CHECK(c.records[0].text == "DIMM_A1 | Memory | Uncorrectable memory error");
}

TEST_CASE("a FreeIPMI listing of one record is still detected", "[parse][ipmi-sel][freeipmi][detect]") {
  CHECK(detectFormat("ID   | Date        | Time     | Name      | Type         | Event\n"
                     "4    | Jul-20-2017 | 10:29:49 | PS2 Status | Power Supply | Power Supply Failure detected\n") ==
        LogFormat::kIpmiSel);
  CHECK(parse::isIpmiSelHeader("ID,Date,Time,Name,Type,Event"));
  CHECK_FALSE(parse::isIpmiSelHeader("ID of the run: 12"));
}

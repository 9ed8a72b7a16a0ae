// IPMI System Event Log as ipmitool prints it (`ipmitool sel list` / `sel elist`).
//
// One record per line, fields separated by " | ":
//   "   1 | 06/01/2024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted"        list (≤1.8.18)
//   "  1a | 06/01/24 | 10:12:03 UTC | Memory CPU1_DIMM_A1 | Uncorrectable ECC | Asserted"  1.8.19+ (%x, %X %Z)
//   "  1b | 06/01/2024 | 10:12:03 AM CEST | ..."                                            1.8.19+ en_US locale
//   "   2 |  Pre-Init  |0000000012| System Event #0x01 | Timestamp Clock Sync | Asserted"  stamp before BMC init
//   "  20 | OEM record e0 | 0102030405060708090a0b0c0d"                                   OEM, no stamp
//   "  21 | Linux kernel panic: Fatal excep"                                              panic record, no stamp
// and FreeIPMI's `ipmi-sel` (default columns ID | Date | Time | Name | Type [| State] | Event):
//   "4    | Jul-20-2017 | 10:29:49 | Power Supply PS2 Status   | Power Supply | Critical | Power Supply Failure detected"
//   "1    | PostInit    | PostInit | Sensor #0                 | OS Boot      | Nominal  | C: boot completed"
// The record id is hex ("%4x"). The stamp is the BMC clock, which is node-local time unless the
// line names UTC/GMT; records before BMC init (Pre-Init) or with an "Unspecified" stamp have no
// wall time. The record's text is everything after the stamp, separators kept, so rules match
// "Memory #0x53 | Uncorrectable ECC | Asserted" (FreeIPMI: "DIMM_A1 | Memory | Uncorrectable memory
// error", padding removed).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "common/parse/stream_parser.h"

namespace faultline::common::parse {

struct IpmiSelLine {
  uint32_t record_id = 0;
  enum class Stamp { kWall, kPreInit, kNone } stamp = Stamp::kNone;
  int64_t wall_ns = 0;     // kWall: the stamp read as if UTC
  bool utc = false;        // kWall: the line named UTC/GMT (ipmitool -Z or TZ=UTC)
  bool csv = false;        // `ipmitool -c` / `ipmi-sel --comma-separated-output`: ',' separators
  bool freeipmi = false;   // FreeIPMI `ipmi-sel` (padded columns, "Jun-01-2024", decimal ids)
  std::string_view text;   // sensor | event | direction ..., or "OEM record ..." / "Linux kernel panic: ..."
};

// Parses one line (no '\n'). False when the line is not a SEL list/elist entry.
bool parseIpmiSelLine(std::string_view line, IpmiSelLine* out);

// FreeIPMI's column header: "ID   | Date        | Time     | Name ..." or "ID,Date,Time,...".
bool isIpmiSelHeader(std::string_view line);

std::unique_ptr<StreamParser> makeIpmiSelParser(ParseOptions options, RecordSink sink);

}  // namespace faultline::common::parse

// Inputs the fuzz targets (tests/fuzz, docs/testing.md) found, as unit tests: each failed before
// its fix. The input files themselves are seeds in tests/fuzz/seeds/<target>/.
#include <catch2/catch.hpp>

#include "common/parse/time_util.h"
#include "parse_test_util.h"

using namespace faultline::common;
using faultline::common::testing::parseAll;

TEST_CASE("fuzz: a stamp's year outside 1970..2261 is no stamp (its nanoseconds overflowed int64)", "[fuzz]") {
  parse::IsoTime t;
  CHECK(parse::parseIsoTime("2261-12-31T23:59:59Z", false, &t));
  CHECK(t.ns > 0);
  CHECK_FALSE(parse::parseIsoTime("6024-06-26 10:01:00,000", true, &t));
  CHECK_FALSE(parse::parseIsoTime("0025-06-26T10:01:00Z", false, &t));
  CHECK_FALSE(parse::parseIsoTime("1969-12-31T23:59:59Z", false, &t));

  // fuzz_parse_application: "0: 6024-..." kept its text, with an overflowed time.
  auto app = parseAll(LogFormat::kApplication, "0: 6024-06-26 10:01:00,000 step 50 loss 2.599\n"
                                               "0: 2024-06-26 10:02:17,000 step 100 loss 2.599\n");
  REQUIRE(app.records.size() == 2);
  CHECK_FALSE(app.records[0].time_known);
  CHECK(app.records[0].text == "6024-06-26 10:01:00,000 step 50 loss 2.599");
  CHECK(app.records[1].time_known);
  CHECK(app.records[1].time_ns == 1719396137LL * 1'000'000'000);

  // dmesg -T, Fabric Manager and IPMI SEL stamps with such a year: not records of that format.
  auto ctime = parseAll(LogFormat::kDmesgCtime, "[Tue Jun 11 22:41:07 9999] NVRM: Xid (PCI:0000:18:00): 79\n"
                                                "[Tue Jun 11 22:41:07 2024] NVRM: Xid (PCI:0000:18:00): 79\n");
  REQUIRE(ctime.records.size() == 1);
  CHECK(ctime.records[0].time_ns == 1718145667LL * 1'000'000'000);
  CHECK(ctime.report.malformed == 1);
  auto fm = parseAll(LogFormat::kFabricManager, "[May 16 9025 15:10:21] [ERROR] [tid 12] fatal\n"
                                                "[Mon Jan 01 0001 00:00:00] [ERROR] [tid 12] fatal\n");
  for (const auto& r : fm.records) CHECK_FALSE(r.time_known);
  auto sel = parseAll(LogFormat::kIpmiSel, "   1 | 06/01/9024 | 10:12:03 | Memory #0x53 | Uncorrectable ECC | Asserted\n");
  for (const auto& r : sel.records) CHECK_FALSE(r.time_known);
}

TEST_CASE("fuzz: seconds since boot and kmsg microseconds beyond 4e9 s are not stamps (int64 ns overflowed)", "[fuzz]") {
  // fuzz_parse_dmesg_raw: "[10240404040.0]" became a negative monotonic time.
  auto raw = parseAll(LogFormat::kDmesgRaw, "[10240404040.000000] NVRM: Xid (PCI:0000:18:00): 79\n"
                                            "[ 3999999999.500000] NVRM: Xid (PCI:0000:18:00): 79\n");
  for (const auto& r : raw.records) CHECK((r.monotonic_ns == -1 || (r.monotonic_ns >= 0 && r.monotonic_ns <= 4'000'000'000LL * 1'000'000'000)));
  REQUIRE_FALSE(raw.records.empty());
  CHECK(raw.records.back().monotonic_ns == 3'999'999'999'500'000'000LL);

  // fuzz_parse_kmsg: usec 1389609112609112009 overflowed when turned into ns (the agent's kmsg
  // source reads the same header through parseKmsgRecord).
  ParseOptions o;
  o.boot_time_ns = 1717236000LL * 1'000'000'000;
  auto kmsg = parseAll(LogFormat::kKmsg, "6,1,1389609112609112009,-;NVRM: Xid 79\n6,2,5000000,-;NVRM: Xid 79\n", o);
  REQUIRE(kmsg.records.size() == 1);
  CHECK(kmsg.report.malformed == 1);
  CHECK(kmsg.records[0].monotonic_ns == 5'000'000'000LL);
  CHECK_FALSE(parseKmsgRecord("6,1,1389609112609112009,-;NVRM: Xid 79"));
}

#include <catch2/catch.hpp>

#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;

TEST_CASE("syslog traditional: year, offset, embedded kernel stamp, #012") {
  ParseOptions o;
  o.default_year = 2024;
  o.utc_offset_sec = -5 * 3600;  // node at UTC-5
  auto r = parseAll(LogFormat::kSyslog,
                    "Dec  2 11:38:27 gpu-a01 kernel: [  219.470001] NVRM: Xid (PCI:0000:3b:00): 13\n"
                    "Dec  2 11:38:27 gpu-a01 kernel: [  219.470002] Call Trace:\n"
                    "Dec  2 11:38:27 gpu-a01 kernel: [  219.470003]  dump_stack+0x1/0x2\n"
                    "Dec 12 01:02:03 gpu-a01 python[123]: line one#012line two#011tabbed\n"
                    "Dec 31 23:59:59 gpu-a01 CRON[9]: (root) CMD (true)\n"
                    "Jan  1 00:00:01 gpu-a01 systemd[1]: happy new year\n",
                    o);
  REQUIRE(r.records.size() == 5);
  // 2024-12-02T11:38:27 at UTC-5 is 16:38:27Z.
  CHECK(r.records[0].time_ns == 1733157507LL * kSec);
  CHECK(r.records[0].monotonic_ns == 219 * kSec + 470001000);
  CHECK(r.records[0].text == "NVRM: Xid (PCI:0000:3b:00): 13");
  CHECK(r.records[0].host == "gpu-a01");
  CHECK(r.records[0].ident == "kernel");
  CHECK(r.records[1].text == "Call Trace:\n dump_stack+0x1/0x2");
  CHECK(r.records[2].ident == "python");
  CHECK(r.records[2].text == "line one\nline two\ttabbed");
  CHECK(r.records[2].monotonic_ns == -1);
  // Year steps at the Dec -> Jan wrap: 2025-01-01T00:00:01 local = 05:00:01Z.
  CHECK(r.records[4].time_ns == 1735707601LL * kSec);
}

TEST_CASE("syslog: rsyslog high-precision RFC 3339 stamps") {
  auto r = parseAll(LogFormat::kSyslog,
                    "2024-12-02T11:38:27.123456+00:00 gpu-a01 kernel: [  5.000000] hello\n"
                    "<11>2024-12-02T11:38:28+01:00 gpu-a01 app: with PRI\n");
  REQUIRE(r.records.size() == 2);
  CHECK(r.records[0].time_ns == 1733139507LL * kSec + 123456000);
  CHECK(r.records[0].monotonic_ns == 5 * kSec);
  CHECK(r.records[0].text == "hello");
  CHECK(r.records[1].priority == 3);
  CHECK(r.records[1].time_ns == (1733139508LL - 3600) * kSec);
}

TEST_CASE("fabric manager log: levels, tid, local time, continuation") {
  ParseOptions o;
  o.utc_offset_sec = 3600;
  auto r = parseAll(LogFormat::kFabricManager,
                    "[Mon Jan 01 2024 00:00:00] [INFO] [tid 1234] Fabric Manager version 535.104.05\n"
                    "[Mon Jan 01 2024 00:00:05] [ERROR] [tid 1240] NVSwitch fatal error detected\n"
                    "    partition 3 affected\n"
                    "[Mon Jan 01 2024 00:00:06] [WARNING] [tid 1240] link training failed\n",
                    o);
  REQUIRE(r.records.size() == 3);
  CHECK(r.records[0].time_ns == (1704067200LL - 3600) * kSec);
  CHECK(r.records[0].priority == 6);
  CHECK(r.records[0].ident == "nv-fabricmanager");
  CHECK(r.records[0].text == "Fabric Manager version 535.104.05");
  CHECK(r.records[1].priority == 3);
  CHECK(r.records[1].text == "NVSwitch fatal error detected\n    partition 3 affected");
  CHECK(r.records[2].priority == 4);
}

TEST_CASE("syslog: a bare PRI is malformed, not a crash") {
  auto r = parseAll(LogFormat::kSyslog, "<13>\nDec  2 11:38:27 h app: ok\n");
  REQUIRE(r.records.size() == 1);
  CHECK(r.report.malformed == 1);
}

#include <catch2/catch.hpp>

#include "common/job.h"
#include "common/parse/stream_parser.h"

using namespace faultline::common;

TEST_CASE("Fabric Manager stamps with and without a weekday", "[parse][fabricmanager]") {
  const char* log =
      "[May 16 2025 15:10:21] [INFO] [tid 30042] GPU probe request received from node Id 0 and module Id 7\n"
      "[Jun  1 2024 10:15:02] [ERROR] [tid 1842] detected NVSwitch fatal error 24007 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 2 port 30\n"
      "[Sat Jun 01 2024 10:15:03] [WARNING] [tid 1842] second form\n";
  CHECK(detectFormat(log) == LogFormat::kFabricManager);
  std::vector<LogRecord> out;
  ParseOptions o;
  o.utc_offset_sec = 7200;  // node clock two hours ahead of UTC
  auto p = makeStreamParser(LogFormat::kFabricManager, o, [&](LogRecord&& r) { out.push_back(std::move(r)); });
  p->feed(log);
  p->finish();
  REQUIRE(out.size() == 3);
  CHECK(formatTimeNs(out[0].time_ns) == "2025-05-16T13:10:21.000Z");
  CHECK(formatTimeNs(out[1].time_ns) == "2024-06-01T08:15:02.000Z");
  CHECK(out[1].priority == 3);
  CHECK(out[1].text.rfind("detected NVSwitch fatal error 24007", 0) == 0);
  CHECK(formatTimeNs(out[2].time_ns) == "2024-06-01T08:15:03.000Z");
  CHECK(p->report().skipped == 0);
}

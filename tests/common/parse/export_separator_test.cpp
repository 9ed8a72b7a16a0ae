#include <catch2/catch.hpp>

#include "common/parse/stream_parser.h"

using namespace faultline::common;

TEST_CASE("export entries that lost their blank separator are still split", "[parse][export]") {
  std::vector<LogRecord> out;
  auto p = makeStreamParser(LogFormat::kJournalExport, {}, [&](LogRecord&& r) { out.push_back(std::move(r)); });
  p->feed(
      "__CURSOR=s=1;i=1\n__REALTIME_TIMESTAMP=1717236000000000\n_HOSTNAME=n1\nMESSAGE=first\n"
      "__CURSOR=s=1;i=2\n__REALTIME_TIMESTAMP=1717236001000000\n_HOSTNAME=n1\nMESSAGE=second\n"
      "__REALTIME_TIMESTAMP=1717236002000000\nMESSAGE=third\n\n");
  p->finish();
  REQUIRE(out.size() == 3);
  CHECK(out[0].text == "first");
  CHECK(out[1].text == "second");
  CHECK(out[2].text == "third");
  CHECK(out[2].time_ns == 1717236002000000000LL);
  CHECK(p->report().records == 3);
  CHECK(p->report().skipped == 0);
}

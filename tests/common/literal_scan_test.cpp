// LiteralScanner::Stream: where its hits end and which trigger hits a stream reports. The one-byte
// triggers (ESC, '\') are found by memchr beside the Vectorscan search, so their offsets must count
// from the stream's start across feeds, like the database's hits, and come out sorted with them.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "common/parse/literal_scan.h"

using faultline::common::LiteralScanner;

namespace {

using Hit = std::pair<uint64_t, unsigned>;  // end, id

std::vector<Hit> scanIn(const std::shared_ptr<const LiteralScanner>& s, unsigned triggers,
                        const std::vector<std::string>& feeds) {
  LiteralScanner::Stream stream(s, triggers);
  REQUIRE(stream.ok());
  std::vector<uint64_t> raw;
  for (const auto& f : feeds) REQUIRE(stream.scan(f, &raw));
  stream.close(&raw);
  std::vector<Hit> out;
  for (uint64_t h : raw) out.emplace_back(LiteralScanner::Stream::hitEnd(h), LiteralScanner::Stream::hitId(h));
  return out;
}

}  // namespace

TEST_CASE("literal stream: trigger bytes and literals across feeds, offsets from the stream's start") {
  std::string error;
  auto s = LiteralScanner::build({"NVRM: Xid", "fallen off"}, &error);
  REQUIRE(s);
  const unsigned esc = 2, backslash = 3, json = 4;  // literalCount() + k
  // "ab\x1b[0mNVRM: Xid \\x0a" | "fallen off\x1b" | " \"MESSAGE\":[1]"
  const std::vector<std::string> feeds = {"ab\x1b[0mNVRM: X", "id \\x0afallen off\x1b", " \"MESSAGE\":[1]"};
  const std::string all = feeds[0] + feeds[1] + feeds[2];
  const auto endOf = [&](std::string_view what, size_t from = 0) { return all.find(what, from) + what.size(); };

  SECTION("every trigger (kmsg / journal JSON)") {
    const auto hits = scanIn(s, LiteralScanner::Stream::kBackslash | LiteralScanner::Stream::kJsonBytes, feeds);
    const std::vector<Hit> want = {
        {endOf("\x1b"), esc},           {endOf("NVRM: Xid"), 0},          {endOf("\\"), backslash},
        {endOf("fallen off"), 1},       {endOf("\x1b", endOf("\x1b")), esc}, {endOf("\"MESSAGE\":["), json},
    };
    CHECK(hits == want);
  }
  SECTION("ESC only (the other formats)") {
    const auto hits = scanIn(s, 0, feeds);
    const std::vector<Hit> want = {
        {endOf("\x1b"), esc}, {endOf("NVRM: Xid"), 0}, {endOf("fallen off"), 1}, {endOf("\x1b", endOf("\x1b")), esc}};
    CHECK(hits == want);
  }
  SECTION("the same bytes in one feed") {
    CHECK(scanIn(s, LiteralScanner::Stream::kBackslash, {all}) ==
          scanIn(s, LiteralScanner::Stream::kBackslash, feeds));
  }
  SECTION("a record's own search sees no triggers") {
    std::vector<int> ids;
    REQUIRE(s->literalsIn(all, &ids));
    CHECK(ids == std::vector<int>{0, 1});
  }
}

// Golden tests: every tests/fixtures/parse/<format>.<case>.log is detected as <format>, parsed,
// and rendered one record per line; the result must equal <format>.<case>.expected.
// Run with FAULTLINE_UPDATE_GOLDEN=1 to rewrite the .expected files (then review the diff).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "parse_test_util.h"

using namespace faultline::common;
using namespace faultline::common::testing;
namespace fs = std::filesystem;

namespace {

std::string readFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string render(const ParseResult& r) {
  std::ostringstream o;
  for (const auto& rec : r.records) {
    o << "L" << rec.line << " t=" << (rec.time_known ? std::to_string(rec.time_ns) : "-")
      << " m=" << rec.monotonic_ns << " host=" << rec.host << " ident=" << rec.ident
      << " rank=" << rec.rank << " prio=" << rec.priority << " boot=" << rec.boot_id << " | "
      << escape(rec.text) << "\n";
  }
  const auto& rep = r.report;
  o << "# format=" << formatName(rep.format) << " lines=" << rep.lines
    << " records=" << rep.records << " skipped=" << rep.skipped << " malformed=" << rep.malformed
    << " binary=" << rep.binary << " oversized=" << rep.oversized
    << " truncated=" << rep.truncated << "\n";
  for (const auto& n : rep.notes) o << "# note " << n << "\n";
  return o.str();
}

LogFormat formatFromName(std::string_view name) {
  for (int i = 0; i <= static_cast<int>(LogFormat::kApplication); ++i) {
    if (formatName(static_cast<LogFormat>(i)) == name) return static_cast<LogFormat>(i);
  }
  return LogFormat::kUnknown;
}

}  // namespace

TEST_CASE("golden fixtures") {
  const fs::path dir = fs::path(FAULTLINE_SOURCE_DIR) / "tests/fixtures/parse";
  const bool update = std::getenv("FAULTLINE_UPDATE_GOLDEN") != nullptr;
  int cases = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".log") continue;
    const std::string stem = entry.path().stem().string();
    const LogFormat format = formatFromName(stem.substr(0, stem.find('.')));
    SECTION(stem) {
      REQUIRE(format != LogFormat::kUnknown);
      const std::string input = readFile(entry.path());
      CHECK(detectFormat(input) == format);
      ParseOptions o;
      o.default_year = 2024;
      o.boot_time_ns = 1717227188LL * kSec;
      o.boot_id = "fixture-boot";
      const std::string whole = render(parseAll(format, input, o));
      // Chunking must never change the result.
      CHECK(render(parseAll(format, input, o, 7)) == whole);
      const fs::path expected_path = fs::path(entry.path()).replace_extension(".expected");
      if (update) {
        std::ofstream(expected_path, std::ios::binary) << whole;
      } else {
        CHECK(whole == readFile(expected_path));
      }
    }
    ++cases;
  }
  CHECK(cases >= 10);
}

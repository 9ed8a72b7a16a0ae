// Local wall-clock time to UTC through fixed offsets, POSIX TZ rules and real TZif files.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "common/job.h"
#include "common/time_zone.h"

using faultline::common::TimeZone;
using faultline::common::parseTimestampNs;

namespace {

constexpr int64_t kSec = 1'000'000'000;

// Local wall time "YYYY-MM-DD HH:MM:SS" read as if UTC.
int64_t wall(const char* s) { return *parseTimestampNs(s); }

std::optional<TimeZone> zoneFile(const std::string& name) {
  std::ifstream in("/usr/share/zoneinfo/" + name, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string error;
  auto z = TimeZone::fromTzif(ss.str(), name, &error);
  INFO(error);
  REQUIRE(z);
  return z;
}

}  // namespace

TEST_CASE("a fixed offset converts both ways and renders as +hh:mm", "[time_zone]") {
  auto z = TimeZone::fixed(2 * 3600);
  CHECK(z.name() == "+02:00");
  CHECK(z.utcFromLocal(wall("2024-06-01 12:00:00")) == wall("2024-06-01 10:00:00"));
  CHECK(z.offsetAtUtc(0) == 7200);
  CHECK(TimeZone::formatOffset(-(5 * 3600 + 1800)) == "-05:30");
}

TEST_CASE("POSIX TZ rules place daylight saving on the right days", "[time_zone]") {
  auto berlin = TimeZone::fromPosix("CET-1CEST,M3.5.0,M10.5.0/3");
  REQUIRE(berlin);
  // 2024: CEST from 31 March 01:00 UTC to 27 October 01:00 UTC.
  CHECK(berlin->offsetAtUtc(wall("2024-03-31 00:59:59")) == 3600);
  CHECK(berlin->offsetAtUtc(wall("2024-03-31 01:00:00")) == 7200);
  CHECK(berlin->offsetAtUtc(wall("2024-10-27 00:59:59")) == 7200);
  CHECK(berlin->offsetAtUtc(wall("2024-10-27 01:00:00")) == 3600);
  CHECK(berlin->utcFromLocal(wall("2024-07-01 12:00:00")) == wall("2024-07-01 10:00:00"));
  CHECK(berlin->utcFromLocal(wall("2024-01-15 12:00:00")) == wall("2024-01-15 11:00:00"));
  // 02:30 on 27 October happens twice: the first (CEST) occurrence is taken.
  CHECK(berlin->utcFromLocal(wall("2024-10-27 02:30:00")) == wall("2024-10-27 00:30:00"));
  // 02:30 on 31 March does not exist: read with the offset before the gap.
  CHECK(berlin->utcFromLocal(wall("2024-03-31 02:30:00")) == wall("2024-03-31 01:30:00"));

  // Southern hemisphere: DST spans New Year.
  auto sydney = TimeZone::fromPosix("AEST-10AEDT,M10.1.0,M4.1.0/3");
  REQUIRE(sydney);
  CHECK(sydney->offsetAtUtc(wall("2024-01-10 00:00:00")) == 11 * 3600);
  CHECK(sydney->offsetAtUtc(wall("2024-07-10 00:00:00")) == 10 * 3600);

  auto ny = TimeZone::fromPosix("EST5EDT,M3.2.0,M11.1.0");
  REQUIRE(ny);
  CHECK(ny->utcFromLocal(wall("2024-06-01 08:00:00")) == wall("2024-06-01 12:00:00"));
  CHECK(ny->utcFromLocal(wall("2024-12-01 08:00:00")) == wall("2024-12-01 13:00:00"));

  auto kolkata = TimeZone::fromPosix("IST-5:30");
  REQUIRE(kolkata);
  CHECK(kolkata->offsetAtUtc(0) == 5 * 3600 + 1800);
  CHECK(TimeZone::fromPosix("<+08>-8")->offsetAtUtc(0) == 8 * 3600);
  CHECK_FALSE(TimeZone::fromPosix(""));
  CHECK_FALSE(TimeZone::fromPosix("CET-1CEST,M13.5.0,M10.5.0"));
  CHECK_FALSE(TimeZone::fromPosix("X1"));
}

TEST_CASE("TZif files from the tz database give each date its offset", "[time_zone]") {
  auto berlin = zoneFile("Europe/Berlin");
  if (!berlin) {
    WARN("no /usr/share/zoneinfo (tzdata): skipped");
    return;
  }
  CHECK(berlin->utcFromLocal(wall("2024-06-01 12:00:00")) == wall("2024-06-01 10:00:00"));
  CHECK(berlin->utcFromLocal(wall("2024-12-01 12:00:00")) == wall("2024-12-01 11:00:00"));
  // Far beyond the last listed transition the footer's rule applies.
  CHECK(berlin->utcFromLocal(wall("2050-07-01 12:00:00")) == wall("2050-07-01 10:00:00"));
  // History: Berlin had no DST in 1960. (1960-07-01 12:00:00 UTC as epoch seconds: parseTimestampNs
  // takes job times only from 1970 on.)
  CHECK(berlin->offsetAtUtc(-299851200LL * 1'000'000'000) == 3600);
  auto la = zoneFile("America/Los_Angeles");
  REQUIRE(la);
  CHECK(la->utcFromLocal(wall("2023-08-01 05:00:00")) == wall("2023-08-01 12:00:00"));
  CHECK(la->utcFromLocal(wall("2023-02-01 05:00:00")) == wall("2023-02-01 13:00:00"));
  auto utc = zoneFile("UTC");
  REQUIRE(utc);
  CHECK(utc->offsetAtUtc(wall("2024-06-01 12:00:00")) == 0);
}

TEST_CASE("bad TZif bytes are an error, never a crash", "[time_zone]") {
  std::string error;
  CHECK_FALSE(TimeZone::fromTzif("", "x", &error));
  CHECK(error == "not a TZif file");
  std::string header = "TZif2";
  header.resize(44, '\0');
  header[43] = 1;  // one char, no types
  CHECK_FALSE(TimeZone::fromTzif(header, "x", &error));
  // A real file cut anywhere fails cleanly or parses.
  std::ifstream in("/usr/share/zoneinfo/Europe/Berlin", std::ios::binary);
  if (!in) return;
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string full = ss.str();
  for (size_t cut = 0; cut < full.size(); cut += 7) {
    auto z = TimeZone::fromTzif(std::string_view(full).substr(0, cut), "x", &error);
    if (z) (void)z->utcFromLocal(wall("2024-06-01 12:00:00"));
  }
}

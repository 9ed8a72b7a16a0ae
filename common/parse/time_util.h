// Calendar and timestamp helpers for the stream parsers. Pure, allocation-free, no clock, no TZ
// database: local times are turned into UTC with the caller's fixed offset.
#pragma once

#include <cstdint>
#include <string_view>

namespace faultline::common::parse {

inline constexpr int64_t kNsPerSec = 1'000'000'000;

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
int64_t daysFromCivil(int year, int month, int day);

// Years a stamp read from a line may name: 1970 (the epoch: the wire refuses earlier times) to
// 2261 (int64 nanoseconds end in April 2262). A "stamp" outside is not one: civilToNs would
// overflow (found by tests/fuzz).
inline constexpr int kMinStampYear = 1970;
inline constexpr int kMaxStampYear = 2261;
inline bool stampYear(int year) { return year >= kMinStampYear && year <= kMaxStampYear; }

// UTC ns of a broken-down time; no range checks beyond what the parsers already did (stampYear).
int64_t civilToNs(int year, int month, int day, int hour, int minute, int second, int64_t frac_ns);

// 1..12 for "Jan".."Dec" (exact case), else 0.
int monthFromAbbrev(std::string_view s);
// True for "Mon".."Sun".
bool isWeekdayAbbrev(std::string_view s);

// Reads exactly n ASCII digits at s[pos..]; -1 when any is missing or not a digit.
int readFixedDigits(std::string_view s, size_t pos, size_t n);

// Result of parsing an ISO-8601 / RFC-3339 stamp at the start of a string.
struct IsoTime {
  int64_t ns = 0;         // UTC ns when has_zone, else the wall-clock time read as if UTC
  bool has_zone = false;  // "Z", "+hh:mm", "+hhmm" or "+hh" present
  size_t length = 0;      // bytes consumed
  char frac_sep = 0;      // '.' or ',' when a fraction was present
  char date_time_sep = 0; // 'T' or ' '
};

// Parses "YYYY-MM-DD[T ]HH:MM:SS[.,fraction][zone]" at the start of s. A space separator is
// accepted only when allow_space is set. Returns false (out untouched) when s does not start so.
bool parseIsoTime(std::string_view s, bool allow_space, IsoTime* out);

}  // namespace faultline::common::parse

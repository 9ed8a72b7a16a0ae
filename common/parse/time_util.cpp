#include "common/parse/time_util.h"

#include <algorithm>
#include <cstring>

namespace faultline::common::parse {

int64_t daysFromCivil(int year, int month, int day) {
  const int64_t y = static_cast<int64_t>(year) - (month <= 2 ? 1 : 0);
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t mp = (month + 9) % 12;
  const int64_t doy = (153 * mp + 2) / 5 + day - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int64_t civilToNs(int year, int month, int day, int hour, int minute, int second,
                  int64_t frac_ns) {
  const int64_t secs = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return secs * kNsPerSec + frac_ns;
}

int monthFromAbbrev(std::string_view s) {
  static constexpr std::string_view kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (s.size() != 3) return 0;
  for (int i = 0; i < 12; ++i) {
    if (s == kMonths[i]) return i + 1;
  }
  return 0;
}

bool isWeekdayAbbrev(std::string_view s) {
  static constexpr std::string_view kDays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
  if (s.size() != 3) return false;
  for (auto d : kDays) {
    if (s == d) return true;
  }
  return false;
}

int readFixedDigits(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = pos; i < pos + n; ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

namespace {
// Two ASCII digits at p as 0..99, else -1 (the caller checked that both bytes are there).
inline int twoDigits(const char* p) {
  const unsigned a = static_cast<unsigned char>(p[0]) - unsigned{'0'};
  const unsigned b = static_cast<unsigned char>(p[1]) - unsigned{'0'};
  return a > 9 || b > 9 ? -1 : static_cast<int>(a * 10 + b);
}
inline bool isDigitByte(char c) { return static_cast<unsigned char>(c) - unsigned{'0'} <= 9; }
inline bool digitAt(std::string_view s, size_t i) { return i < s.size() && isDigitByte(s[i]); }
constexpr int64_t kPow10[10] = {1, 10, 100, 1'000, 10'000, 100'000, 1'000'000, 10'000'000, 100'000'000, 1'000'000'000};
// The last "YYYY-MM-DDTHH:MM:SS" parseIsoTime read on this thread and its seconds since the epoch.
struct SecondsMemo {
  char key[19] = {};
  bool valid = false;
  int64_t secs = 0;
};
thread_local SecondsMemo seconds_memo;
}  // namespace

// Every journal and ISO syslog line goes through here, and consecutive lines mostly share their
// second: the seconds of the last one read are kept with its 19 bytes (a memo only: the answer
// is the same either way). Otherwise the fields are read in place, two digits at a time.
bool parseIsoTime(std::string_view s, bool allow_space, IsoTime* out) {
  // YYYY-MM-DDTHH:MM:SS is 19 bytes.
  if (s.size() < 19 || s[4] != '-' || s[7] != '-' || s[13] != ':' || s[16] != ':') return false;
  const char sep = s[10];
  if (sep != 'T' && !(allow_space && sep == ' ')) return false;
  const char* p = s.data();
  SecondsMemo& memo = seconds_memo;
  if (!memo.valid || std::memcmp(memo.key, p, sizeof memo.key) != 0) {
    const int century = twoDigits(p), yy = twoDigits(p + 2);
    const int year = century < 0 || yy < 0 ? -1 : century * 100 + yy;
    const int month = twoDigits(p + 5);
    const int day = twoDigits(p + 8);
    const int hour = twoDigits(p + 11);
    const int minute = twoDigits(p + 14);
    const int second = twoDigits(p + 17);
    if (!stampYear(year) || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
        minute < 0 || minute > 59 || second < 0 || second > 60) {
      return false;
    }
    std::memcpy(memo.key, p, sizeof memo.key);
    memo.secs = daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
    memo.valid = true;
  }
  size_t pos = 19;
  int64_t frac_ns = 0;
  char frac_sep = 0;
  if (pos < s.size() && (s[pos] == '.' || s[pos] == ',') && digitAt(s, pos + 1)) {
    frac_sep = s[pos];
    ++pos;
    const size_t first = pos, cap = std::min(s.size(), pos + 9);  // nanoseconds: 9 digits count
    for (; pos < cap && isDigitByte(p[pos]); ++pos) frac_ns = frac_ns * 10 + (p[pos] - '0');
    const size_t digits = pos - first;
    while (digitAt(s, pos)) ++pos;
    if (digits < 9) frac_ns *= kPow10[9 - digits];
  }
  bool has_zone = false;
  int64_t offset_sec = 0;
  if (pos < s.size()) {
    if (s[pos] == 'Z') {
      has_zone = true;
      ++pos;
    } else if (s[pos] == '+' || s[pos] == '-') {
      const int sign = s[pos] == '-' ? -1 : 1;
      const int hh = pos + 3 <= s.size() ? twoDigits(p + pos + 1) : -1;
      if (hh >= 0 && hh <= 23) {
        size_t end = pos + 3;
        int mm = 0;
        if (end < s.size() && s[end] == ':') {
          mm = end + 3 <= s.size() ? twoDigits(p + end + 1) : -1;
          end += 3;
        } else if (end + 2 <= s.size() && twoDigits(p + end) >= 0) {
          mm = twoDigits(p + end);
          end += 2;
        }
        if (mm >= 0 && mm <= 59) {
          has_zone = true;
          offset_sec = sign * (hh * 3600 + mm * 60);
          pos = end;
        }
      }
    }
  }
  out->ns = memo.secs * kNsPerSec + frac_ns - offset_sec * kNsPerSec;  // civilToNs(...) - offset
  out->has_zone = has_zone;
  out->length = pos;
  out->frac_sep = frac_sep;
  out->date_time_sep = sep;
  return true;
}

}  // namespace faultline::common::parse

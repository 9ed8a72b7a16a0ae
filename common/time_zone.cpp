#include "common/time_zone.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace faultline::common {
namespace {

constexpr int64_t kNsPerSec = 1'000'000'000;
constexpr int64_t kSecPerDay = 86400;

int64_t daysFromCivil(int64_t y, int m, int d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int64_t yearOfDays(int64_t z) {
  z += 719468;
  const int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const int64_t doe = z - era * 146097;
  const int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const int64_t mp = (5 * doy + 2) / 153;
  const int64_t m = mp < 10 ? mp + 3 : mp - 9;
  return yoe + era * 400 + (m <= 2);
}

bool isLeap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

int monthLength(int64_t y, int m) {
  static constexpr int kLen[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return m == 2 && isLeap(y) ? 29 : kLen[m - 1];
}

int64_t floorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Big-endian readers over a bounded view.
struct Cursor {
  std::string_view s;
  size_t pos = 0;
  bool ok = true;
  bool need(size_t n) {
    if (!ok || s.size() - pos < n) ok = false;
    return ok;
  }
  int64_t be(size_t n) {
    if (!need(n)) return 0;
    uint64_t v = 0;
    for (size_t i = 0; i < n; ++i) v = (v << 8) | static_cast<unsigned char>(s[pos + i]);
    pos += n;
    if (n == 4) return static_cast<int32_t>(static_cast<uint32_t>(v));
    return static_cast<int64_t>(v);
  }
  void skip(size_t n) {
    if (need(n)) pos += n;
  }
};

struct Counts {
  uint32_t isut = 0, isstd = 0, leap = 0, time = 0, type = 0, chars = 0;
};

bool readHeader(Cursor& c, char* version, Counts* n) {
  if (!c.need(44) || c.s.compare(c.pos, 4, "TZif") != 0) return false;
  *version = c.s[c.pos + 4];
  c.skip(20);
  n->isut = static_cast<uint32_t>(c.be(4));
  n->isstd = static_cast<uint32_t>(c.be(4));
  n->leap = static_cast<uint32_t>(c.be(4));
  n->time = static_cast<uint32_t>(c.be(4));
  n->type = static_cast<uint32_t>(c.be(4));
  n->chars = static_cast<uint32_t>(c.be(4));
  return c.ok;
}

// Parses "[+-]hh[:mm[:ss]]" at *p; returns seconds (sign as written).
bool posixTime(std::string_view s, size_t* p, int* out) {
  size_t i = *p;
  int sign = 1;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) sign = s[i++] == '-' ? -1 : 1;
  int parts[3] = {0, 0, 0};
  for (int k = 0; k < 3; ++k) {
    if (k > 0) {
      if (i >= s.size() || s[i] != ':') break;
      ++i;
    }
    const size_t start = i;
    int v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + (s[i++] - '0');
    if (i == start) return false;
    parts[k] = v;
  }
  if (parts[0] > 167 || parts[1] > 59 || parts[2] > 59) return false;
  *out = sign * (parts[0] * 3600 + parts[1] * 60 + parts[2]);
  *p = i;
  return true;
}

bool posixName(std::string_view s, size_t* p) {
  size_t i = *p;
  if (i < s.size() && s[i] == '<') {
    const size_t close = s.find('>', i);
    if (close == std::string_view::npos || close - i < 4) return false;
    *p = close + 1;
    return true;
  }
  const size_t start = i;
  while (i < s.size() && ((s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z'))) ++i;
  if (i - start < 3) return false;
  *p = i;
  return true;
}

}  // namespace

std::string TimeZone::formatOffset(int offset_sec) {
  const char sign = offset_sec < 0 ? '-' : '+';
  const int a = std::abs(offset_sec);
  char buf[16];
  if (a % 60 != 0)
    std::snprintf(buf, sizeof buf, "%c%02d:%02d:%02d", sign, a / 3600, a / 60 % 60, a % 60);
  else
    std::snprintf(buf, sizeof buf, "%c%02d:%02d", sign, a / 3600, a / 60 % 60);
  return buf;
}

TimeZone TimeZone::fixed(int offset_sec, std::string name) {
  TimeZone z;
  z.initial_offset_ = offset_sec;
  z.name_ = name.empty() ? formatOffset(offset_sec) : std::move(name);
  return z;
}

std::optional<TimeZone::PosixRule> TimeZone::parsePosix(std::string_view s) {
  PosixRule r;
  size_t i = 0;
  int west = 0;
  if (!posixName(s, &i) || !posixTime(s, &i, &west)) return std::nullopt;
  r.std_offset = -west;
  r.dst_offset = r.std_offset;
  if (i == s.size()) return r;
  if (!posixName(s, &i)) return std::nullopt;
  r.has_dst = true;
  r.dst_offset = r.std_offset + 3600;
  if (i < s.size() && s[i] != ',') {
    if (!posixTime(s, &i, &west)) return std::nullopt;
    r.dst_offset = -west;
  }
  // Without explicit rules POSIX leaves the dates to the implementation; use the US rules
  // (M3.2.0,M11.1.0) as glibc does.
  r.start = {'M', 3, 2, 0, 0, 7200};
  r.end = {'M', 11, 1, 0, 0, 7200};
  if (i == s.size()) return r;
  auto when = [&](PosixRule::When* w) {
    if (i >= s.size() || s[i] != ',') return false;
    ++i;
    auto number = [&](int* out) {
      const size_t start = i;
      int v = 0;
      while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) v = v * 10 + (s[i++] - '0');
      *out = v;
      return i > start;
    };
    if (i < s.size() && s[i] == 'M') {
      ++i;
      w->kind = 'M';
      if (!number(&w->month) || i >= s.size() || s[i++] != '.' || !number(&w->week) || i >= s.size() ||
          s[i++] != '.' || !number(&w->day))
        return false;
      if (w->month < 1 || w->month > 12 || w->week < 1 || w->week > 5 || w->day > 6) return false;
    } else if (i < s.size() && s[i] == 'J') {
      ++i;
      w->kind = 'J';
      if (!number(&w->yday) || w->yday < 1 || w->yday > 365) return false;
    } else {
      w->kind = 'N';
      if (!number(&w->yday) || w->yday > 365) return false;
    }
    w->time_sec = 7200;
    if (i < s.size() && s[i] == '/') {
      ++i;
      if (!posixTime(s, &i, &w->time_sec)) return false;
    }
    return true;
  };
  if (!when(&r.start) || !when(&r.end) || i != s.size()) return std::nullopt;
  return r;
}

int TimeZone::PosixRule::offsetAt(int64_t utc_sec) const {
  if (!has_dst) return std_offset;
  // The rule's year is the year of the local standard time.
  auto dayOf = [](const When& w, int64_t year) -> int64_t {
    switch (w.kind) {
      case 'J': {
        int64_t d = w.yday - 1;
        if (isLeap(year) && w.yday >= 60) ++d;
        return daysFromCivil(year, 1, 1) + d;
      }
      case 'N':
        return daysFromCivil(year, 1, 1) + w.yday;
      default: {
        const int64_t first = daysFromCivil(year, w.month, 1);
        const int64_t dow_first = ((first % 7) + 11) % 7;  // 1970-01-01 was a Thursday (4)
        int64_t mday = 1 + ((w.day - dow_first) % 7 + 7) % 7 + (w.week - 1) * 7;
        while (mday > monthLength(year, w.month)) mday -= 7;
        return first + mday - 1;
      }
    }
  };
  const int64_t year = yearOfDays(floorDiv(utc_sec + std_offset, kSecPerDay));
  // DST runs from start (given in standard time) to end (given in DST).
  const int64_t on = dayOf(start, year) * kSecPerDay + start.time_sec - std_offset;
  const int64_t off = dayOf(end, year) * kSecPerDay + end.time_sec - dst_offset;
  const bool in_dst = on < off ? (utc_sec >= on && utc_sec < off) : !(utc_sec >= off && utc_sec < on);
  return in_dst ? dst_offset : std_offset;
}

std::optional<TimeZone> TimeZone::fromPosix(std::string_view tz, std::string name) {
  auto rule = parsePosix(tz);
  if (!rule) return std::nullopt;
  TimeZone z;
  z.name_ = name.empty() ? std::string(tz) : std::move(name);
  z.initial_offset_ = rule->std_offset;
  if (rule->has_dst) z.rule_ = rule;
  return z;
}

std::optional<TimeZone> TimeZone::fromTzif(std::string_view bytes, std::string name, std::string* error) {
  Cursor c{bytes};
  char version = 0;
  Counts n;
  if (!readHeader(c, &version, &n)) {
    *error = "not a TZif file";
    return std::nullopt;
  }
  // Version 1 data uses 32-bit times; files of version 2+ repeat everything with 64-bit times
  // after it, followed by the POSIX TZ footer.
  size_t time_size = 4;
  if (version >= '2') {
    c.skip(n.time * 5 + n.type * 6 + n.chars + n.leap * 8 + n.isstd + n.isut);
    if (!readHeader(c, &version, &n)) {
      *error = "truncated TZif file (second header)";
      return std::nullopt;
    }
    time_size = 8;
  }
  if (n.type == 0 || n.type > 256 || n.time > 100000 || n.chars > 100000 || n.leap > 100000) {
    *error = "TZif counts out of range";
    return std::nullopt;
  }
  std::vector<int64_t> times(n.time);
  for (auto& t : times) t = c.be(time_size);
  std::vector<uint8_t> idx(n.time);
  for (auto& k : idx) k = static_cast<uint8_t>(c.be(1));
  std::vector<int> type_offset(n.type);
  std::vector<bool> type_dst(n.type);
  for (uint32_t k = 0; k < n.type; ++k) {
    type_offset[k] = static_cast<int>(c.be(4));
    type_dst[k] = c.be(1) != 0;
    c.skip(1);
  }
  c.skip(n.chars + n.leap * (time_size + 4) + n.isstd + n.isut);
  if (!c.ok) {
    *error = "truncated TZif file";
    return std::nullopt;
  }
  TimeZone z;
  z.name_ = std::move(name);
  z.initial_offset_ = type_offset[0];
  for (uint32_t k = 0; k < n.time; ++k) {
    if (idx[k] >= n.type || (k > 0 && times[k] <= times[k - 1])) {
      *error = "TZif transitions out of order or with a bad type";
      return std::nullopt;
    }
    z.transitions_.push_back(times[k]);
    z.offsets_.push_back(type_offset[idx[k]]);
  }
  if (time_size == 8 && c.pos < bytes.size() && bytes[c.pos] == '\n') {
    const size_t end = bytes.find('\n', c.pos + 1);
    if (end != std::string_view::npos && end > c.pos + 1) {
      auto rule = parsePosix(bytes.substr(c.pos + 1, end - c.pos - 1));
      // A footer without DST still fixes the offset after the last transition.
      if (rule && z.transitions_.empty() && !rule->has_dst) z.initial_offset_ = rule->std_offset;
      else if (rule) z.rule_ = rule;
    }
  }
  return z;
}

int TimeZone::offsetAtUtc(int64_t utc_ns) const {
  const int64_t sec = floorDiv(utc_ns, kNsPerSec);
  if (!transitions_.empty() && sec >= transitions_.front()) {
    if (sec >= transitions_.back() && rule_) return rule_->offsetAt(sec);
    auto it = std::upper_bound(transitions_.begin(), transitions_.end(), sec);
    return offsets_[static_cast<size_t>(it - transitions_.begin()) - 1];
  }
  if (transitions_.empty() && rule_) return rule_->offsetAt(sec);
  return initial_offset_;
}

int64_t TimeZone::utcFromLocal(int64_t local_ns) const {
  if (isFixed()) return local_ns - int64_t{initial_offset_} * kNsPerSec;
  // The offsets a day either side bound every candidate (no zone changes twice within a day).
  const int before = offsetAtUtc(local_ns - kSecPerDay * kNsPerSec);
  const int after = offsetAtUtc(local_ns + kSecPerDay * kNsPerSec);
  for (int cand : {before, after})
    if (offsetAtUtc(local_ns - int64_t{cand} * kNsPerSec) == cand) return local_ns - int64_t{cand} * kNsPerSec;
  return local_ns - int64_t{before} * kNsPerSec;
}

}  // namespace faultline::common

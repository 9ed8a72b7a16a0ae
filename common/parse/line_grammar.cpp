#include "common/parse/line_grammar.h"

#include "common/parse/text_util.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

constexpr std::string_view kFacilities[] = {
    "kern",   "user",   "mail",   "daemon", "auth",   "syslog", "lpr",    "news",
    "uucp",   "cron",   "authpriv", "ftp",  "res0",   "res1",   "res2",   "res3",
    "local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7"};
constexpr std::string_view kLevels[] = {"emerg",  "alert", "crit", "err",
                                        "warn",   "notice", "info", "debug"};

// Reads "name<spaces>:" at s[*pos]; returns the name.
std::string_view readPaddedName(std::string_view s, size_t* pos) {
  size_t i = *pos;
  const size_t start = i;
  while (i < s.size() && s[i] >= 'a' && s[i] <= 'z') ++i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  const std::string_view name = s.substr(start, i - start);
  while (i < s.size() && s[i] == ' ') ++i;
  if (i >= s.size() || s[i] != ':' || name.empty()) return {};
  *pos = i + 1;
  return name;
}

// "HH:MM:SS" at s[pos]; returns seconds of day or -1.
int readClock(std::string_view s, size_t pos) {
  if (pos + 8 > s.size() || s[pos + 2] != ':' || s[pos + 5] != ':') return -1;
  const int h = readFixedDigits(s, pos, 2);
  const int m = readFixedDigits(s, pos + 3, 2);
  const int sec = readFixedDigits(s, pos + 6, 2);
  if (h < 0 || h > 23 || m < 0 || m > 59 || sec < 0 || sec > 60) return -1;
  return h * 3600 + m * 60 + sec;
}

// "host ident[pid]: msg" (the part after the stamp and its space).
bool parseHostIdentMsg(std::string_view rest, SyslogLine* out) {
  const size_t sp = rest.find(' ');
  if (sp == 0 || rest.empty()) return false;
  out->host = rest.substr(0, sp == std::string_view::npos ? rest.size() : sp);
  if (sp == std::string_view::npos) {
    out->ident = {};
    out->msg = {};
    return true;
  }
  std::string_view tail = rest.substr(sp + 1);
  // ident: up to '[' or ':'; must not contain a space.
  size_t i = 0;
  while (i < tail.size() && tail[i] != ':' && tail[i] != '[' && tail[i] != ' ') ++i;
  size_t after = std::string_view::npos;
  if (i > 0 && i < tail.size()) {
    if (tail[i] == ':') {
      after = i + 1;
    } else if (tail[i] == '[') {
      const size_t close = tail.find(']', i);
      if (close != std::string_view::npos && close + 1 < tail.size() && tail[close + 1] == ':') {
        after = close + 2;
      }
    }
  }
  if (after == std::string_view::npos) {
    out->ident = {};
    out->msg = tail;
    return true;
  }
  out->ident = tail.substr(0, i);
  std::string_view msg = tail.substr(std::min(after, tail.size()));
  if (!msg.empty() && msg.front() == ' ') msg.remove_prefix(1);
  out->msg = msg;
  return true;
}

}  // namespace

bool parseDecodePrefix(std::string_view line, DecodePrefix* out) {
  // Shortest is "kern:err: ", longest "authpriv:notice: ". Cheap reject first.
  if (line.size() < 10 || line[0] < 'a' || line[0] > 'z') return false;
  size_t pos = 0;
  const std::string_view fac = readPaddedName(line, &pos);
  if (fac.empty()) return false;
  const std::string_view lvl = readPaddedName(line, &pos);
  if (lvl.empty()) return false;
  int f = -1;
  for (int i = 0; i < 24; ++i) {
    if (fac == kFacilities[i]) f = i;
  }
  int l = -1;
  for (int i = 0; i < 8; ++i) {
    if (lvl == kLevels[i]) l = i;
  }
  if (f < 0 || l < 0) return false;
  if (pos < line.size() && line[pos] == ' ') ++pos;
  out->facility = f;
  out->level = l;
  out->length = pos;
  return true;
}

bool parseBracketMonotonic(std::string_view s, int64_t* mono_ns, size_t* length) {
  if (s.size() < 4 || s[0] != '[') return false;
  size_t i = 1;
  while (i < s.size() && s[i] == ' ') ++i;
  uint64_t secs = 0;
  if (!readUint(s, &i, &secs) || secs > kMaxStampSeconds) return false;
  if (i >= s.size() || s[i] != '.') return false;
  ++i;
  int64_t frac = 0;
  int digits = 0;
  while (i < s.size() && isDigit(s[i])) {
    if (digits < 9) {
      frac = frac * 10 + (s[i] - '0');
      ++digits;
    }
    ++i;
  }
  if (digits == 0 || i >= s.size() || s[i] != ']') return false;
  for (; digits < 9; ++digits) frac *= 10;
  *mono_ns = static_cast<int64_t>(secs) * kNsPerSec + frac;
  *length = i + 1;
  return true;
}

bool parsePrintkUptime(std::string_view s, int64_t* mono_ns, size_t* length) {
  size_t len = 0;
  if (!parseBracketMonotonic(s, mono_ns, &len) || len < 9 || s[len - 8] != '.') return false;
  *length = len;
  return true;
}

size_t printkCallerLength(std::string_view s) {
  // The kernel pads the id to 6 ("[%6s]"); util-linux dmesg pads to the widest pid it can name.
  constexpr size_t kMaxLength = 24;
  if (s.size() < 4 || s[0] != '[') return 0;
  size_t i = 1;
  while (i < s.size() && i < kMaxLength && s[i] == ' ') ++i;
  if (i >= s.size() || (s[i] != 'T' && s[i] != 'C')) return 0;
  const size_t digits = ++i;
  while (i < s.size() && i < kMaxLength && isDigit(s[i])) ++i;
  if (i == digits || i >= s.size() || s[i] != ']') return 0;
  return i + 1;
}

bool parseBracketWallStamp(std::string_view s, WallStamp* out) {
  if (s.size() < 21 || s[0] != '[' || !isDigit(s[1])) return false;
  IsoTime t;
  if (!parseIsoTime(s.substr(1), /*allow_space=*/true, &t)) return false;
  const size_t close = 1 + t.length;
  if (close >= s.size() || s[close] != ']') return false;
  out->ns = t.ns;
  out->has_zone = t.has_zone;
  out->length = close + 1;
  return true;
}

bool parseDmesgCtime(std::string_view s, int64_t* wall_ns, size_t* length) {
  // "[Fri Aug 30 11:43:09 2024]" (day space-padded: "Aug  3").
  if (s.size() < 26 || s[0] != '[' || s[4] != ' ' || s[8] != ' ' || s[11] != ' ' ||
      s[20] != ' ' || s[25] != ']') {
    return false;
  }
  if (!isWeekdayAbbrev(s.substr(1, 3))) return false;
  const int month = monthFromAbbrev(s.substr(5, 3));
  const int day = s[9] == ' ' ? readFixedDigits(s, 10, 1) : readFixedDigits(s, 9, 2);
  const int tod = readClock(s, 12);
  const int year = readFixedDigits(s, 21, 4);
  if (month == 0 || day < 1 || day > 31 || tod < 0 || !stampYear(year)) return false;
  *wall_ns = civilToNs(year, month, day, 0, 0, 0, 0) + int64_t{tod} * kNsPerSec;
  *length = 26;
  return true;
}

bool parseDmesgHumanStamp(std::string_view s, int year, int64_t* wall_ns, size_t* length) {
  // util-linux prints strftime "%b%d %H:%M" in brackets: "[May19 19:57]".
  if (s.size() < 13 || s[0] != '[' || s[6] != ' ' || s[9] != ':' || s[12] != ']') return false;
  const int month = monthFromAbbrev(s.substr(1, 3));
  const int day = readFixedDigits(s, 4, 2);
  const int h = readFixedDigits(s, 7, 2);
  const int m = readFixedDigits(s, 10, 2);
  if (month == 0 || day < 1 || day > 31 || h < 0 || h > 23 || m < 0 || m > 59) return false;
  *wall_ns = civilToNs(year, month, day, h, m, 0, 0);
  *length = 13;
  return true;
}

bool parseDmesgDelta(std::string_view s, int64_t* delta_ns, size_t* length) {
  // "[%+5ld.%06ld]": "[  +0.000127]", "[ +12.500000]".
  if (s.size() < 11 || s[0] != '[') return false;
  size_t i = 1;
  while (i < s.size() && s[i] == ' ') ++i;
  if (i >= s.size() || (s[i] != '+' && s[i] != '-')) return false;
  const bool negative = s[i] == '-';
  ++i;
  uint64_t secs = 0;
  if (!readUint(s, &i, &secs) || secs > 100'000'000 || i + 8 > s.size() || s[i] != '.') return false;
  const int usec = readFixedDigits(s, i + 1, 6);
  if (usec < 0 || s[i + 7] != ']') return false;
  const int64_t v = static_cast<int64_t>(secs) * kNsPerSec + int64_t{usec} * 1000;
  *delta_ns = negative ? -v : v;
  *length = i + 8;
  return true;
}

bool parseFabricManagerStamp(std::string_view s, int64_t* wall_ns, size_t* length) {
  // Fabric Manager releases write "[May 16 2025 15:10:21]"; some docs show a weekday first.
  if (s.size() >= 22 && s[0] == '[' && s[4] == ' ' && s[7] == ' ' && s[12] == ' ' && s[21] == ']') {
    const int month = monthFromAbbrev(s.substr(1, 3));
    const int day = s[5] == ' ' ? readFixedDigits(s, 6, 1) : readFixedDigits(s, 5, 2);
    const int year = readFixedDigits(s, 8, 4);
    const int tod = readClock(s, 13);
    if (month != 0 && day >= 1 && day <= 31 && tod >= 0 && stampYear(year)) {
      *wall_ns = civilToNs(year, month, day, 0, 0, 0, 0) + int64_t{tod} * kNsPerSec;
      *length = 22;
      return true;
    }
  }
  // "[Mon Jan 01 2024 00:00:00]"
  if (s.size() < 26 || s[0] != '[' || s[4] != ' ' || s[8] != ' ' || s[11] != ' ' ||
      s[16] != ' ' || s[25] != ']') {
    return false;
  }
  if (!isWeekdayAbbrev(s.substr(1, 3))) return false;
  const int month = monthFromAbbrev(s.substr(5, 3));
  const int day = s[9] == ' ' ? readFixedDigits(s, 10, 1) : readFixedDigits(s, 9, 2);
  const int year = readFixedDigits(s, 12, 4);
  const int tod = readClock(s, 17);
  if (month == 0 || day < 1 || day > 31 || tod < 0 || !stampYear(year)) return false;
  *wall_ns = civilToNs(year, month, day, 0, 0, 0, 0) + int64_t{tod} * kNsPerSec;
  *length = 26;
  return true;
}

bool parseKmsgHeader(std::string_view line, KmsgHeader* out) {
  size_t i = 0;
  uint64_t prio = 0;
  if (!readUint(line, &i, &prio) || prio > 1023 || i >= line.size() || line[i] != ',') {
    return false;
  }
  ++i;
  uint64_t seq = 0;
  if (!readUint(line, &i, &seq) || i >= line.size() || line[i] != ',') return false;
  ++i;
  uint64_t usec = 0;
  if (!readUint(line, &i, &usec) || usec > kMaxStampSeconds * 1'000'000 || i >= line.size() || line[i] != ',')
    return false;
  ++i;
  if (i >= line.size()) return false;
  const char flags = line[i];
  if (flags != '-' && flags != 'c' && flags != '+') return false;
  ++i;
  // Optional further fields (",caller=T123") up to ';'.
  if (i < line.size() && line[i] == ',') {
    const size_t semi = line.find(';', i);
    if (semi == std::string_view::npos) return false;
    i = semi;
  }
  if (i >= line.size() || line[i] != ';') return false;
  out->prio = static_cast<int>(prio);
  out->seq = seq;
  out->usec = usec;
  out->flags = flags;
  out->length = i + 1;
  return true;
}

bool parseTraditionalSyslog(std::string_view line, int year, SyslogLine* out) {
  // "Dec  2 11:38:27 host ..." — "Mmm dd HH:MM:SS " is 16 bytes.
  if (line.size() < 17 || line[3] != ' ' || line[6] != ' ' || line[15] != ' ') return false;
  const int month = monthFromAbbrev(line.substr(0, 3));
  if (month == 0) return false;
  const int day = line[4] == ' ' ? readFixedDigits(line, 5, 1) : readFixedDigits(line, 4, 2);
  const int tod = readClock(line, 7);
  if (day < 1 || day > 31 || tod < 0) return false;
  if (!parseHostIdentMsg(line.substr(16), out)) return false;
  out->ns = civilToNs(year, month, day, 0, 0, 0, 0) + int64_t{tod} * kNsPerSec;
  out->has_zone = false;
  return true;
}

bool parseIsoSyslog(std::string_view line, SyslogLine* out) {
  if (line.size() < 21 || !isDigit(line[0])) return false;
  IsoTime t;
  if (!parseIsoTime(line, /*allow_space=*/false, &t) || !t.has_zone || t.frac_sep == ',') {
    return false;
  }
  if (t.length >= line.size() || line[t.length] != ' ') return false;
  if (!parseHostIdentMsg(line.substr(t.length + 1), out)) return false;
  out->ns = t.ns;
  out->has_zone = true;
  return true;
}

bool parseDmesgIsoStamp(std::string_view s, int64_t* utc_ns, size_t* length) {
  if (s.size() < 20 || !isDigit(s[0])) return false;
  IsoTime t;
  if (!parseIsoTime(s, /*allow_space=*/false, &t) || !t.has_zone || t.frac_sep != ',') {
    return false;
  }
  if (t.length < s.size() && s[t.length] != ' ') return false;
  *utc_ns = t.ns;
  *length = t.length < s.size() ? t.length + 1 : t.length;
  return true;
}

bool isJournalMarker(std::string_view line) {
  return line.size() >= 6 && startsWith(line, "-- ") && line.substr(line.size() - 3) == " --";
}

namespace {

bool isLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

bool isFileNameChar(char c) {
  return isLetter(c) || isDigit(c) || c == '_' || c == '.' || c == '/' || c == '-' || c == '+' || c == '@';
}

// After "NAME" + sep: an optional "<digits><sep>" (grep -n); returns the position after it.
size_t skipGrepLineNumber(std::string_view line, size_t pos, char sep) {
  size_t i = pos;
  while (i < line.size() && isDigit(line[i])) ++i;
  return (i > pos && i < line.size() && line[i] == sep) ? i + 1 : pos;
}

}  // namespace

size_t grepFilePrefix(std::string_view line) {
  constexpr size_t kMaxName = 256;
  size_t i = 0;
  bool letter = false;
  while (i < line.size() && i < kMaxName && isFileNameChar(line[i])) letter |= isLetter(line[i++]);
  if (i == 0 || !letter || i >= line.size() || line[i] != ':') return 0;
  size_t end = skipGrepLineNumber(line, i + 1, ':');
  if (end >= line.size() || isSpace(line[end]) || line[end] == '/' || line[end] == ':') return 0;
  return end;
}

size_t grepNamedPrefix(std::string_view line, std::string_view name) {
  if (name.empty() || line.size() <= name.size() || line.compare(0, name.size(), name) != 0) return 0;
  const char sep = line[name.size()];
  if (sep != ':' && sep != '-') return 0;
  return skipGrepLineNumber(line, name.size() + 1, sep);
}

}  // namespace faultline::common::parse

// ipmitool's SEL listing (`sel list`, `sel elist`, and the same with -c): see ipmi_sel.h.
// The field layout follows ipmitool's ipmi_sel_print_std_entry (lib/ipmi_sel.c, 1.8.18 and
// 1.8.19+): "%4x | " id, then the date and time fields (or " Pre-Init  |%010d| ", or nothing
// for OEM records 0xe0.. and kernel panic records), then sensor | event | direction [| extra].
#include "common/parse/ipmi_sel.h"

#include <string>
#include <utility>

#include "common/parse/line_parser.h"
#include "common/parse/text_util.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

bool isHex(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool isAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// Splits s at the first separator (" | " for the table, "," for -c); false when there is none.
bool cutField(std::string_view* s, bool csv, std::string_view* field) {
  const std::string_view sep = csv ? std::string_view(",") : std::string_view(" | ");
  const size_t at = s->find(sep);
  if (at == std::string_view::npos) return false;
  *field = s->substr(0, at);
  s->remove_prefix(at + sep.size());
  return true;
}

// "06/01/2024" (%m/%d/%Y, ipmitool ≤1.8.18, and %x in en_US), "06/01/24" (%x in the C locale),
// "2024-06-01" and "01.06.2024" (%x in other locales); FreeIPMI's "Jun-01-2024" (%b-%d-%Y, its
// default), "Jun/01/2024", "06-01-2024" (*freeipmi set for those).
bool parseDate(std::string_view s, int* year, int* month, int* day, bool* freeipmi) {
  *freeipmi = false;
  if (s.size() == 11 && (s[3] == '-' || s[3] == '/') && s[6] == s[3]) {
    *month = monthFromAbbrev(s.substr(0, 3));
    *day = readFixedDigits(s, 4, 2);
    *year = readFixedDigits(s, 7, 4);
    *freeipmi = true;
  } else if (s.size() == 10 && s[2] == '-' && s[5] == '-') {
    *month = readFixedDigits(s, 0, 2);
    *day = readFixedDigits(s, 3, 2);
    *year = readFixedDigits(s, 6, 4);
    *freeipmi = true;
  } else if (s.size() == 10 && s[2] == '/' && s[5] == '/') {
    *month = readFixedDigits(s, 0, 2);
    *day = readFixedDigits(s, 3, 2);
    *year = readFixedDigits(s, 6, 4);
  } else if (s.size() == 8 && s[2] == '/' && s[5] == '/') {
    *month = readFixedDigits(s, 0, 2);
    *day = readFixedDigits(s, 3, 2);
    const int yy = readFixedDigits(s, 6, 2);
    *year = yy < 0 ? -1 : (yy < 70 ? 2000 + yy : 1900 + yy);
  } else if (s.size() == 10 && s[4] == '-' && s[7] == '-') {
    *year = readFixedDigits(s, 0, 4);
    *month = readFixedDigits(s, 5, 2);
    *day = readFixedDigits(s, 8, 2);
  } else if (s.size() == 10 && s[2] == '.' && s[5] == '.') {
    *day = readFixedDigits(s, 0, 2);
    *month = readFixedDigits(s, 3, 2);
    *year = readFixedDigits(s, 6, 4);
  } else {
    return false;
  }
  return stampYear(*year) && *month >= 1 && *month <= 12 && *day >= 1 && *day <= 31;
}

// "10:12:03" (%H:%M:%S), "10:12:03 UTC" (%X %Z, C locale), "10:12:03 AM CEST" (%X %Z, en_US).
// Seconds of the day; *utc when the zone is UTC/GMT.
bool parseTime(std::string_view s, int64_t* seconds, bool* utc) {
  if (s.size() < 8 || s[2] != ':' || s[5] != ':') return false;
  int hour = readFixedDigits(s, 0, 2);
  const int minute = readFixedDigits(s, 3, 2);
  const int second = readFixedDigits(s, 6, 2);
  if (hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 60) return false;
  std::string_view rest = s.substr(8);
  if (startsWith(rest, " AM") || startsWith(rest, " PM")) {
    if (hour < 1 || hour > 12) return false;
    const bool pm = rest[1] == 'P';
    hour = hour % 12 + (pm ? 12 : 0);
    rest.remove_prefix(3);
  }
  *utc = false;
  if (!rest.empty()) {
    if (rest.front() != ' ') return false;
    const std::string_view zone = rest.substr(1);
    if (zone.empty() || zone.size() > 6) return false;
    for (char c : zone)
      if (!isAlpha(c) && !isDigit(c) && c != '+' && c != '-') return false;
    *utc = zone == "UTC" || zone == "GMT" || zone == "UCT" || zone == "Z" || zone == "+0000";
  }
  *seconds = int64_t{hour} * 3600 + minute * 60 + second;
  return true;
}

// " Pre-Init  |0000000012| " (table) or " Pre-Init ,0000000012," (-c): the stamp counts seconds
// since the BMC started, not wall time.
bool cutPreInit(std::string_view* s, bool csv) {
  std::string_view r = trimLeft(*s);
  if (!startsWith(r, "Pre-Init")) return false;
  r = trimLeft(r.substr(8));
  const char sep = csv ? ',' : '|';
  if (r.empty() || r.front() != sep) return false;
  r.remove_prefix(1);
  size_t n = 0;
  while (n < r.size() && (isDigit(r[n]) || r[n] == '-')) ++n;
  if (n == 0 || n >= r.size() || r[n] != sep) return false;
  r.remove_prefix(n + 1);
  *s = csv ? r : trimLeft(r);
  return true;
}

}  // namespace

bool parseIpmiSelLine(std::string_view line, IpmiSelLine* out) {
  std::string_view s = trimLeft(line);
  size_t n = 0;
  uint32_t id = 0;
  while (n < s.size() && n < 8 && isHex(s[n])) {
    const char c = s[n];
    id = id * 16 + static_cast<uint32_t>(isDigit(c) ? c - '0' : (c | 0x20) - 'a' + 10);
    ++n;
  }
  if (n == 0 || n >= s.size()) return false;
  const std::string_view id_digits = s.substr(0, n);
  bool csv = false;
  size_t pad = n;  // FreeIPMI left-aligns the id: "4    | Jul-20-2017 | ..."
  while (pad < s.size() && s[pad] == ' ') ++pad;
  if (pad > n && startsWith(s.substr(pad), "| ")) {
    s.remove_prefix(pad + 2);
  } else if (s[n] == ',') {
    csv = true;
    s.remove_prefix(n + 1);
  } else {
    return false;
  }
  IpmiSelLine r;
  r.record_id = id;
  r.csv = csv;
  if (csv && startsWith(s, ",,")) s.remove_prefix(2);  // OEM 0xe0.. / panic records: no stamp
  if (startsWith(s, "OEM record ") || startsWith(s, "Linux kernel panic: ")) {
    r.stamp = IpmiSelLine::Stamp::kNone;
  } else if (cutPreInit(&s, csv)) {
    r.stamp = IpmiSelLine::Stamp::kPreInit;
  } else {
    std::string_view date, time;
    if (!cutField(&s, csv, &date) || !cutField(&s, csv, &time)) return false;
    date = trimLeft(trimRight(date));
    time = trimLeft(trimRight(time));
    int year = 0, month = 0, day = 0;
    int64_t seconds = 0;
    bool utc = false;
    bool freeipmi = false;
    if (date == "Unspecified" && time == "Unspecified") {
      r.stamp = IpmiSelLine::Stamp::kNone;
    } else if ((date == "Unspec." && time == "Unspec.") || (date == "N/A" && time == "N/A")) {
      r.stamp = IpmiSelLine::Stamp::kNone;  // FreeIPMI
      r.freeipmi = true;
    } else if (date == "PostInit" && time == "PostInit") {
      r.stamp = IpmiSelLine::Stamp::kPreInit;  // FreeIPMI
      r.freeipmi = true;
    } else if (startsWith(date, "S+") && parseTime(time, &seconds, &utc)) {
      r.stamp = IpmiSelLine::Stamp::kPreInit;  // 1.8.19+: seconds since BMC init
    } else if (parseDate(date, &year, &month, &day, &freeipmi) && parseTime(time, &seconds, &utc)) {
      r.freeipmi = freeipmi;
      r.stamp = IpmiSelLine::Stamp::kWall;
      r.wall_ns = civilToNs(year, month, day, 0, 0, 0, 0) + seconds * kNsPerSec;
      r.utc = utc;
    } else {
      return false;
    }
  }
  s = trimRight(s);
  if (s.empty()) return false;
  if (r.freeipmi) {  // FreeIPMI numbers records in decimal
    r.record_id = 0;
    for (char c : id_digits) {
      if (!isDigit(c)) return false;
      r.record_id = r.record_id * 10 + static_cast<uint32_t>(c - '0');
    }
  }
  r.text = s;
  *out = r;
  return true;
}

bool isIpmiSelHeader(std::string_view line) {
  const std::string_view s = trimLeft(line);
  if (startsWith(s, "ID,Date,Time,")) return true;
  if (!startsWith(s, "ID ")) return false;
  const std::string_view rest = trimLeft(s.substr(3));
  return startsWith(rest, "| Date") && rest.find("| Time") != std::string_view::npos;
}

namespace {

class IpmiSelParser final : public LineParser {
 public:
  IpmiSelParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kIpmiSel, std::move(options), std::move(sink)) {
    deliverAll();  // the text's " | " separators are rewritten: the raw bytes do not hold it
  }

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!contentLine(raw, &line)) return;
    IpmiSelLine sel;
    if (isIpmiSelHeader(line)) {  // FreeIPMI prints it once, before the records
      skipLine(SkipKind::kOther, "");
      return;
    }
    if (!parseIpmiSelLine(line, &sel)) {
      // "SEL has no entries", a `sel info` block or a shell prompt pasted with the listing.
      skipLine(SkipKind::kMalformed, "not an ipmitool SEL entry");
      return;
    }
    LogRecord rec;
    if (sel.stamp == IpmiSelLine::Stamp::kWall) {
      rec.time_ns = sel.utc ? sel.wall_ns : localToUtc(sel.wall_ns);
      rec.time_known = true;
    }
    rec.ident = "ipmi-sel";
    rec.line = line_no_;
    // -c output separates the fields with ','; give rules the table's " | " either way.
    // FreeIPMI pads its columns: keep the fields, not the padding.
    if (sel.csv || sel.freeipmi) {
      const std::string_view sep = sel.csv ? std::string_view(",") : std::string_view(" | ");
      std::string_view rest = sel.text;
      rec.text.reserve(sel.text.size() + 16);
      while (true) {
        const size_t at = rest.find(sep);
        std::string_view field = rest.substr(0, at);
        if (sel.freeipmi) field = trimRight(field);
        if (!rec.text.empty()) rec.text += " | ";
        rec.text.append(field);
        if (at == std::string_view::npos) break;
        rest = rest.substr(at + sep.size());
      }
    } else {
      rec.text.assign(sel.text);
    }
    emit(std::move(rec));
  }
};

}  // namespace

std::unique_ptr<StreamParser> makeIpmiSelParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<IpmiSelParser>(std::move(options), std::move(sink));
}

}  // namespace faultline::common::parse

// dmesg in its time formats: raw "[ 1234.567890] msg", -T "[Fri Aug 30 11:43:09 2024] msg",
// -H "[May19 19:57] msg" then "[  +0.000127] msg" (read with -T: local wall time), and
// --time-format iso "2025-01-21T04:41:44,283302+00:00 msg"; each optionally behind the
// --decode "kern  :warn  : " prefix or a "<6>" raw priority. A CONFIG_PRINTK_CALLER kernel's
// caller id after the stamp ("[  12.3][    T1] msg", util-linux: "[  12.3] [    T1] msg") is
// dropped: LogRecord has no field for it, and left in the text it would hide a continuation.
//
// A node's console log (kConsole: HPE Cray EX, conman) is raw dmesg behind the console logger's
// wall-clock stamp, "[2025-07-16T20:42:48+08:00][1854229.275568][T4056360] msg": the record's
// time is that stamp (absolute; a stamp without a zone is node-local), the uptime its monotonic
// clock, written as printk writes it (six fraction digits: slurmd's "[<ISO>] [1848523.0] msg"
// is no console line). A line with the wall stamp and no kernel stamp after it is the console's
// own output (firmware, BMC, the logger): a record of its own (ident "console"). It does not end
// a kernel record that is still joining, so a trace with a BMC line in the middle reaches the
// rules whole (and is handed on before that record). A line without the wall stamp is read as
// raw dmesg.
//
// Joining: the kernel prints stack traces and register dumps as separate printk lines whose
// message starts with whitespace ("[  12.3]  dump_stack+0x..."); those, and lines without any
// stamp right after a record, are appended to the previous record so a rule sees the whole
// trace under its header line.
#include <optional>
#include <utility>

#include "common/parse/line_grammar.h"
#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

class DmesgParser final : public LineParser {
 public:
  DmesgParser(LogFormat format, ParseOptions options, RecordSink sink)
      : LineParser(format, std::move(options), std::move(sink)), format_(format) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!textLine(raw, &line)) return;
    if (trimRight(line).empty()) {
      skipLine(SkipKind::kOther, "");
      return;
    }
    std::string_view rest = line;
    std::optional<int64_t> wall;  // kConsole: the console logger's stamp, UTC
    if (format_ == LogFormat::kConsole) {
      WallStamp stamp;
      if (parseBracketWallStamp(rest, &stamp)) {
        wall = stamp.has_zone ? stamp.ns : localToUtc(stamp.ns);
        rest = trimLeft(rest.substr(stamp.length));
      }
    }
    int priority = -1;
    DecodePrefix decode;
    if (parseDecodePrefix(rest, &decode)) {
      priority = decode.level;
      rest.remove_prefix(decode.length);
    } else if (rest.size() > 3 && rest[0] == '<' && isDigit(rest[1])) {
      const size_t close = rest.find('>');
      size_t i = 1;
      uint64_t prio = 0;
      if (close != std::string_view::npos && close < 6 && readUint(rest, &i, &prio) &&
          i == close) {
        priority = static_cast<int>(prio & 7);
        rest.remove_prefix(close + 1);
      }
    }
    // The record's clocks (a LogRecord is only made for a new record, in place in the joiner).
    struct {
      int64_t time_ns = 0;
      bool time_known = false;
      int64_t monotonic_ns = -1;
    } rec;
    size_t stamp_len = 0;
    bool stamped = false;
    switch (format_) {
      case LogFormat::kDmesgRaw:
      case LogFormat::kConsole: {
        int64_t mono = 0;
        if (wall ? parsePrintkUptime(rest, &mono, &stamp_len) : parseBracketMonotonic(rest, &mono, &stamp_len)) {
          stamped = true;
          rec.monotonic_ns = mono;
          if (wall) {
            rec.time_ns = *wall;
            rec.time_known = true;
            break;
          }
          if (options_.uptime_ns && mono > uptime_seen_ns_) uptime_seen_ns_ = options_.uptime_ns();
          if (options_.boot_time_ns && !(options_.uptime_ns && mono > uptime_seen_ns_)) {
            rec.time_ns = *options_.boot_time_ns + mono;
            rec.time_known = true;
          }
        }
        break;
      }
      case LogFormat::kDmesgCtime: {
        int64_t wall = 0;
        int64_t delta = 0;
        if (parseDmesgCtime(rest, &wall, &stamp_len) ||
            parseDmesgHumanStamp(rest, options_.default_year, &wall, &stamp_len)) {
          stamped = true;
          human_wall_ = wall;
          rec.time_ns = localToUtc(wall);
          rec.time_known = true;
        } else if (parseDmesgDelta(rest, &delta, &stamp_len)) {
          // -H deltas count from the previous message; before any full stamp they place nothing.
          stamped = true;
          if (human_wall_) {
            *human_wall_ += delta;
            rec.time_ns = localToUtc(*human_wall_);
            rec.time_known = true;
          }
        }
        break;
      }
      default: {
        int64_t utc = 0;
        if (parseDmesgIsoStamp(rest, &utc, &stamp_len)) {
          stamped = true;
          rec.time_ns = utc;
          rec.time_known = true;
        }
        break;
      }
    }
    if (!stamped && wall) {
      consoleLine(trimRight(rest), *wall, priority);
      return;
    }
    if (!stamped) {
      if (auto other = foreignRecord(line)) {
        flush();
        emit(std::move(*other));
      } else if (joiner_.active()) {
        continueWith(trimRight(line));
      } else {
        skipLine(SkipKind::kMalformed, "no dmesg time stamp");
      }
      return;
    }
    rest.remove_prefix(stamp_len);
    if (format_ != LogFormat::kDmesgIso && !rest.empty() && rest.front() == ' ') {
      rest.remove_prefix(1);
    }
    if (const size_t caller = printkCallerLength(rest)) {
      rest.remove_prefix(caller);
      if (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
    }
    rest = trimRight(rest);
    if (!rest.empty() && isSpace(rest.front()) && joiner_.active()) {
      continueWith(rest);
      return;
    }
    flush();
    LogRecord& r = joiner_.begin(line_no_);
    r.time_ns = rec.time_ns;
    r.time_known = rec.time_known;
    r.monotonic_ns = rec.monotonic_ns;
    r.ident = "kernel";
    r.priority = priority;
    r.text.assign(rest);
  }

  // A console line that is not the kernel's: its own record, handed on now. `text` is what
  // follows the wall stamp (its priority prefix, if any, dropped).
  void consoleLine(std::string_view text, int64_t wall, int priority) {
    if (text.empty()) {
      skipLine(SkipKind::kOther, "");  // a stamp alone: a blank line of the console
      return;
    }
    if (!wouldHandOn(false)) {
      countDropped();
      return;
    }
    LogRecord r;
    r.time_ns = wall;
    r.time_known = true;
    r.ident = "console";
    r.priority = priority;
    r.text.assign(text);
    r.line = line_no_;
    emit(std::move(r));
  }

  void continueWith(std::string_view text) {
    if (joiner_.append(text, options_, line_no_)) return;
    // Over the record bounds: keep the line as a record of its own with the same origin.
    LogRecord next = joiner_.record();
    next.text.assign(text);
    next.line = line_no_;
    flush();
    joiner_.start(std::move(next));
  }

  void flush() {
    if (joiner_.active()) {
      emit(std::move(joiner_.record()), joiner_.lastLine());
      joiner_.release();
    }
  }

  void onEnd() override { flush(); }

  LogFormat format_;
  Joiner joiner_;
  std::optional<int64_t> human_wall_;  // dmesg -H: local wall time of the previous message
  int64_t uptime_seen_ns_ = -1;        // options_.uptime_ns()'s last answer
};

}  // namespace

std::unique_ptr<StreamParser> makeDmesgParser(LogFormat format, ParseOptions options,
                                              RecordSink sink) {
  return std::make_unique<DmesgParser>(format, std::move(options), std::move(sink));
}

}  // namespace faultline::common::parse

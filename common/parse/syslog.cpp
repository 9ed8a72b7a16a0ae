// Syslog-shaped text: rsyslog traditional "Dec  2 11:38:27 host ident[pid]: msg", rsyslog
// high-precision / RFC 3339 and journalctl -o short-iso(-precise) "2024-06-01T10:00:01.123+00:00
// host ident[pid]: msg". journalctl -o short is the traditional form too, so one parser serves
// kSyslog and kJournalShortIso; they differ only in rsyslog "#012" unescaping (kSyslog only).
//
// Kernel lines forwarded by rsyslog carry the printk stamp "kernel: [  219.470001] msg": it is
// removed from the text and kept as monotonic_ns. Continuations: journalctl prints further lines
// of a multi-line message indented to the message column (that indentation is removed), and
// kernel stack-trace lines come as messages starting with whitespace; both join the previous
// record when host and ident match.
#include <utility>

#include "common/parse/line_grammar.h"
#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

class SyslogParser final : public LineParser {
 public:
  SyslogParser(LogFormat format, ParseOptions options, RecordSink sink)
      : LineParser(format, std::move(options), std::move(sink)),
        year_(options_.default_year),
        unescape_(format == LogFormat::kSyslog) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!contentLine(raw, &line)) return;
    int priority = -1;
    std::string_view rest = line;
    if (rest.size() > 3 && rest[0] == '<' && isDigit(rest[1])) {
      // rsyslog "<13>" PRI prefix (raw forwarding templates).
      size_t i = 1;
      uint64_t pri = 0;
      if (readUint(rest, &i, &pri) && i < rest.size() && rest[i] == '>' && pri < 192) {
        priority = static_cast<int>(pri & 7);
        rest.remove_prefix(i + 1);
      }
    }
    if (rest.empty()) {
      skipLine(SkipKind::kMalformed, "PRI without message");
      return;
    }
    SyslogLine sl;
    bool ok = false;
    if (isDigit(rest.front())) {
      ok = parseIsoSyslog(rest, &sl);
    } else if (rest.front() >= 'A' && rest.front() <= 'S') {
      ok = parseTraditionalSyslog(rest, year_, &sl);
      if (ok) adjustYear(rest, &sl);
    }
    if (!ok) {
      if (rest.front() == '-' && isJournalMarker(rest)) {
        onMarker(rest);
        return;
      }
      if (joiner_.active()) {
        continueWith(stripColumn(line));
      } else {
        skipLine(SkipKind::kMalformed, "no syslog/journal time stamp");
      }
      return;
    }
    std::string_view msg = sl.msg;
    int64_t mono = -1;
    if (sl.ident == "kernel") {
      int64_t m = 0;
      size_t len = 0;
      if (parseBracketMonotonic(msg, &m, &len)) {
        mono = m;
        msg.remove_prefix(len);
        if (!msg.empty() && msg.front() == ' ') msg.remove_prefix(1);
      }
    }
    if (!msg.empty() && isSpace(msg.front()) && joiner_.active() &&
        joiner_.record().ident == sl.ident && joiner_.record().host == sl.host) {
      continueWith(msg);
      return;
    }
    flush();
    // Built in place: a record the search-first path drops leaves its buffers for the next.
    LogRecord& rec = joiner_.begin(line_no_);
    rec.time_ns = sl.has_zone ? sl.ns : localToUtc(sl.ns);
    rec.time_known = true;
    rec.monotonic_ns = mono;
    rec.boot_id = boot_id_;
    rec.host.assign(sl.host);
    rec.ident.assign(sl.ident);
    rec.priority = priority;
    if (unescape_ && msg.find('#') != std::string_view::npos) {
      unescapeRsyslog(msg, &rec.text);
    } else {
      rec.text.assign(msg);
    }
    msg_column_ = static_cast<size_t>(sl.msg.data() - line.data());
  }

  // Traditional syslog has no year: assume default_year and step it when the months wrap
  // (Dec -> Jan) so a log spanning new year stays ordered.
  void adjustYear(std::string_view rest, SyslogLine* sl) {
    const int month = monthFromAbbrev(rest.substr(0, 3));
    if (last_month_ != 0 && month + 6 < last_month_) {
      ++year_;
      parseTraditionalSyslog(rest, year_, sl);
    }
    last_month_ = month;
  }

  void onMarker(std::string_view marker) {
    flush();
    constexpr std::string_view kBoot = "-- Boot ";
    if (startsWith(marker, kBoot)) {
      std::string_view id = marker.substr(kBoot.size());
      id = id.substr(0, id.find(' '));
      boot_id_.assign(id);
    }
    skipLine(SkipKind::kOther, "");
  }

  // journalctl indents continuation lines to the message column; drop exactly that.
  std::string_view stripColumn(std::string_view line) const {
    size_t n = 0;
    while (n < line.size() && n < msg_column_ && line[n] == ' ') ++n;
    return n == msg_column_ ? line.substr(n) : line;
  }

  void continueWith(std::string_view text) {
    std::string unescaped;
    if (unescape_ && text.find('#') != std::string_view::npos) {
      unescapeRsyslog(text, &unescaped);
      text = unescaped;
    }
    if (joiner_.append(text, options_, line_no_)) return;
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

  int year_;
  int last_month_ = 0;
  bool unescape_;
  std::string boot_id_;
  size_t msg_column_ = 0;
  Joiner joiner_;
};

}  // namespace

std::unique_ptr<StreamParser> makeSyslogParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<SyslogParser>(LogFormat::kSyslog, std::move(options), std::move(sink));
}

std::unique_ptr<StreamParser> makeJournalShortIsoParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<SyslogParser>(LogFormat::kJournalShortIso, std::move(options),
                                        std::move(sink));
}

}  // namespace faultline::common::parse

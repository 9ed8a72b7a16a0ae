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
      if (auto other = foreignRecord(line)) {
        flush();
        emit(std::move(*other));
        return;
      }
      materialize();
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
    if (!msg.empty() && isSpace(msg.front()) &&
        (light_.active ? light_.ident() == sl.ident && light_.host() == sl.host
                       : joiner_.active() && joiner_.record().ident == sl.ident && joiner_.record().host == sl.host)) {
      materialize();
      continueWith(msg);
      return;
    }
    flush();
    const int64_t time_ns = sl.has_zone ? sl.ns : localToUtc(sl.ns);
    msg_column_ = static_cast<size_t>(sl.msg.data() - line.data());
    if (!wouldHandOn(/*both_clocks=*/mono >= 0)) {
      // No literal on this line: unless a continuation line brings one (materialize), the record
      // is only counted, so keep its line and where its fields are, not the fields.
      light_.active = true;
      light_.line_no = line_no_;
      light_.time_ns = time_ns;
      light_.mono = mono;
      light_.priority = priority;
      light_.host_at = light_.at(line, sl.host);
      light_.ident_at = light_.at(line, sl.ident);
      light_.msg_at = light_.at(line, msg);
      light_.line.assign(line);
      return;
    }
    build(line_no_, time_ns, mono, priority, sl.host, sl.ident, msg);
  }

  // Built in place: a record the search-first path drops leaves its buffers for the next.
  void build(uint64_t line_no, int64_t time_ns, int64_t mono, int priority, std::string_view host,
             std::string_view ident, std::string_view msg) {
    LogRecord& rec = joiner_.begin(line_no);
    rec.time_ns = time_ns;
    rec.time_known = true;
    rec.monotonic_ns = mono;
    rec.boot_id = boot_id_;
    rec.host.assign(host);
    rec.ident.assign(ident);
    rec.priority = priority;
    if (unescape_ && msg.find('#') != std::string_view::npos) {
      unescapeRsyslog(msg, &rec.text);
    } else {
      rec.text.assign(msg);
    }
  }

  // The record of a light line, built after all: a continuation line follows it.
  void materialize() {
    if (!light_.active) return;
    light_.active = false;
    build(light_.line_no, light_.time_ns, light_.mono, light_.priority, light_.host(), light_.ident(),
          light_.msg());
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
    if (light_.active) {  // a one-line record without a literal: what emit would do with it
      light_.active = false;
      countDropped();
      return;
    }
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
  // The record begun by the last stamped line while that line held no literal hit
  // (LineParser::wouldHandOn): its line copied once and its fields as spans of it, instead of a
  // record built field by field that emit would drop unread. Never active with joiner_.
  struct LightRecord {
    struct Span {
      size_t at = 0, size = 0;
    };
    static Span at(std::string_view line, std::string_view part) {
      return part.empty() ? Span{} : Span{static_cast<size_t>(part.data() - line.data()), part.size()};
    }
    std::string_view of(Span sp) const { return std::string_view(line).substr(sp.at, sp.size); }
    std::string_view host() const { return of(host_at); }
    std::string_view ident() const { return of(ident_at); }
    std::string_view msg() const { return of(msg_at); }
    bool active = false;
    uint64_t line_no = 0;
    int64_t time_ns = 0;
    int64_t mono = -1;
    int priority = -1;
    Span host_at, ident_at, msg_at;
    std::string line;
  } light_;
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

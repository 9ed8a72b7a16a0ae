// /dev/kmsg records "prio,seq,usec,flags[,...];text" with " KEY=value" dictionary lines, as read
// live by the agent or saved by `cat /dev/kmsg > file`.
#include <utility>

#include "common/parse/line_grammar.h"
#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common {

std::optional<KmsgRecord> parseKmsgRecord(std::string_view record) {
  while (!record.empty() && (record.back() == '\n' || record.back() == '\r')) {
    record.remove_suffix(1);
  }
  size_t nl = record.find('\n');
  std::string_view first = record.substr(0, nl);
  parse::KmsgHeader header;
  if (!parse::parseKmsgHeader(first, &header)) return std::nullopt;
  KmsgRecord out;
  out.facility = header.prio >> 3;
  out.level = header.prio & 7;
  out.seq = header.seq;
  out.usec = header.usec;
  out.flags = header.flags == 'c' ? 'c' : '-';
  parse::unescapeKmsg(first.substr(header.length), &out.text);
  std::string value;
  while (nl != std::string_view::npos) {
    const size_t start = nl + 1;
    nl = record.find('\n', start);
    std::string_view dict_line = record.substr(start, nl == std::string_view::npos ? nl : nl - start);
    if (dict_line.empty() || dict_line.front() != ' ') continue;
    dict_line.remove_prefix(1);
    const size_t eq = dict_line.find('=');
    if (eq == 0 || eq == std::string_view::npos) continue;
    parse::unescapeKmsg(dict_line.substr(eq + 1), &value);
    out.dict[std::string(dict_line.substr(0, eq))] = value;
  }
  return out;
}

namespace parse {
namespace {

class KmsgParser final : public LineParser {
 public:
  KmsgParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kKmsg, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!textLine(raw, &line)) return;
    if (line.empty()) {
      skipLine(SkipKind::kOther, "");
      return;
    }
    if (line.front() == ' ') {
      // Dictionary line of the previous record: part of it, but not of its text.
      if (!had_record_) skipLine(SkipKind::kMalformed, "kmsg dictionary line without record");
      return;
    }
    KmsgHeader header;
    if (!parseKmsgHeader(line, &header)) {
      skipLine(SkipKind::kMalformed, "not a kmsg record");
      return;
    }
    LogRecord rec;
    rec.monotonic_ns = static_cast<int64_t>(header.usec) * 1000;
    if (options_.boot_time_ns) {
      rec.time_ns = *options_.boot_time_ns + rec.monotonic_ns;
      rec.time_known = true;
    }
    rec.ident = "kernel";
    rec.priority = header.prio & 7;
    unescapeKmsg(trimRight(line.substr(header.length)), &rec.text);
    rec.line = line_no_;
    // Dictionary lines never add to the text, so the record is complete now.
    emit(std::move(rec));
    had_record_ = true;
  }

  bool had_record_ = false;
};

}  // namespace

std::unique_ptr<StreamParser> makeKmsgParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<KmsgParser>(std::move(options), std::move(sink));
}

}  // namespace parse
}  // namespace faultline::common

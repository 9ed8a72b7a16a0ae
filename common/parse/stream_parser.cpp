// makeStreamParser: the one switch from a format to its parser.
#include <utility>

#include "common/parse/cri.h"
#include "common/parse/ipmi_sel.h"
#include "common/parse/line_parser.h"

namespace faultline::common {
namespace parse {
namespace {

// kJournalBinary is read with sd-journal (common/journal/), never as text.
class RejectingParser final : public LineParser {
 public:
  RejectingParser(LogFormat format, ParseOptions options, RecordSink sink)
      : LineParser(format, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view) override {
    skipLine(SkipKind::kMalformed, "binary journal files are read with sd-journal, not as text");
  }
};

}  // namespace

std::unique_ptr<StreamParser> makeRejectingParser(LogFormat format, ParseOptions options,
                                                  RecordSink sink) {
  return std::make_unique<RejectingParser>(format, std::move(options), std::move(sink));
}

}  // namespace parse

std::unique_ptr<StreamParser> makeStreamParser(LogFormat format, ParseOptions options,
                                               RecordSink sink) {
  switch (format) {
    case LogFormat::kDmesgRaw:
    case LogFormat::kDmesgCtime:
    case LogFormat::kDmesgIso:
    case LogFormat::kConsole:
      return parse::makeDmesgParser(format, std::move(options), std::move(sink));
    case LogFormat::kKmsg:
      return parse::makeKmsgParser(std::move(options), std::move(sink));
    case LogFormat::kJournalShortIso:
      return parse::makeJournalShortIsoParser(std::move(options), std::move(sink));
    case LogFormat::kJournalJson:
      return parse::makeJournalJsonParser(std::move(options), std::move(sink));
    case LogFormat::kJournalExport:
      return parse::makeJournalExportParser(std::move(options), std::move(sink));
    case LogFormat::kJournalBinary:
      return parse::makeRejectingParser(format, std::move(options), std::move(sink));
    case LogFormat::kSyslog:
      return parse::makeSyslogParser(std::move(options), std::move(sink));
    case LogFormat::kFabricManager:
      return parse::makeFabricManagerParser(std::move(options), std::move(sink));
    case LogFormat::kIpmiSel:
      return parse::makeIpmiSelParser(std::move(options), std::move(sink));
    case LogFormat::kCriLog:
      return parse::makeCriParser(std::move(options), std::move(sink));
    case LogFormat::kUnknown:  // nothing more specific known: everything is application text
    case LogFormat::kApplication:
      return parse::makeApplicationParser(std::move(options), std::move(sink));
  }
  return parse::makeApplicationParser(std::move(options), std::move(sink));
}

}  // namespace faultline::common

// NVIDIA Fabric Manager log (/var/log/fabricmanager.log):
// "[Mon Jan 01 2024 00:00:00] [ERROR] [tid 1234] msg", node-local wall-clock time. Lines without
// the stamp (FM prints some multi-line dumps) join the previous record.
#include <utility>

#include "common/parse/line_grammar.h"
#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

int fmLevelPriority(std::string_view level) {
  if (level == "ERROR") return 3;
  if (level == "WARNING" || level == "WARN") return 4;
  if (level == "INFO") return 6;
  if (level == "DEBUG") return 7;
  if (level == "FATAL" || level == "CRITICAL") return 2;
  if (level == "NOTICE") return 5;
  return -1;
}

class FabricManagerParser final : public LineParser {
 public:
  FabricManagerParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kFabricManager, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!contentLine(raw, &line)) return;
    int64_t wall = 0;
    size_t len = 0;
    if (!parseFabricManagerStamp(line, &wall, &len)) {
      if (auto other = foreignRecord(line)) {
        flush();
        emit(std::move(*other));
      } else if (joiner_.active()) {
        if (!joiner_.append(line, options_, line_no_)) {
          LogRecord next = joiner_.record();
          next.text.assign(line);
          next.line = line_no_;
          flush();
          joiner_.start(std::move(next));
        }
      } else {
        skipLine(SkipKind::kMalformed, "no Fabric Manager time stamp");
      }
      return;
    }
    std::string_view rest = trimLeft(line.substr(len));
    int priority = -1;
    if (!rest.empty() && rest.front() == '[') {
      const size_t close = rest.find(']');
      if (close != std::string_view::npos) {
        priority = fmLevelPriority(rest.substr(1, close - 1));
        if (priority >= 0) rest = trimLeft(rest.substr(close + 1));
      }
    }
    if (startsWith(rest, "[tid ")) {
      const size_t close = rest.find(']');
      if (close != std::string_view::npos) rest = trimLeft(rest.substr(close + 1));
    }
    flush();
    LogRecord rec;
    rec.time_ns = localToUtc(wall);
    rec.time_known = true;
    rec.ident = "nv-fabricmanager";
    rec.priority = priority;
    rec.text.assign(rest);
    rec.line = line_no_;
    joiner_.start(std::move(rec));
  }

  void flush() {
    if (joiner_.active()) {
      const uint64_t last = joiner_.lastLine();
      emit(joiner_.take(), last);
    }
  }
  void onEnd() override { flush(); }

  Joiner joiner_;
};

}  // namespace

std::unique_ptr<StreamParser> makeFabricManagerParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<FabricManagerParser>(std::move(options), std::move(sink));
}

}  // namespace faultline::common::parse

#include "common/parse/line_parser.h"

#include <cstring>
#include <utility>

namespace faultline::common::parse {
namespace {
constexpr size_t kMaxNotes = 8;
}  // namespace

LineParser::LineParser(LogFormat format, ParseOptions options, RecordSink sink)
    : options_(std::move(options)), sink_(std::move(sink)) {
  report_.format = format;
}

void LineParser::feed(std::string_view bytes) {
  const char* data = bytes.data();
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (raw_want_ > 0) {
      const size_t take = std::min(raw_want_, bytes.size() - pos);
      if (!raw_skip_) buf_.append(data + pos, take);
      pos += take;
      raw_want_ -= take;
      if (raw_want_ == 0) {
        if (raw_skip_) {
          raw_skip_ = false;
        } else {
          std::string raw;
          raw.swap(buf_);
          onRaw(raw);
        }
      }
      continue;
    }
    const void* nl = std::memchr(data + pos, '\n', bytes.size() - pos);
    if (discarding_) {
      if (nl == nullptr) return;  // still inside the over-long line: drop, never buffer
      pos = static_cast<const char*>(nl) - data + 1;
      discarding_ = false;
      dispatchOversized();
      continue;
    }
    if (nl == nullptr) {
      const size_t rest = bytes.size() - pos;
      if (buf_.size() + rest > options_.max_line_bytes) {
        buf_.clear();
        buf_.shrink_to_fit();
        discarding_ = true;
        return;
      }
      buf_.append(data + pos, rest);
      return;
    }
    const size_t end = static_cast<const char*>(nl) - data;
    const size_t len = end - pos;
    if (buf_.empty()) {
      // Zero-copy path: the line lies entirely in this chunk.
      if (len > options_.max_line_bytes) {
        dispatchOversized();
      } else {
        dispatchLine(std::string_view(data + pos, len));
      }
    } else if (buf_.size() + len > options_.max_line_bytes) {
      buf_.clear();
      dispatchOversized();
    } else {
      buf_.append(data + pos, len);
      // onLine may start raw mode, which reuses buf_: hand the line over first.
      std::string line;
      line.swap(buf_);
      dispatchLine(line);
      if (buf_.empty()) {
        line.clear();
        buf_.swap(line);  // keep the capacity for the next partial line
      }
    }
    pos = end + 1;
  }
}

void LineParser::finish() {
  if (raw_want_ > 0) {
    report_.truncated = true;
    raw_want_ = 0;
    raw_skip_ = false;
    buf_.clear();
    onRawTruncated();
  } else if (discarding_) {
    report_.truncated = true;
    discarding_ = false;
    dispatchOversized();
  } else if (!buf_.empty()) {
    report_.truncated = true;
    std::string line;
    line.swap(buf_);
    dispatchLine(line);
    if (raw_want_ > 0) {
      raw_want_ = 0;
      raw_skip_ = false;
      buf_.clear();
      onRawTruncated();
    }
  }
  onEnd();
}

void LineParser::dispatchLine(std::string_view line) {
  ++line_no_;
  ++report_.lines;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  onLine(line);
}

void LineParser::dispatchOversized() {
  ++line_no_;
  ++report_.lines;
  skipLine(SkipKind::kOversized, "line longer than max_line_bytes skipped");
}

bool LineParser::readRaw(size_t n) {
  if (n == 0) {
    onRaw(std::string_view());
    return true;
  }
  raw_want_ = n;
  raw_skip_ = n > options_.max_line_bytes;
  return !raw_skip_;
}

void LineParser::emit(LogRecord&& record) {
  if (record.boot_id.empty() && !options_.boot_id.empty()) record.boot_id = options_.boot_id;
  ++report_.records;
  sink_(std::move(record));
}

void LineParser::skipLine(SkipKind kind, std::string_view why, uint64_t line_no) {
  ++report_.skipped;
  switch (kind) {
    case SkipKind::kOther:
      return;  // legitimately not a record: no note
    case SkipKind::kMalformed:
      ++report_.malformed;
      break;
    case SkipKind::kBinary:
      ++report_.binary;
      break;
    case SkipKind::kOversized:
      ++report_.oversized;
      break;
  }
  addNote(line_no != 0 ? line_no : line_no_, why);
}

void LineParser::addNote(uint64_t line_no, std::string_view why) {
  if (report_.notes.size() >= kMaxNotes) return;
  std::string note = "line " + std::to_string(line_no) + ": ";
  note.append(why);
  report_.notes.push_back(std::move(note));
}

bool LineParser::textLine(std::string_view line, std::string_view* out) {
  if (checkText(line, /*allow_newline=*/false, &scratch_, out) == TextVerdict::kBinary) {
    skipLine(SkipKind::kBinary, "binary data (NUL, control or invalid UTF-8 bytes) skipped");
    return false;
  }
  return true;
}

bool LineParser::contentLine(std::string_view raw, std::string_view* out) {
  if (!textLine(raw, out)) return false;
  *out = trimRight(*out);
  if (out->empty()) {
    skipLine(SkipKind::kOther, "");
    return false;
  }
  return true;
}

void Joiner::start(LogRecord&& record) {
  record_ = std::move(record);
  active_ = true;
  lines_ = 1;
}

bool Joiner::append(std::string_view text, const ParseOptions& options) {
  if (lines_ + 1 > options.max_record_lines ||
      record_.text.size() + 1 + text.size() > options.max_record_bytes) {
    return false;
  }
  record_.text.push_back('\n');
  record_.text.append(text);
  ++lines_;
  return true;
}

LogRecord Joiner::take() {
  active_ = false;
  lines_ = 0;
  return std::move(record_);
}

}  // namespace faultline::common::parse

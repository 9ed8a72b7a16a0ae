#include "common/parse/line_parser.h"

#include "common/parse/line_grammar.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace faultline::common::parse {
namespace {
constexpr size_t kMaxNotes = 8;
// Candidate line numbers kept for records still open; older ones are forgotten conservatively.
constexpr size_t kMaxCandidateLines = 4096;
}  // namespace

LineParser::LineParser(LogFormat format, ParseOptions options, RecordSink sink)
    : options_(std::move(options)), format_(format), sink_(std::move(sink)) {
  report_.format = format;
  if (options_.literals) {
    const unsigned escapes = format == LogFormat::kKmsg          ? LiteralScanner::Stream::kBackslash
                             : format == LogFormat::kJournalJson ? LiteralScanner::Stream::kBackslash |
                                                                       LiteralScanner::Stream::kJsonBytes
                                                                 : 0u;
    lit_stream_ = std::make_unique<LiteralScanner::Stream>(options_.literals, escapes);
    if (!lit_stream_->ok()) lit_stream_.reset();
    // The error words only widen what is handed on, and only next to the rules' literals.
    if (lit_stream_ && options_.error_words) {
      err_stream_ = std::make_unique<LiteralScanner::Stream>(options_.error_words, escapes);
      if (!err_stream_->ok()) err_stream_.reset();
    }
  }
}

bool LineParser::takeErrorHits(uint64_t end) {
  bool any = false;
  while (err_head_ < err_hits_.size() && LiteralScanner::Stream::hitEnd(err_hits_[err_head_]) <= end) {
    any = true;
    ++err_head_;
  }
  if (err_head_ == err_hits_.size()) {
    err_hits_.clear();
    err_head_ = 0;
  } else if (err_head_ > 4096 && err_head_ * 2 > err_hits_.size()) {
    err_hits_.erase(err_hits_.begin(), err_hits_.begin() + static_cast<long>(err_head_));
    err_head_ = 0;
  }
  return any;
}

bool LineParser::takeHits(uint64_t end) {
  bool any = false;
  const unsigned literals = static_cast<unsigned>(options_.literals->literalCount());
  while (hit_head_ < hits_.size() && LiteralScanner::Stream::hitEnd(hits_[hit_head_]) <= end) {
    any = true;
    const unsigned id = LiteralScanner::Stream::hitId(hits_[hit_head_]);
    if (id < literals) pending_ids_.push_back(static_cast<int>(id));
    else pending_rewritten_ = true;  // a trigger: the record's text may hold literals its bytes do not
    ++hit_head_;
  }
  if (hit_head_ == hits_.size()) {
    hits_.clear();
    hit_head_ = 0;
  } else if (hit_head_ > 4096 && hit_head_ * 2 > hits_.size()) {
    hits_.erase(hits_.begin(), hits_.begin() + static_cast<long>(hit_head_));
    hit_head_ = 0;
  }
  return any;
}

void LineParser::CandidateLines::mark(uint64_t line_no) {
  if (!lines.empty() && lines.back() >= line_no) return;
  lines.push_back(line_no);
  if (lines.size() > kMaxCandidateLines) {
    forgotten = lines.front();
    lines.pop_front();
  }
}

bool LineParser::CandidateLines::in(uint64_t first, uint64_t last) const {
  if (first <= forgotten) return true;
  if (lines.empty() || lines.back() < first) return false;  // the common case
  // Records end at or near the newest lines: walk back past the lines after `last` (usually none
  // or one: the line that started the next record), then binary search only if still needed.
  auto it = lines.end();
  for (int steps = 0; steps < 4 && it != lines.begin(); ++steps) {
    const uint64_t v = *std::prev(it);
    if (v <= last) return v >= first;
    --it;
  }
  it = std::lower_bound(lines.begin(), it, first);
  return it != lines.end() && *it <= last;
}

void LineParser::feed(std::string_view bytes) {
  const char* data = bytes.data();
  const uint64_t base = fed_;
  fed_ += bytes.size();
  if (lit_stream_ && !lit_stream_->scan(bytes, &hits_)) {  // failed: deliver all
    lit_stream_.reset();
    err_stream_.reset();
  }
  if (err_stream_ && !err_stream_->scan(bytes, &err_hits_)) err_stream_.reset();  // failed: rules' hits only
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (raw_want_ > 0) {
      const size_t take = std::min(raw_want_, bytes.size() - pos);
      if (!raw_skip_) buf_.append(data + pos, take);
      pos += take;
      raw_want_ -= take;
      // Raw bytes (a binary journal field) belong to the entry of the line that asked for them.
      if (lit_stream_ && takeHits(base + pos)) rule_lines_.mark(line_no_);
      if (err_stream_ && takeErrorHits(base + pos)) err_lines_.mark(line_no_);
      line_ids_[line_no_ & 1].known = false;  // their literals are not the line's
      pending_ids_.clear();
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
    if (lit_stream_ && nl != nullptr)
      line_candidate_ = takeHits(base + static_cast<uint64_t>(static_cast<const char*>(nl) - data));
    if (err_stream_ && nl != nullptr)
      err_line_candidate_ = takeErrorHits(base + static_cast<uint64_t>(static_cast<const char*>(nl) - data));
    if (discarding_) {
      if (nl == nullptr) {  // still inside the over-long line: drop, never buffer
        if (lit_stream_) takeHits(fed_);
        if (err_stream_) takeErrorHits(fed_);
        return;
      }
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
  if (lit_stream_) {
    lit_stream_->close(&hits_);
    if (!lit_stream_->ok()) lit_stream_.reset();
    else line_candidate_ = takeHits(fed_);
  }
  if (err_stream_) {
    err_stream_->close(&err_hits_);
    if (!err_stream_->ok() || !lit_stream_) err_stream_.reset();
    else err_line_candidate_ = takeErrorHits(fed_);
  }
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

void LineParser::rotateLineIds(bool known) {
  // The literal ids of the line being dispatched; the previous line's slot stays (a joined record
  // is flushed by the line after it).
  LineIds& slot = line_ids_[line_no_ & 1];
  slot.ids.swap(pending_ids_);
  pending_ids_.clear();
  slot.known = known && !pending_rewritten_;
  pending_rewritten_ = false;
}

void LineParser::dispatchLine(std::string_view line) {
  ++line_no_;
  ++report_.lines;
  if (lit_stream_) rotateLineIds(true);
  if (line_candidate_) {
    rule_lines_.mark(line_no_);
    line_candidate_ = false;
  }
  if (err_line_candidate_) {
    err_lines_.mark(line_no_);
    err_line_candidate_ = false;
  }
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  onLine(stripGrepPrefix(line));
}

std::string_view LineParser::stripGrepPrefix(std::string_view line) {
  switch (format_) {
    case LogFormat::kSyslog: case LogFormat::kDmesgRaw: case LogFormat::kDmesgCtime: case LogFormat::kDmesgIso:
    case LogFormat::kConsole:
    case LogFormat::kJournalShortIso: case LogFormat::kFabricManager: break;
    default: return line;
  }
  if (grep_name_.empty()) {
    // Learned once, from the first line that has the prefix before this format's own stamp.
    if (grep_checked_ || line.empty()) return line;
    if (line_no_ > 64) {  // a file of grep output shows it from its first lines; stop looking
      grep_checked_ = true;
      return line;
    }
    const size_t n = grepFilePrefix(line);
    if (n == 0 || classifyLogLine(line) != format_ || classifyLogLine(line.substr(n)) != format_) return line;
    grep_checked_ = true;
    grep_name_.assign(line.substr(0, line.find(':')));
  }
  if (line == "--") return {};  // grep's separator between context groups
  const size_t n = grepNamedPrefix(line, grep_name_);
  return n ? line.substr(n) : line;
}

void LineParser::dispatchOversized() {
  ++line_no_;
  ++report_.lines;
  if (lit_stream_) rotateLineIds(false);
  line_candidate_ = false;
  err_line_candidate_ = false;
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

void LineParser::emit(LogRecord&& record, uint64_t last_line) {
  ++report_.records;
  const bool both_clocks = record.time_known && record.monotonic_ns >= 0;
  // Not handed on: the record is left as it was (a parser may reuse its buffers).
  const bool rule_hit = !lit_stream_ || rule_lines_.in(record.line, last_line);
  if (!rule_hit && !(err_stream_ && err_lines_.in(record.line, last_line)) && !(both_clocks && !both_clocks_seen_))
    return;
  // No rule can match a record none of whose lines held a rule literal: the rule engine may skip it.
  record.rule_literals_absent = !rule_hit;
  if (record.boot_id.empty() && !options_.boot_id.empty()) record.boot_id = options_.boot_id;
  both_clocks_seen_ = both_clocks_seen_ || both_clocks;
  // A one-line record of this line or the one before: the literals its bytes hold, so the rule
  // engine need not search its text again. (Its text is those bytes less a prefix and trailing
  // blanks, so a literal in the text is among them; a trigger hit, a rewrite, says nothing.)
  record.literals_of = 0;
  record.literal_ids.clear();
  if (lit_stream_ && record.line == last_line && last_line + 1 >= line_no_ && last_line <= line_no_) {
    const LineIds& slot = line_ids_[last_line & 1];
    if (slot.known && !slot.ids.empty()) {
      record.literal_ids.assign(slot.ids.begin(), slot.ids.end());
      if (record.literal_ids.size() > 1) {  // a literal found twice on the line is searched for once
        std::sort(record.literal_ids.begin(), record.literal_ids.end());
        record.literal_ids.erase(std::unique(record.literal_ids.begin(), record.literal_ids.end()),
                                 record.literal_ids.end());
      }
      record.literals_of = options_.literals->serial();
    }
  }
  ++report_.delivered;
  sink_(std::move(record));
}

std::optional<LogRecord> LineParser::foreignRecord(std::string_view line) {
  if (line.empty() || isSpace(line.front())) return std::nullopt;
  const LogFormat other = classifyLogLine(line);
  switch (other) {
    case LogFormat::kDmesgRaw:
    case LogFormat::kDmesgCtime:
    case LogFormat::kDmesgIso:
    case LogFormat::kConsole:
    case LogFormat::kKmsg:
    case LogFormat::kJournalShortIso:
    case LogFormat::kSyslog:
    case LogFormat::kFabricManager:
      if (other != format_) break;
      [[fallthrough]];
    default:
      return std::nullopt;
  }
  // Every record of the one line reaches us: whether it is handed on is emit's decision, over
  // the literal hits this stream found in the line.
  ParseOptions one = options_;
  one.literals = nullptr;
  std::optional<LogRecord> got;
  size_t records = 0;
  auto parser = makeStreamParser(other, std::move(one), [&](LogRecord&& r) {
    ++records;
    got = std::move(r);
  });
  parser->feed(line);
  parser->feed("\n");
  parser->finish();
  if (records != 1 || !got) return std::nullopt;
  got->line = line_no_;
  return got;
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
  last_line_ = record_.line;
}

bool Joiner::append(std::string_view text, const ParseOptions& options, uint64_t line_no) {
  if (lines_ + 1 > options.max_record_lines ||
      record_.text.size() + 1 + text.size() > options.max_record_bytes) {
    return false;
  }
  record_.text.push_back('\n');
  record_.text.append(text);
  ++lines_;
  last_line_ = line_no;
  return true;
}

LogRecord& Joiner::begin(uint64_t line_no) {
  resetRecord(record_);
  record_.line = line_no;
  active_ = true;
  lines_ = 1;
  last_line_ = line_no;
  return record_;
}

LogRecord Joiner::take() {
  active_ = false;
  lines_ = 0;
  return std::move(record_);
}

}  // namespace faultline::common::parse

// Shared machinery of the text-format parsers: splitting fed bytes into lines (any chunking,
// CRLF, over-long lines dropped without buffering them), the report counters and notes, and a
// one-record join buffer for formats with continuation lines.
//
// Counting contract (ParseReport): every physical line is counted once in `lines`. It is either
// part of an emitted record (its first line or a joined continuation) or counted in `skipped`
// — and then in exactly one of malformed / binary / oversized, or in none of them for lines that
// are legitimately not records (blank lines, journalctl "-- Boot ... --" markers, export entries
// without MESSAGE).
#pragma once

#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>
#include <string_view>

#include "common/parse/stream_parser.h"
#include "common/parse/text_util.h"

namespace faultline::common::parse {

class LineParser : public StreamParser {
 public:
  LineParser(LogFormat format, ParseOptions options, RecordSink sink);

  void feed(std::string_view bytes) final;
  void finish() final;
  const ParseReport& report() const final { return report_; }

 protected:
  // One complete physical line, without its "\n" / "\r\n". line_no_ is its 1-based number.
  virtual void onLine(std::string_view line) = 0;
  // Bytes requested with readRaw(); the view holds exactly the requested count.
  virtual void onRaw(std::string_view bytes) { (void)bytes; }
  // End of stream, after the last line: flush whatever is pending.
  virtual void onEnd() {}
  // Stream ended while raw bytes were still awaited.
  virtual void onRawTruncated() {}

  // Delivers the next n bytes through onRaw instead of as lines (journal export binary fields).
  // When n exceeds max_line_bytes the bytes are discarded instead and onRaw is not called;
  // returns false in that case.
  bool readRaw(size_t n);

  // Counts the record and hands it to the sink; with ParseOptions::literals only when a physical
  // line from record.line to the current line held a literal hit, or when it is the first record
  // with both clocks. A record is emitted at or after its last line, so that range covers all its
  // lines; lines in it that belong to other records only make the check looser, never wrong.
  void emit(LogRecord&& record) { emit(std::move(record), line_no_); }
  // The same for a record whose last physical line is known (a joined record flushed by the
  // line after it).
  void emit(LogRecord&& record, uint64_t last_line);
  // The light path: whether emit would hand on a record made of the current line alone (with
  // both clocks or not). When it would not, a parser may count the record with countDropped()
  // instead of building it: the same counters, no copy of the line.
  bool wouldHandOn(bool both_clocks) const {
    return !lit_stream_ || rule_lines_.in(line_no_, line_no_) || (err_stream_ && err_lines_.in(line_no_, line_no_)) ||
           (both_clocks && !both_clocks_seen_);
  }
  void countDropped() { ++report_.records; }
  // A parser whose record text is not made of its lines' bytes (IPMI SEL rewrites separators)
  // calls this: every record reaches the sink.
  void deliverAll() {
    lit_stream_.reset();
    err_stream_.reset();
  }
  enum class SkipKind { kOther, kMalformed, kBinary, kOversized };
  // Counts one skipped line (the current one unless line_no given) and notes why.
  void skipLine(SkipKind kind, std::string_view why, uint64_t line_no = 0);
  void addNote(uint64_t line_no, std::string_view why);
  // Applies checkText to a line. Returns false (and counts the line as binary) when it is not
  // text; otherwise *out is the line to parse (possibly repaired into scratch_).
  bool textLine(std::string_view line, std::string_view* out);
  // textLine, trailing blanks trimmed; an empty line is counted as skipped. False when the line
  // needs no more work.
  bool contentLine(std::string_view raw, std::string_view* out);

  // A line this format's stamp did not fit that is a whole record of another stamped system
  // format (a syslog line pasted into a dmesg file, a dmesg line in a journal text file): that
  // format's record, with its own stamp, numbered as the current line. nullopt for anything else
  // (continuations, unstamped text), which the caller joins or skips as before. The caller ends
  // its pending record first, then emits this one. Only lines that miss this format's stamp are
  // looked at, so a file of one format pays nothing.
  std::optional<LogRecord> foreignRecord(std::string_view line);

  const ParseOptions& options() const { return options_; }
  // UTC of a node-local wall-clock stamp (counted in report_.local_stamps).
  int64_t localToUtc(int64_t wall_ns) {
    ++report_.local_stamps;
    return options_.utcFromLocal(wall_ns);
  }

  ParseOptions options_;
  ParseReport report_;
  uint64_t line_no_ = 0;
  std::string scratch_;

 private:
  void dispatchLine(std::string_view line);
  void dispatchOversized();
  // Literal hits: consumes the hits ending at or before absolute offset `end` (the '\n' of the
  // line about to be dispatched); true when there was one.
  bool takeHits(uint64_t end);
  void rotateLineIds(bool known);
  // The error-word stream's hits (ParseOptions::error_words): only whether a line held one.
  bool takeErrorHits(uint64_t end);
  std::string_view stripGrepPrefix(std::string_view line);

  // Physical lines that held a hit of one stream, ascending and bounded (older ones forgotten
  // conservatively: a record reaching back past them counts as a candidate).
  struct CandidateLines {
    std::deque<uint64_t> lines;
    uint64_t forgotten = 0;  // lines up to here may have held hits that were pruned
    void mark(uint64_t line_no);
    bool in(uint64_t first, uint64_t last) const;
  };

  std::unique_ptr<LiteralScanner::Stream> lit_stream_;
  std::vector<uint64_t> hits_;  // absolute end offsets not yet assigned to a line, sorted
  size_t hit_head_ = 0;
  bool line_candidate_ = false;
  CandidateLines rule_lines_;  // lines holding a rule literal (or a trigger)
  std::unique_ptr<LiteralScanner::Stream> err_stream_;
  std::vector<uint64_t> err_hits_;  // as hits_, for the error words
  size_t err_head_ = 0;
  bool err_line_candidate_ = false;
  CandidateLines err_lines_;  // lines holding an error word (or a trigger)
  // Literal ids of the hits taken for the line about to be dispatched, and of the last two lines
  // (slot line_no & 1); known: no trigger hit, no raw bytes.
  struct LineIds {
    std::vector<int> ids;
    bool known = false;
  };
  std::vector<int> pending_ids_;
  bool pending_rewritten_ = false;
  LineIds line_ids_[2];
  bool both_clocks_seen_ = false;
  uint64_t fed_ = 0;  // bytes fed before the current chunk

  // grep's file-name prefix learned from the first line that carries it before this format's
  // stamp ("" = none yet); stripped from every line that starts with it.
  LogFormat format_;
  std::string grep_name_;
  bool grep_checked_ = false;

  RecordSink sink_;
  std::string buf_;           // partial line (or raw bytes) carried between feed() calls
  bool discarding_ = false;   // inside an over-long line, dropping bytes until '\n'
  size_t raw_want_ = 0;       // bytes still awaited in raw mode
  bool raw_skip_ = false;     // raw bytes are being discarded
};

// A record that may still grow by continuation lines (kernel stack traces, multi-line journal
// messages). Bounded by max_record_lines / max_record_bytes.
class Joiner {
 public:
  bool active() const { return active_; }
  LogRecord& record() { return record_; }
  void start(LogRecord&& record);
  // Appends "\n" + text (physical line line_no). False (nothing appended) when the bounds would
  // be exceeded.
  bool append(std::string_view text, const ParseOptions& options, uint64_t line_no);
  // The physical line last added (record().line after start()).
  uint64_t lastLine() const { return last_line_; }
  // Hands the record out and becomes inactive.
  LogRecord take();
  // The light path's pair: begin() starts a record in place, as a fresh LogRecord but keeping
  // the string buffers of the last one; release() ends it after the caller emitted record() (emit
  // leaves a record it does not hand on untouched, so most records cost no allocation).
  LogRecord& begin(uint64_t line_no);
  void release() {
    active_ = false;
    lines_ = 0;
  }

 private:
  LogRecord record_;
  bool active_ = false;
  size_t lines_ = 0;
  uint64_t last_line_ = 0;
};

// A fresh LogRecord in `r` that keeps its strings' buffers (per-line records without an
// allocation): every field set to its default in place.
inline LogRecord& resetRecord(LogRecord& r) {
#if defined(__GLIBCXX__) && defined(__x86_64__)
  static_assert(sizeof(LogRecord) == 208, "LogRecord changed: reset the new field here too");
#endif
  r.time_ns = 0;
  r.time_known = false;
  r.monotonic_ns = -1;
  r.boot_id.clear();
  r.host.clear();
  r.ident.clear();
  r.rank = -1;
  r.priority = -1;
  r.text.clear();
  r.line = 0;
  r.literals_of = 0;
  r.literal_ids.clear();
  r.rule_literals_absent = false;
  return r;
}

// Factories of the concrete parsers (one .cpp each).
std::unique_ptr<StreamParser> makeDmesgParser(LogFormat format, ParseOptions options,
                                              RecordSink sink);
std::unique_ptr<StreamParser> makeKmsgParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeJournalShortIsoParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeJournalJsonParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeJournalExportParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeSyslogParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeFabricManagerParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeApplicationParser(ParseOptions options, RecordSink sink);
std::unique_ptr<StreamParser> makeRejectingParser(LogFormat format, ParseOptions options,
                                                  RecordSink sink);

}  // namespace faultline::common::parse

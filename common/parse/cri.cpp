// CRI container logs (cri.h): partial lines joined per stream, whole lines handed to one
// application parser per stream (stdout and stderr interleave, a traceback stays on one), the
// records' line numbers mapped back to the file's physical lines.
#include "common/parse/cri.h"

#include <algorithm>
#include <deque>
#include <string>

#include "common/parse/line_parser.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {

bool parseCriLine(std::string_view line, CriLine* out) {
  IsoTime t;
  if (!parseIsoTime(line, false, &t) || !t.has_zone || t.length >= line.size() ||
      line[t.length] != ' ')
    return false;
  CriLine c;
  c.time_ns = t.ns;
  c.stamp = line.substr(0, t.length);
  std::string_view rest = line.substr(t.length + 1);
  if (startsWith(rest, "stdout ")) {
    rest.remove_prefix(7);
  } else if (startsWith(rest, "stderr ")) {
    c.is_stderr = true;
    rest.remove_prefix(7);
  } else {
    return false;
  }
  // TAGS: "P" or "F", then optional ":tag" pieces (the CRI logging design leaves room for more).
  if (rest.empty() || (rest[0] != 'P' && rest[0] != 'F')) return false;
  c.partial = rest[0] == 'P';
  size_t end = rest.find(' ');
  if (end == std::string_view::npos) end = rest.size();
  if (end > 1 && rest[1] != ':') return false;
  c.text = end < rest.size() ? rest.substr(end + 1) : std::string_view{};
  *out = c;
  return true;
}

size_t criPendingTail(std::string_view lines) {
  size_t open[2] = {std::string_view::npos,
                    std::string_view::npos};  // first unmatched P per stream
  size_t pos = 0;
  while (pos < lines.size()) {
    size_t nl = lines.find('\n', pos);
    if (nl == std::string_view::npos) nl = lines.size();
    CriLine c;
    if (parseCriLine(lines.substr(pos, nl - pos), &c)) {
      size_t& o = open[c.is_stderr];
      if (!c.partial)
        o = std::string_view::npos;
      else if (o == std::string_view::npos)
        o = pos;
    }
    pos = nl + 1;
  }
  const size_t first = std::min(open[0], open[1]);
  return first == std::string_view::npos ? 0 : lines.size() - first;
}

namespace {

class CriParser final : public LineParser {
 public:
  CriParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kCriLog, outerOptions(options), nullptr), out_(std::move(sink)) {
    for (int s = 0; s < 2; ++s)
      inner_[s] =
          makeApplicationParser(options, [this, s](LogRecord&& r) { deliver(s, std::move(r)); });
  }

 protected:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!textLine(raw, &line)) return;
    if (trimRight(line).empty()) {
      skipLine(SkipKind::kOther, "blank line");
      return;
    }
    CriLine c;
    if (!parseCriLine(line, &c)) {
      skipLine(SkipKind::kMalformed, "not a CRI log line (TIME STREAM P|F TEXT)");
      return;
    }
    Stream& st = streams_[c.is_stderr];
    if (st.first_line == 0) {
      st.first_line = line_no_;
      st.stamp.assign(c.stamp);
    }
    ++st.pieces;
    // A joined line over the line limit is dropped like any over-long line (never buffered whole).
    if (!st.over &&
        st.stamp.size() + 10 + st.text.size() + c.text.size() > options_.max_line_bytes) {
      st.over = true;
      st.text.clear();
    }
    if (!st.over) st.text.append(c.text);
    if (!c.partial) flush(c.is_stderr);
  }

  void onEnd() override {
    for (int s = 0; s < 2; ++s) {
      if (streams_[s].first_line != 0) {
        report_.truncated = true;
        addNote(streams_[s].first_line, "stream ended inside a partial (P) line");
        flush(s);
      }
      inner_[s]->finish();
      sync(s);
    }
  }

 private:
  struct Stream {
    std::string stamp;
    std::string text;
    uint64_t first_line = 0;     // physical line of the pending line's first piece; 0: none
    std::deque<uint64_t> lines;  // physical first line of each line handed on, by inner line
    uint64_t inner_dropped = 0;  // inner lines forgotten from the front of `lines`
    ParseReport seen;            // the inner report as last added to report_
    uint64_t pieces = 0;         // physical lines of the pending line
    bool over = false;           // the pending line is over the line limit: dropped
  };

  static ParseOptions outerOptions(ParseOptions o) {
    o.literals =
        nullptr;  // the inner parsers search the joined lines; pieces could split a literal
    return o;
  }

  void flush(int s) {
    Stream& st = streams_[s];
    if (st.over) {
      report_.oversized += st.pieces;
      report_.skipped += st.pieces;
      addNote(st.first_line,
              "CRI line joined from its P pieces is longer than the line limit: skipped");
      st.text.clear();
      st.stamp.clear();
      st.first_line = 0;
      st.pieces = 0;
      st.over = false;
      return;
    }
    line_buf_.clear();
    line_buf_.append(st.stamp)
        .append(s ? " stderr F " : " stdout F ")
        .append(st.text)
        .push_back('\n');
    st.lines.push_back(st.first_line);
    // Records are emitted at most max_record_lines after their first line: older entries can go.
    while (st.lines.size() > options_.max_record_lines + 64) {
      st.lines.pop_front();
      ++st.inner_dropped;
    }
    st.text.clear();
    st.stamp.clear();
    st.first_line = 0;
    st.pieces = 0;
    inner_[s]->feed(line_buf_);
    sync(s);
  }

  void deliver(int s, LogRecord&& r) {
    const Stream& st = streams_[s];
    if (r.line > st.inner_dropped && r.line - st.inner_dropped <= st.lines.size())
      r.line = st.lines[r.line - st.inner_dropped - 1];
    out_(std::move(r));
  }

  // Adds what the inner parser counted since the last call to this parser's report.
  void sync(int s) {
    const ParseReport& in = inner_[s]->report();
    ParseReport& seen = streams_[s].seen;
    report_.records += in.records - seen.records;
    report_.delivered += in.delivered - seen.delivered;
    report_.skipped += in.skipped - seen.skipped;
    report_.malformed += in.malformed - seen.malformed;
    report_.binary += in.binary - seen.binary;
    report_.oversized += in.oversized - seen.oversized;
    report_.local_stamps += in.local_stamps - seen.local_stamps;
    for (size_t i = seen.notes.size(); i < in.notes.size() && report_.notes.size() < 8; ++i)
      report_.notes.push_back((s ? "stderr " : "stdout ") + in.notes[i]);
    seen = in;
  }

  RecordSink out_;
  std::unique_ptr<StreamParser> inner_[2];
  Stream streams_[2];
  std::string line_buf_;
};

}  // namespace

std::unique_ptr<StreamParser> makeCriParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<CriParser>(std::move(options), std::move(sink));
}

}  // namespace faultline::common::parse

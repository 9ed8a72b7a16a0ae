// Application / rank logs: whatever a job's ranks, launcher and libraries wrote.
//
// Per line, peeled in any order until none is left: rank prefixes (srun --label "3: ", torchrun
// "[rank3]:" / "[default3]:", "[RANK 3]"), launcher prefixes (line_prefix.h: mpirun, pdsh,
// CRI, kubectl, compose, Ray) and one leading time stamp (ISO with ' ' or 'T', Python logging "[2024-06-01
// 10:00:01,123]", glog "E0601 10:00:01.123456 "); each recognised prefix is removed from the
// text and lands in rank / time_ns / priority. PyTorch c10 "[W0601 12:00:00.000 file.cpp:12]"
// stamps give time and priority but stay in the text (rules match on them). NCCL lines
// "host:pid:tid [dev] NCCL ..." give host and keep their text whole. Stamps without a zone are
// node-local time.
//
// Python tracebacks, "Traceback (most recent call last):" through the exception line (chained
// tracebacks included), become one record. Ranks interleave their output, so each rank (and the
// unprefixed stream, rank -1) has its own pending traceback.
//
// Open MPI's, PRRTE's and PMIx's help messages (show_help) come framed by two lines of exactly 74
// dashes; the lines between become one record, so that a message's fields ("Local host:", the
// node a lost daemon ran on) stay with its header. A frame that does not close within
// kHelpMaxLines lines (another program's ruler) gives its lines back one record each.
#include <algorithm>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/parse/line_grammar.h"
#include "common/parse/line_parser.h"
#include "common/parse/line_prefix.h"
#include "common/parse/time_util.h"

namespace faultline::common::parse {
namespace {

constexpr std::string_view kTracebackHeader = "Traceback (most recent call last):";
constexpr int kMaxRank = 10'000'000;

bool isChainMarker(std::string_view t) {
  return startsWith(t, "During handling of the above exception, another exception occurred") ||
         startsWith(t, "The above exception was the direct cause of the following exception");
}

// "[<word><digits>]:" with word "rank" or "default"; returns length (incl. one space after).
// torchrun writes "[default0]:" right before the child's line, while PyTorch's own "[rank0]: "
// has a space: only the latter is eaten, so traceback indentation survives either way.
size_t bracketRank(std::string_view s, std::string_view word, bool eat_space, int* rank) {
  if (s.size() < word.size() + 4 || s[0] != '[' || s.compare(1, word.size(), word) != 0) return 0;
  size_t i = 1 + word.size();
  if (i < s.size() && s[i] == ' ') ++i;  // "[RANK 3]"
  uint64_t v = 0;
  if (!readUint(s, &i, &v) || v > kMaxRank || i >= s.size() || s[i] != ']') return 0;
  ++i;
  if (i < s.size() && s[i] == ':') ++i;
  if (eat_space && i < s.size() && s[i] == ' ') ++i;
  *rank = static_cast<int>(v);
  return i;
}

// Strips rank prefixes from *s; returns the rank they name, or -1.
int stripRankPrefixes(std::string_view* s) {
  int rank = -1;
  bool explicit_rank = false;
  // srun --label: optional padding, the task id, ": " (or ':' at end of line).
  {
    size_t i = 0;
    while (i < s->size() && i < 8 && (*s)[i] == ' ') ++i;
    const size_t digits_start = i;
    uint64_t v = 0;
    if (readUint(*s, &i, &v) && i - digits_start <= 7 && v <= kMaxRank && i < s->size() &&
        (*s)[i] == ':' && (i + 1 == s->size() || (*s)[i + 1] == ' ')) {
      rank = static_cast<int>(v);
      s->remove_prefix(std::min(i + 2, s->size()));
    }
  }
  for (int round = 0; round < 3 && !s->empty() && s->front() == '['; ++round) {
    int r = -1;
    size_t n = bracketRank(*s, "rank", true, &r);
    if (n != 0) {
      rank = r;
      explicit_rank = true;
    } else if ((n = bracketRank(*s, "default", false, &r)) != 0) {
      if (!explicit_rank) rank = r;  // torchrun local rank: what the line says
    } else if ((n = bracketRank(*s, "RANK", true, &r)) != 0 || (n = bracketRank(*s, "Rank", true, &r)) != 0) {
      rank = r;
      explicit_rank = true;
    } else {
      break;
    }
    s->remove_prefix(n);
  }
  return rank;
}

// glog "E0601 10:00:01.123456" at s[0]; gives wall time (year supplied) and priority.
bool parseGlogStamp(std::string_view s, int year, int64_t* wall_ns, int* priority,
                    size_t* length) {
  if (s.size() < 14 || s[5] != ' ' || s[8] != ':' || s[11] != ':') return false;
  int prio;
  switch (s[0]) {
    case 'I': prio = 6; break;
    case 'W': prio = 4; break;
    case 'E': prio = 3; break;
    case 'F': prio = 2; break;
    default: return false;
  }
  const int month = readFixedDigits(s, 1, 2);
  const int day = readFixedDigits(s, 3, 2);
  const int h = readFixedDigits(s, 6, 2);
  const int m = readFixedDigits(s, 9, 2);
  const int sec = readFixedDigits(s, 12, 2);
  if (month < 1 || month > 12 || day < 1 || day > 31 || h < 0 || h > 23 || m < 0 || m > 59 ||
      sec < 0 || sec > 60) {
    return false;
  }
  size_t i = 14;
  int64_t frac = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && isDigit(s[i])) {
      if (digits < 9) {
        frac = frac * 10 + (s[i] - '0');
        ++digits;
      }
      ++i;
    }
    for (; digits < 9; ++digits) frac *= 10;
  }
  if (i < s.size() && s[i] != ' ' && s[i] != ']') return false;
  *wall_ns = civilToNs(year, month, day, h, m, sec, frac);
  *priority = prio;
  *length = i;
  return true;
}

// "host:pid:tid [dev] ..." (NCCL's prefix); returns the host.
std::string_view ncclHost(std::string_view s) {
  const size_t limit = std::min<size_t>(s.size(), 160);
  size_t sp = 0;
  while (sp < limit && s[sp] != ' ') ++sp;
  if (sp == limit || sp + 3 >= s.size() || s[sp + 1] != '[' || !isDigit(s[sp + 2])) return {};
  const std::string_view token = s.substr(0, sp);
  const size_t c1 = token.find(':');
  if (c1 == 0 || c1 == std::string_view::npos) return {};
  const size_t c2 = token.find(':', c1 + 1);
  if (c2 == std::string_view::npos || c2 == c1 + 1 || c2 + 1 >= token.size()) return {};
  for (size_t i = c1 + 1; i < token.size(); ++i) {
    if (i != c2 && !isDigit(token[i])) return {};
  }
  return token.substr(0, c1);
}

// The frame of Open MPI's show_help output (opal/util/show_help.c, prrte and openpmix the same).
constexpr std::string_view kHelpRule =
    "--------------------------------------------------------------------------";
static_assert(kHelpRule.size() == 74);
// Open MPI's longest help messages run to about 30 lines.
constexpr uint64_t kHelpMaxLines = 48;

// A help message being read: its lines, each already a record of its own (blank lines have no
// text), handed back one by one if the frame never closes.
struct HelpBlock {
  std::vector<LogRecord> lines;
  uint64_t opened = 0;  // physical line of the opening frame
};

struct Pending {
  enum class State { kFrames, kAfterException, kChained };
  LogRecord record;
  State state = State::kFrames;
  size_t lines = 1;
  size_t held_blanks = 0;  // blank lines after the exception line, not yet known to belong
  uint64_t last_line = 0;  // physical line last added
  std::string prefix_shape;  // unknown prefix the header came under ("" when none)
};

// A finished traceback waits for a possible chained one ("During handling of ..."); if its rank
// prints nothing for this many lines it is emitted, so records do not lag far behind the stream.
constexpr uint64_t kChainWaitLines = 64;

class ApplicationParser final : public LineParser {
 public:
  ApplicationParser(ParseOptions options, RecordSink sink)
      : LineParser(LogFormat::kApplication, std::move(options), std::move(sink)) {}

 private:
  void onLine(std::string_view raw) override {
    std::string_view line;
    if (!textLine(raw, &line)) return;
    line = trimRight(line);
    std::string_view t = line;
    // Reused line after line: a record not handed on (emit leaves it alone) keeps its buffer.
    LogRecord& rec = resetRecord(line_rec_);
    // Launchers stack prefixes ("10.0.0.7: [rank8]: ...", "<stamp> stderr F [default3]:..."):
    // peel them in any order until none is left.
    int rank = -1;
    bool stamped = false, transport_stamp = false;
    std::string_view prefix_host;
    // The size of t when the launcher and stamp steps last found nothing in it: a round whose
    // rank step leaves t so would only repeat them (the usual line has one rank prefix).
    size_t tried = std::string_view::npos;
    for (int round = 0; round < 6 && !t.empty(); ++round) {
      const size_t before = t.size();
      const int r = stripRankPrefixes(&t);
      if (r >= 0) rank = r;
      if (t.size() == tried) break;
      const size_t after_rank = t.size();
      LinePrefix lp;
      if (stripLauncherPrefix(&t, options_.known_hosts.get(), &lp)) {
        if (lp.rank >= 0) rank = lp.rank;
        if (!lp.host.empty()) prefix_host = lp.host;
      }
      if (!stamped && parseStamp(&t, &rec)) {
        stamped = true;
        // A container runtime's stamp is the transport's, not a line the program printed: it
        // does not end a traceback.
        transport_stamp = stripAfterStamp(&t);
      }
      if (t.size() == before) break;
      if (t.size() == after_rank) tried = t.size();
    }
    rec.rank = rank;

    if (!pending_.empty()) {
      expireWaiting();
      auto it = pending_.find(rank);
      if (it != pending_.end()) {
        // A traceback whose header came under an unknown prefix: the same prefix on its lines.
        const std::string& shape = it->second.prefix_shape;
        if (!shape.empty() && sameShape(t.substr(0, std::min(t.size(), shape.size())), shape))
          t.remove_prefix(shape.size());
        if (continuePending(it, t, stamped && !transport_stamp)) return;
      }
    }
    if (!help_.empty()) expireHelp();
    if (t == kHelpRule) {
      skipLine(SkipKind::kOther, "");
      if (auto b = help_.find(rank); b != help_.end()) {
        finishHelp(b);
      } else {
        help_[rank].opened = line_no_;
      }
      return;
    }
    if (auto b = help_.find(rank); b != help_.end()) {
      if (!t.empty()) {
        const std::string_view host = ncclHost(t);
        if (!host.empty()) rec.host.assign(host);
        else if (!prefix_host.empty()) rec.host.assign(prefix_host);
        rec.text.assign(t);
      }
      rec.line = line_no_;
      b->second.lines.push_back(rec);
      return;
    }
    if (t.empty()) {
      skipLine(SkipKind::kOther, "");
      return;
    }
    // The header under a prefix nothing above knows (a workflow tool's, a custom logger's): the
    // prefix's shape is learned and taken off the traceback's following lines.
    std::string prefix_shape;
    if (const size_t at = t.find(kTracebackHeader); at != std::string_view::npos && at > 0 && at <= 200 &&
                                                    !startsWith(t, kTracebackHeader)) {
      prefix_shape.assign(t.substr(0, at));
      t.remove_prefix(at);
    }
    if (startsWith(t, kTracebackHeader)) {
      if (!prefix_host.empty()) rec.host.assign(prefix_host);
      rec.text.assign(t);
      rec.line = line_no_;
      Pending& p = pending_[rank];
      p.record = std::move(rec);
      p.state = Pending::State::kFrames;
      p.lines = 1;
      p.held_blanks = 0;
      p.last_line = line_no_;
      p.prefix_shape = std::move(prefix_shape);
      return;
    }
    // A line without a literal hit is counted, not built (emit would not hand it on).
    if (!wouldHandOn(rec.time_known && rec.monotonic_ns >= 0)) {
      countDropped();
      return;
    }
    const std::string_view host = ncclHost(t);
    if (!host.empty()) rec.host.assign(host);
    else if (!prefix_host.empty()) rec.host.assign(prefix_host);
    rec.text.assign(t);
    rec.line = line_no_;
    emit(std::move(rec));
  }

  // Returns true when the line was taken by the rank's pending traceback.
  bool continuePending(std::unordered_map<int, Pending>::iterator it, std::string_view t,
                       bool stamped) {
    Pending& p = it->second;
    switch (p.state) {
      case Pending::State::kFrames:
        if (t.empty() || stamped) break;  // Python never prints these inside a traceback
        if (startsWith(t, kTracebackHeader)) break;
        if (!isSpace(t.front())) p.state = Pending::State::kAfterException;
        appendPending(it, t);
        return true;
      case Pending::State::kAfterException:
      case Pending::State::kChained:
        if (t.empty()) {
          ++p.held_blanks;
          p.last_line = line_no_;
          return true;
        }
        if (p.state == Pending::State::kAfterException ? isChainMarker(t)
                                                       : startsWith(t, kTracebackHeader)) {
          for (; p.held_blanks > 0; --p.held_blanks) appendPending(it, "");
          p.state = p.state == Pending::State::kAfterException ? Pending::State::kChained
                                                               : Pending::State::kFrames;
          appendPending(it, t);
          return true;
        }
        break;
    }
    finishPending(it);
    return false;
  }

  void expireWaiting() {
    for (auto it = pending_.begin(); it != pending_.end();) {
      const Pending& p = it->second;
      if (p.state != Pending::State::kFrames && line_no_ - p.last_line > kChainWaitLines) {
        auto next = std::next(it);
        finishPending(it);
        it = next;
      } else {
        ++it;
      }
    }
  }

  void appendPending(std::unordered_map<int, Pending>::iterator it, std::string_view t) {
    Pending& p = it->second;
    p.last_line = line_no_;
    if (p.lines + 1 <= options_.max_record_lines &&
        p.record.text.size() + 1 + t.size() <= options_.max_record_bytes) {
      p.record.text.push_back('\n');
      p.record.text.append(t);
      ++p.lines;
      return;
    }
    // Over the bounds: emit what we have, go on with a fresh record in the same state.
    LogRecord next;
    next.rank = p.record.rank;
    next.time_ns = p.record.time_ns;
    next.time_known = p.record.time_known;
    next.text.assign(t);
    next.line = line_no_;
    emit(std::move(p.record));
    p.record = std::move(next);
    p.lines = 1;
  }

  void finishPending(std::unordered_map<int, Pending>::iterator it) {
    report_.skipped += it->second.held_blanks;
    emit(std::move(it->second.record), it->second.last_line);
    pending_.erase(it);
  }

  // The message between the frames as one record: its first line's clocks, host and rank; blank
  // lines inside it stay in the text, blank lines around it are skipped.
  void finishHelp(std::unordered_map<int, HelpBlock>::iterator b) {
    std::vector<LogRecord>& lines = b->second.lines;
    auto filled = [](const LogRecord& r) { return !r.text.empty(); };
    const auto first = std::find_if(lines.begin(), lines.end(), filled);
    if (first == lines.end()) {
      giveBackHelp(b);
      return;
    }
    const auto last = std::find_if(lines.rbegin(), lines.rend(), filled).base() - 1;
    size_t bytes = 0;
    for (auto it = first; it <= last; ++it) bytes += it->text.size() + 1;
    if (static_cast<size_t>(last - first + 1) > options_.max_record_lines || bytes > options_.max_record_bytes) {
      giveBackHelp(b);
      return;
    }
    for (auto it = lines.begin(); it != lines.end(); ++it)
      if (it < first || it > last) skipLine(SkipKind::kOther, "", it->line);
    const uint64_t last_line = last->line;
    LogRecord joined = std::move(*first);
    for (auto it = first + 1; it <= last; ++it) {
      joined.text.push_back('\n');
      joined.text.append(it->text);
    }
    emit(std::move(joined), last_line);
    help_.erase(b);
  }

  // A frame that did not close: its lines, as they would have been without it.
  void giveBackHelp(std::unordered_map<int, HelpBlock>::iterator b) {
    for (LogRecord& r : b->second.lines) {
      const uint64_t line = r.line;
      if (r.text.empty()) skipLine(SkipKind::kOther, "", line);
      else emit(std::move(r), line);
    }
    help_.erase(b);
  }

  void expireHelp() {
    for (auto it = help_.begin(); it != help_.end();) {
      auto next = std::next(it);
      if (line_no_ - it->second.opened > kHelpMaxLines) giveBackHelp(it);
      it = next;
    }
  }

  void onEnd() override {
    std::vector<int> open;
    open.reserve(help_.size());
    for (const auto& [rank, b] : help_) open.push_back(rank);
    std::sort(open.begin(), open.end(), [this](int a, int b) { return help_.at(a).opened < help_.at(b).opened; });
    for (int rank : open) giveBackHelp(help_.find(rank));
    std::vector<int> ranks;
    ranks.reserve(pending_.size());
    for (const auto& [rank, p] : pending_) ranks.push_back(rank);
    std::sort(ranks.begin(), ranks.end(), [this](int a, int b) {
      return pending_.at(a).record.line < pending_.at(b).record.line;
    });
    for (int rank : ranks) finishPending(pending_.find(rank));
  }

  // Recognises one leading time stamp; strips it (and the space after) from *t.
  bool parseStamp(std::string_view* t, LogRecord* rec) {
    if (t->size() < 14) return false;
    const char c0 = t->front();
    IsoTime iso;
    if (isDigit(c0)) {
      if (parseIsoTime(*t, /*allow_space=*/true, &iso) &&
          (iso.length == t->size() || isSpace((*t)[iso.length]))) {
        rec->time_ns = iso.has_zone ? iso.ns : localToUtc(iso.ns);
        rec->time_known = true;
        t->remove_prefix(std::min(iso.length + 1, t->size()));
        return true;
      }
      return false;
    }
    if (c0 == '[') {
      const std::string_view inner = t->substr(1);
      if (!inner.empty() && isDigit(inner.front())) {
        // UCX and other loggers: "[1678901234.123456] " seconds since the epoch (UTC).
        int64_t epoch = 0;
        size_t epoch_len = 0;
        if (parseBracketMonotonic(*t, &epoch, &epoch_len) && epoch >= kEpochStampNs) {
          rec->time_ns = epoch;
          rec->time_known = true;
          size_t n = epoch_len;
          if (n < t->size() && (*t)[n] == ' ') ++n;
          t->remove_prefix(n);
          // UCX follows with "[host:pid:tid]".
          if (!t->empty() && t->front() == '[') {
            const size_t close = t->find(']');
            const std::string_view tag = t->substr(1, close == std::string_view::npos ? 0 : close - 1);
            const size_t c1 = tag.find(':');
            if (c1 != std::string_view::npos && c1 > 0 && tag.find(':', c1 + 1) != std::string_view::npos &&
                tag.find(' ') == std::string_view::npos) {
              rec->host.assign(tag.substr(0, c1));
              n = close + 1;
              while (n < t->size() && (*t)[n] == ' ') ++n;
              t->remove_prefix(n);
            }
          }
          return true;
        }
        if (parseIsoTime(inner, /*allow_space=*/true, &iso) && iso.length < inner.size() &&
            inner[iso.length] == ']') {
          rec->time_ns = iso.has_zone ? iso.ns : localToUtc(iso.ns);
          rec->time_known = true;
          size_t n = iso.length + 2;
          if (n < t->size() && (*t)[n] == ':') ++n;  // talosctl "[<stamp>]: "
          if (n < t->size() && (*t)[n] == ' ') ++n;
          t->remove_prefix(n);
          return true;
        }
        return false;
      }
      // PyTorch c10 "[W0601 12:00:00.000000000 file.cpp:12] ..." : time, priority, text kept.
      int64_t wall = 0;
      int prio = -1;
      size_t len = 0;
      if (parseGlogStamp(inner, options_.default_year, &wall, &prio, &len)) {
        rec->time_ns = localToUtc(wall);
        rec->time_known = true;
        rec->priority = prio;
        return true;
      }
      return false;
    }
    int64_t wall = 0;
    int prio = -1;
    size_t len = 0;
    if (parseGlogStamp(*t, options_.default_year, &wall, &prio, &len)) {
      rec->time_ns = localToUtc(wall);
      rec->time_known = true;
      rec->priority = prio;
      t->remove_prefix(std::min(len + 1, t->size()));
      stripGlogThreadAndSource(t);
      return true;
    }
    return false;
  }

  // The rest of glog's header after its stamp: "      1 health.go:186] " (thread id, file:line).
  static void stripGlogThreadAndSource(std::string_view* t) {
    size_t i = 0;
    while (i < t->size() && (*t)[i] == ' ') ++i;
    const size_t digits = i;
    while (i < t->size() && isDigit((*t)[i])) ++i;
    if (i == digits || i >= t->size() || (*t)[i] != ' ') return;
    size_t close = t->find("] ", i + 1);
    if (close == std::string_view::npos && !t->empty() && t->back() == ']') close = t->size() - 1;
    if (close == std::string_view::npos || close > i + 80) return;
    const std::string_view src = t->substr(i + 1, close - i - 1);
    const size_t colon = src.rfind(':');
    if (colon == std::string_view::npos || colon + 1 == src.size() || src.find(' ') != std::string_view::npos) return;
    for (char c : src.substr(colon + 1))
      if (!isDigit(c)) return;
    t->remove_prefix(std::min(close + 2, t->size()));
  }

  std::unordered_map<int, Pending> pending_;
  std::unordered_map<int, HelpBlock> help_;
  LogRecord line_rec_;
};

}  // namespace

std::unique_ptr<StreamParser> makeApplicationParser(ParseOptions options, RecordSink sink) {
  return std::make_unique<ApplicationParser>(std::move(options), std::move(sink));
}

}  // namespace faultline::common::parse

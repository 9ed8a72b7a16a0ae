#include "common/error_lexicon.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <unordered_set>

namespace faultline::common {

namespace {

// A word as the lexicon sees it: lower-cased into a small buffer; longer words are never in the
// lexicon and are kept as "long" (they still separate phrases). A masking placeholder ("<NUM>",
// "<*>") is the word kVariable.
struct Word {
  std::array<char, 24> buf;
  size_t len = 0;
  bool variable = false;
  bool is_long = false;
  // Followed at once by ':' and a digit ("0:3", a GPU:MIG index, a rank:local pair): a value's
  // first part, never a count on its own.
  bool joined_to_number = false;
  std::string_view view() const { return is_long ? std::string_view("\x01") : std::string_view(buf.data(), len); }
};

constexpr std::string_view kVariable = "\x02var";

bool isUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isLetter(char c) { return isUpper(c) || isLower(c); }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool wordChar(char c) { return isLetter(c) || isDigit(c); }
bool isHexDigit(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Words that say something failed on their own.
constexpr std::string_view kWords[] = {
    "error", "errors", "errored", "err", "errno", "fatal", "fail", "fails", "failed", "failure",
    "failures", "failing", "exception", "exceptions", "abort", "aborts", "aborted", "aborting",
    "killed", "killing", "panic", "panicked", "panicking", "timeout", "timeouts", "refused",
    "unreachable", "traceback", "segfault", "segfaulted", "fault", "faults", "faulted", "faulting",
    "denied", "cannot", "can't", "couldn't", "unable", "invalid", "corrupt", "corrupted",
    "corruption", "oom", "crash", "crashed", "crashes", "crashing", "died", "deadlock",
    "deadlocked", "hung", "hang", "hangs", "lockup", "stuck", "unresponsive", "critical", "crit",
    "emerg", "assert", "assertion", "illegal", "violation", "uncorrectable", "unrecoverable",
    "unexpected", "unavailable", "mismatch", "lost", "oops", "rejected", "degraded", "sigsegv",
    "sigabrt", "sigkill", "sigbus", "sigill", "sigfpe", "overrun", "exceeded", "exceeds", "evicted",
    "stall", "stalls", "stalled", "starved", "bug", "overheat", "overheating", "mismatched",
    "truncated", "unrecognized", "compromised", "poison", "bad", "interrupted", "readonly",
    // A request over what is there ("Process requirement exceeds available memory", a zone's pool
    // exhausted), parts of the input absent or of another release.
    "exceed", "exhausted", "missing", "incompatible", "expired",
    // A program declining to go on ("Refusing to split data ...", "mismatches the version that was
    // used to compile", "is unsupported by Numba"), a cloud's notice that the host goes away.
    "refusing", "mismatches", "unsupported", "imminent",
    // Installed versions that do not fit together (setuptools' VersionConflict, a resolver's
    // "dependency conflicts").
    "conflict", "conflicts",
    // Reports that are errors by definition: NVIDIA driver Xid / NVSwitch SXid events, BMC
    // processor error states.
    "xid", "sxid", "ierr", "caterr"};

// Words a zero count or "no" in front (or a zero after) takes back: "no errors", "errors: 0".
constexpr std::string_view kCountable[] = {
    "error", "errors", "err", "fail", "fails", "failed", "failure", "failures", "fault", "faults",
    "exception", "exceptions", "timeout", "timeouts", "crash", "crashes"};

// Words between a countable word and its count: "error_count=0", "rx_errors_total 0".
constexpr std::string_view kCounterWords[] = {"count", "counter", "counters", "counts", "cnt", "total", "num"};

// Phrases (two to four words) that say something failed though no word of theirs does.
struct Phrase {
  std::array<std::string_view, 4> w;
  size_t n;
};
constexpr Phrase kPhrases[] = {
    {{"timed", "out"}, 2},
    {{"timing", "out"}, 2},
    {{"could", "not"}, 2},
    {{"out", "of", "memory"}, 3},
    {{"no", "such", "file"}, 3},
    {{"no", "such", "process"}, 3},
    {{"no", "space", "left"}, 3},
    {{"connection", "reset"}, 2},
    {{"broken", "pipe"}, 2},
    {{"not", "permitted"}, 2},
    {{"no", "route", "to"}, 3},
    {{"not", "responding"}, 2},
    {{"not", "found"}, 2},
    {{"link", "down"}, 2},
    {{"core", "dumped"}, 2},
    {{"stale", "file", "handle"}, 3},
    {{"too", "many", "open"}, 3},
    {{"bad", "address"}, 2},
    {{"resource", "busy"}, 2},
    {{"terminate", "called"}, 2},
    {{"call", "trace"}, 2},
    {{"by", "signal"}, 2},
    {{"non", "zero"}, 2},
    {{"not", "enough"}, 2},
    {{"not", "valid"}, 2},
    {{"not", "present"}, 2},
    {{"not", "ready"}, 2},
    {{"not", "match"}, 2},
    {{"don't", "match"}, 2},
    {{"giving", "up"}, 2},
    {{"too", "old"}, 2},
    {{"too", "low"}, 2},
    {{"read", "only"}, 2},
    {{"is", "down"}, 2},
    {{"currently", "down"}, 2},
    {{"no", "device"}, 2},
    {{"no", "devices"}, 2},
    {{"no", "interface"}, 2},
    {{"no", "transport"}, 2},
    {{"no", "usable"}, 2},
    {{"machine", "check"}, 2},
    {{"thermal", "trip"}, 2},
    {{"non", "recoverable"}, 2},
    {{"null", "pointer"}, 2},
    {{"not", "listed"}, 2},                   // ollama: "server cpu_avx2 not listed in available servers"
    {{"more", "than", "the", "maximum"}, 4},  // a refused request: Toil's "requesting 64 cores, more than the maximum of 32"
    {{"not", "have", "sufficient"}, 3},       // EC2: "We currently do not have sufficient p2.xlarge capacity ..."
    {{"no", "domain", "decomposition"}, 3},   // GROMACS: "There is no domain decomposition for 54 ranks ..."
    {{"too", "many"}, 2},                     // "Too many LINCS warnings", "too many retries", "429 Too Many Requests"
    {{"not", "compatible"}, 2},               // "The engine plan file is not compatible with this version"
    {{"not", "exist"}, 2},                    // "does not exist", "do not exist"
    {{"not", "successful"}, 2},               // "ssh not successful for host"
    {{"not", "responded"}, 2},                // CIFS: "Server X has not responded in 180 seconds"
    {{"undefined", "symbol"}, 2},             // the dynamic loader: "libtorch_cuda.so: undefined symbol: ..."
    {{"not", "enabled"}, 2},                  // OCCA: "[CUDA] mode is not enabled, defaulting to [Serial] mode"
    {{"not", "supported"}, 2},                // "Operation not supported", xFormers' "`cutlassF` is not supported because:"
};

// The lexicon's words and the last words of its phrases, hashed once: a record's words are looked
// up, not compared with every entry (the template layer calls this on every unmatched record).
// Built on first use, immutable after, so safe to share between threads.
struct Index {
  std::unordered_set<std::string_view> words;
  std::unordered_set<std::string_view> phrase_ends;
  Index() {
    for (auto w : kWords) words.insert(w);
    for (const Phrase& p : kPhrases) phrase_ends.insert(p.w[p.n - 1]);
  }
};
const Index& index() {
  static const Index idx;
  return idx;
}

template <size_t N>
bool in(const std::string_view (&set)[N], std::string_view w) {
  for (auto s : set)
    if (s == w) return true;
  return false;
}

bool isNumberWord(const Word& w) {
  if (w.variable) return true;
  if (w.len == 0 || w.is_long) return false;
  for (size_t i = 0; i < w.len; ++i)
    if (w.buf[i] < '0' || w.buf[i] > '9') return false;
  return true;
}

bool isNonZeroValue(const Word& w) { return isNumberWord(w) && !(w.len == 1 && w.buf[0] == '0' && !w.variable); }

// The words whose next word is an exit value: "exit code N", "exit status N", "rc=N", "exit N".
bool exitValueFollows(std::string_view prev, std::string_view w) {
  if (w == "exit" || w == "exitcode" || w == "returncode" || w == "rc" || w == "exitstatus") return true;
  if ((w == "code" || w == "status" || w == "value") && (prev == "exit" || prev == "return" || prev == "with"))
    return true;
  return false;
}

class WordReader {
 public:
  explicit WordReader(std::string_view text) : text_(text) {}
  bool next(Word* w) {
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '<') {  // a placeholder: <NUM> <HEX> ... <*> <...>
        size_t close = text_.find('>', pos_);
        if (close != std::string_view::npos && close - pos_ <= 8 && close > pos_ + 1) {
          bool ok = true;
          for (size_t i = pos_ + 1; i < close; ++i) {
            char d = text_[i];
            if (!((d >= 'A' && d <= 'Z') || d == '*' || d == '.')) ok = false;
          }
          if (ok) {
            pos_ = close + 1;
            w->len = 0;
            w->is_long = false;
            w->variable = true;
            return true;
          }
        }
      }
      if (wordChar(c)) break;
      ++pos_;
    }
    if (pos_ >= text_.size()) return false;
    size_t start = pos_;
    // A hexadecimal literal ("0xc0000409", an exit status on Windows, a return code) is one
    // number, as the masker's <HEX> is.
    if (text_[pos_] == '0' && pos_ + 2 < text_.size() && (text_[pos_ + 1] == 'x' || text_[pos_ + 1] == 'X') &&
        isHexDigit(text_[pos_ + 2])) {
      size_t end = pos_ + 2;
      while (end < text_.size() && isHexDigit(text_[end])) ++end;
      if (end == text_.size() || !wordChar(text_[end])) {
        pos_ = end;
        w->len = 0;
        w->is_long = false;
        w->variable = true;  // a value, read as the masker's <HEX> placeholder is
        return true;
      }
    }
    // A word ends at a non-word byte, at '_' (CUDA_ERROR_INVALID, rx_errors), where digits
    // follow letters (LogXid119) and where case turns from lower to upper or from an upper run
    // to a capitalized word (RuntimeError, cudaErrorNoDevice, OOMKilled): identifiers name
    // their words that way.
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c == '_') break;
      if (pos_ > start && isDigit(c) && isLetter(text_[pos_ - 1])) break;
      if (pos_ > start && isUpper(c) && isLower(text_[pos_ - 1])) break;
      if (pos_ > start + 1 && isUpper(text_[pos_ - 1]) && isUpper(text_[pos_ - 2]) && isLower(c)) {
        --pos_;  // "OOMKilled": the K starts "Killed"
        break;
      }
      if (wordChar(c)) {
        ++pos_;
      } else if (c == '\'' && pos_ + 1 < text_.size() && isLetter(text_[pos_ + 1]) && pos_ > start) {
        ++pos_;  // can't, couldn't
      } else {
        break;
      }
    }
    size_t len = pos_ - start;
    w->joined_to_number = pos_ + 1 < text_.size() && text_[pos_] == ':' && isDigit(text_[pos_ + 1]);
    w->variable = false;
    w->is_long = len > w->buf.size();
    w->len = w->is_long ? 0 : len;
    for (size_t i = 0; i < w->len; ++i) w->buf[i] = lower(text_[start + i]);
    return true;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

bool carriesErrorLexicon(std::string_view text) {
  // A window of the last four words; phrases end at the newest.
  std::array<Word, 4> win{};
  size_t seen = 0;
  // A countable word waiting for its next word (a following 0 takes it back), and an exit
  // keyword waiting for its value.
  bool pending_countable = false, pending_timeout = false, pending_exit = false;
  WordReader reader(text);
  Word w;
  auto back = [&](size_t k) -> const Word& { return win[(seen - 1 - k) % win.size()]; };
  while (reader.next(&w)) {
    if (pending_countable && !w.variable && in(kCounterWords, w.view())) continue;  // "errors total 0"
    if (pending_countable) {
      pending_countable = false;
      bool zero = !w.variable && w.len == 1 && w.buf[0] == '0' && !w.joined_to_number;
      bool setting = pending_timeout && isNumberWord(w);
      if (!zero && !setting) return true;
    }
    pending_timeout = false;
    if (pending_exit) {
      pending_exit = false;
      if (isNonZeroValue(w)) return true;
    }
    win[seen % win.size()] = w;
    ++seen;
    std::string_view v = w.variable ? kVariable : w.view();
    std::string_view prev = seen >= 2 ? (back(1).variable ? kVariable : back(1).view()) : std::string_view();

    const Index& idx = index();
    if (idx.phrase_ends.count(v)) {
      for (const Phrase& p : kPhrases) {
        if (p.n > seen || p.w[p.n - 1] != v) continue;
        bool all = true;
        for (size_t k = 1; k < p.n && all; ++k) {
          const Word& b = back(k);
          all = !b.variable && b.view() == p.w[p.n - 1 - k];
        }
        if (all) return true;
      }
    }
    if (exitValueFollows(prev, v)) pending_exit = true;
    if (!idx.words.count(v)) continue;
    // "no error", "without errors", "0 errors"; a zero before a singular word is not a count
    // ("QID 0 timeout").
    bool plural = v.back() == 's';
    bool negated = seen >= 2 && !back(1).variable &&
                   (prev == "no" || prev == "without" || prev == "never" || (plural && (prev == "0" || prev == "zero")));
    if (in(kCountable, v)) {
      if (negated) continue;
      bool set_before = prev == "set" || prev == "setting" || prev == "default";
      if ((v == "timeout" || v == "timeouts") && set_before) continue;
      // Decided by the next word: "errors: 0" and "timeout 1800" are not failures.
      pending_countable = true;
      pending_timeout = v == "timeout" || v == "timeouts";
      continue;
    }
    if (!negated) return true;
  }
  return pending_countable;
}

std::vector<LiteralScanner::Expression> errorLexiconExpressions() {
  // Words with a shorter word of the list as their start add nothing ("err" finds "errors"):
  // a hit only says "look at this line".
  std::vector<std::string_view> words(std::begin(kWords), std::end(kWords));
  words.push_back("exit");
  words.push_back("return");
  std::vector<std::string_view> starts;
  for (auto w : words) {
    bool covered = false;
    for (auto o : words) covered = covered || (o.size() < w.size() && w.substr(0, o.size()) == o);
    if (!covered && std::find(starts.begin(), starts.end(), w) == starts.end()) starts.push_back(w);
  }
  // Three expressions (one automaton each is cheaper per byte than one per word): the words in
  // lower or upper case at a word start, capitalized anywhere, and the phrases in any case.
  std::string at_start, capitalized, phrases;
  for (auto w : starts) {
    std::string upper(w), cap(w);
    for (char& c : upper) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 'a' + 'A' : c);
    cap[0] = upper[0];
    ((at_start += at_start.empty() ? "" : "|") += std::string(w)) += "|" + upper;
    (capitalized += capitalized.empty() ? "" : "|") += cap;
  }
  for (const Phrase& p : kPhrases) {
    phrases += phrases.empty() ? "" : "|";
    for (size_t k = 0; k < p.n; ++k) (phrases += k ? "[ -]" : "") += std::string(p.w[k]);
  }
  return {{"(?:^|[^A-Za-z0-9])(?:" + at_start + ")", false},
          {"(?:" + capitalized + ")", false},
          {"(?:^|[^A-Za-z0-9])(?:" + phrases + ")", true}};
}

std::shared_ptr<const LiteralScanner> errorWordScanner() {
  static const std::shared_ptr<const LiteralScanner> scanner = [] {
    std::string error;
    return LiteralScanner::buildExpressions(errorLexiconExpressions(), &error);
  }();
  return scanner;
}

bool ErrorLineMemo::operator()(std::string_view line) {
  if (line.size() > 512) return carriesErrorLexicon(line);
  key_.clear();
  for (size_t i = 0; i < line.size();) {
    if (line[i] < '0' || line[i] > '9') {
      key_ += line[i++];
      continue;
    }
    size_t j = i;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9') ++j;
    key_ += (j - i == 1 && line[i] == '0') ? '0' : '1';
    i = j;
  }
  auto it = memo_.find(key_);
  if (it != memo_.end()) return it->second;
  if (memo_.size() >= max_entries_) {
    memo_.clear();
    bytes_ = 0;
  }
  const bool yes = carriesErrorLexicon(line);
  // A node's entry: the key's heap buffer (beyond the small-string size) and the node itself.
  bytes_ += (key_.size() > 15 ? key_.size() + 1 : 0) + sizeof(std::pair<const std::string, bool>) + 2 * sizeof(void*);
  memo_.emplace(key_, yes);
  return yes;
}

}  // namespace faultline::common

// The error lexicon: whether a log template (or a raw message) says that something went wrong.
//
// One half of issue 30's "failure-indicating line" (the other half, that the template is
// unusual, is decided elsewhere). Pure and thread-safe; the only allocation is its word index,
// built once on first use.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/parse/literal_scan.h"

namespace faultline::common {

// True when `text` holds, as whole words and in any case, one of the lexicon's words or phrases:
// error, fatal, fail / failed / failure, exception, abort / aborted, killed, panic, timeout /
// timed out, refused, unreachable, Traceback, segfault / Segmentation fault, denied, cannot /
// could not / unable to, invalid, corrupt, OOM / out of memory, hung / lockup / deadlock, crash,
// the common strerror texts (No such file or directory, Broken pipe, Connection reset, No route
// to host, No space left on device, Stale file handle, ...), a non-zero exit code or exit status
// ("exit code 1", "exit status <NUM>"; a masked value counts as non-zero, since the masker keeps
// a zero there as "0") and a death by signal.
//
// Not when the word is negated by a zero count around it: "no errors", "0 failures",
// "errors: 0", "without error"; nor "timeout" followed by a number (a setting: "timeout 1800").
// Words are runs of letters and digits (with an inner apostrophe: can't); identifiers are split
// into theirs at '_' and at case changes, so RuntimeError, CUDA_ERROR_INVALID_VALUE,
// cudaErrorNoDevice and OOMKilled all say error / killed, while "terror" and "errorless" do not.
// "error_count=0" is a zero count.
bool carriesErrorLexicon(std::string_view text);

// Expressions for a raw-byte prefilter (LiteralScanner::buildExpressions): a text that
// carriesErrorLexicon nearly always holds a match. Three: the lexicon's words (and "exit",
// "return" for exit values) in lower or upper case at a word start (after a byte that is no
// letter or digit, or at a line start); the same words capitalized anywhere (RuntimeError,
// OOMKilled); the phrases in any case, their words joined by one space or '-' ("read-only"). A
// word that starts with another of the list is left to that one ("err" finds "errors"). A word
// inside another ("default", "debug", "install") is no match, which keeps the lines that reach
// the lexicon few. Not seen: mixed case other than capitalized ("eRRor"), a phrase written with
// another separator ("not_found", two spaces, a line break), an exit value after a bare "rc" or
// "with code|status" ("rc=1", "ended with status 2").
std::vector<LiteralScanner::Expression> errorLexiconExpressions();

// errorLexiconExpressions() compiled once (on first use) and shared: the raw-byte prefilter
// the parsers take as ParseOptions::error_words, and a one-string search (literalsIn) for
// records that met no parser's prefilter (the agent's journal and kmsg records). Immutable,
// thread-safe. Null when Vectorscan refuses it (then no prefilter: callers ask the lexicon).
std::shared_ptr<const LiteralScanner> errorWordScanner();

// carriesErrorLexicon of one line, remembered by the line's shape: the line with each digit run
// but a lone "0" made "1" (the lexicon only tells zero from non-zero numbers, and lines of one
// shape repeat). Lines over 512 bytes are asked directly. Bounded: emptied when it holds
// max_entries shapes. Not thread-safe (one per collector).
class ErrorLineMemo {
 public:
  explicit ErrorLineMemo(size_t max_entries = size_t{1} << 16) : max_entries_(max_entries) {}
  bool operator()(std::string_view line);
  size_t size() const { return memo_.size(); }
  // Approximate heap bytes held (keys and table).
  size_t memoryBytes() const { return bytes_ + memo_.bucket_count() * sizeof(void*); }

 private:
  size_t max_entries_;
  size_t bytes_ = 0;
  std::unordered_map<std::string, bool> memo_;
  std::string key_;
};

}  // namespace faultline::common

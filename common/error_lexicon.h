// The error lexicon: whether a log template (or a raw message) says that something went wrong.
//
// One half of issue 30's "failure-indicating line" (the other half, that the template is
// unusual, is decided elsewhere). Pure and thread-safe; the only allocation is its word index,
// built once on first use.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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

// Literals for a raw-byte prefilter (a caseless LiteralScanner): a text that carriesErrorLexicon
// nearly always holds one of them as a substring, in any case. They are the lexicon's words, its
// phrases with their words joined by one space or by '-', and "exit" / "return" for exit values.
// Not seen by the prefilter: a phrase written with another separator ("not_found", two spaces,
// a line break) and an exit value after a bare "rc" or "with code|status" ("rc=1", "ended with
// status 2"). Distinct, none empty.
std::vector<std::string> errorLexiconLiterals();

}  // namespace faultline::common

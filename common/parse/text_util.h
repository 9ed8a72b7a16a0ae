// Byte-level helpers shared by the parsers: binary/UTF-8 checks and repair, escape decoding,
// whitespace trimming. Pure functions; repair output goes to a caller-owned scratch string so
// the common (clean) case never allocates.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace faultline::common::parse {

enum class TextVerdict {
  kClean,     // returned view is the input
  kRepaired,  // a few bad bytes replaced by '?' (or ANSI colour sequences dropped): view into scratch
  kBinary,    // NUL bytes, or too many control/invalid-UTF-8 bytes to be text: skip it
};

// Checks one line (or one journal field value) for bytes that cannot be text.
//
// Policy: any NUL byte makes it binary (NULs never occur in text logs; they mark garbage or a
// preallocated file tail). Other C0 controls (except tab, and '\n' when allow_newline) and
// invalid UTF-8 bytes are "bad": when more than 1/10 of the bytes (and at least 1 for lines
// shorter than 10) are bad the line is binary, otherwise each bad byte becomes '?'. ANSI CSI
// sequences (ESC '[' ... final byte, i.e. colour codes) are removed and are not bad.
TextVerdict checkText(std::string_view in, bool allow_newline, std::string* scratch,
                      std::string_view* out);

// Decodes "\xNN" escapes (as /dev/kmsg writes non-printable bytes) into out.
void unescapeKmsg(std::string_view in, std::string* out);

// Decodes rsyslog control-character escapes "#ooo" (3 octal digits, value < 0x20 or 0x7f):
// "#012" is '\n', "#011" is '\t'. Anything else is copied.
void unescapeRsyslog(std::string_view in, std::string* out);

inline bool isSpace(char c) { return c == ' ' || c == '\t'; }
inline bool isDigit(char c) { return c >= '0' && c <= '9'; }

inline std::string_view trimLeft(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && isSpace(s[i])) ++i;
  return s.substr(i);
}
inline std::string_view trimRight(std::string_view s) {
  size_t n = s.size();
  while (n > 0 && (isSpace(s[n - 1]) || s[n - 1] == '\r' || s[n - 1] == '\n')) --n;
  return s.substr(0, n);
}
inline bool startsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.compare(0, p.size(), p) == 0;
}

// Parses an unsigned decimal at s[*pos..]; advances *pos. False when no digit or overflow.
bool readUint(std::string_view s, size_t* pos, uint64_t* value);

}  // namespace faultline::common::parse

namespace faultline::common::parse {
// Like checkText, but never gives up: every byte that is not text (NUL included) becomes '?'.
// For values that must be kept whatever they hold (a journal MESSAGE given as bytes).
void repairText(std::string_view in, bool allow_newline, std::string* out);
}  // namespace faultline::common::parse

#include "common/parse/text_util.h"

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace faultline::common::parse {
namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when invalid.
size_t utf8SequenceLength(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  }
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  // Overlongs, surrogates and code points above U+10FFFF.
  if (b0 == 0xE0 && b1 < 0xA0) return 0;
  if (b0 == 0xED && b1 > 0x9F) return 0;
  if (b0 == 0xF0 && b1 < 0x90) return 0;
  if (b0 == 0xF4 && b1 > 0x8F) return 0;
  return n;
}

// Length of an ANSI CSI sequence at s[i] (ESC '[' params final), or 0.
size_t csiLength(std::string_view s, size_t i) {
  if (i + 1 >= s.size() || s[i + 1] != '[') return 0;
  size_t j = i + 2;
  while (j < s.size() && s[j] >= 0x20 && s[j] <= 0x3F) ++j;
  if (j < s.size() && s[j] >= 0x40 && s[j] <= 0x7E) return j + 1 - i;
  return 0;
}

inline bool plainByte(unsigned char c, bool allow_newline) {
  return (c >= 0x20 && c < 0x7F) || c == '\t' || (allow_newline && c == '\n');
}

// Length of the leading run of plain bytes: eight at a time while no byte of a word is below
// 0x20, 0x7F or above (a word with a tab or '\n' is checked byte by byte).
size_t plainPrefix(std::string_view in, bool allow_newline) {
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  size_t i = 0;
#if defined(__SSE2__)
  // Sixteen at a time: a signed compare flags bytes below 0x20 and 0x80 and above at once.
  const __m128i space = _mm_set1_epi8(0x20), del = _mm_set1_epi8(0x7F);
  while (i + 16 <= in.size()) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in.data() + i));
    const int mask = _mm_movemask_epi8(_mm_or_si128(_mm_cmplt_epi8(v, space), _mm_cmpeq_epi8(v, del)));
    if (mask == 0) {
      i += 16;
      continue;
    }
    i += static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    if (!plainByte(static_cast<unsigned char>(in[i]), allow_newline)) return i;
    ++i;  // a tab (or an allowed '\n')
  }
#endif
  while (i + 8 <= in.size()) {
    uint64_t w;
    std::memcpy(&w, in.data() + i, 8);
    const uint64_t low = (w - 0x20 * kOnes) & ~w & kHigh;  // a byte below 0x20
    const uint64_t x = w ^ (0x7F * kOnes);
    const uint64_t del = (x - kOnes) & ~x & kHigh;  // a 0x7F byte
    if (((w & kHigh) | low | del) == 0) {
      i += 8;
      continue;
    }
    const size_t end = i + 8;
    while (i < end && plainByte(static_cast<unsigned char>(in[i]), allow_newline)) ++i;
    if (i < end) return i;
  }
  while (i < in.size() && plainByte(static_cast<unsigned char>(in[i]), allow_newline)) ++i;
  return i;
}

}  // namespace

TextVerdict checkText(std::string_view in, bool allow_newline, std::string* scratch,
                      std::string_view* out) {
  // Fast path: pure printable ASCII, the overwhelmingly common case.
  size_t i = plainPrefix(in, allow_newline);
  if (i == in.size()) {
    *out = in;
    return TextVerdict::kClean;
  }
  // Slow path: validate and decide.
  size_t bad = 0;
  bool changed = false;
  for (size_t j = i; j < in.size();) {
    const auto c = static_cast<unsigned char>(in[j]);
    if (plainByte(c, allow_newline)) {
      ++j;
    } else if (c == 0) {
      return TextVerdict::kBinary;
    } else if (c >= 0x80) {
      const size_t n = utf8SequenceLength(in, j);
      if (n == 0) {
        ++bad;
        ++j;
      } else {
        j += n;
      }
    } else if (c == 0x1B && csiLength(in, j) > 0) {
      changed = true;
      j += csiLength(in, j);
    } else {
      ++bad;
      ++j;
    }
  }
  if (bad == 0 && !changed) {
    *out = in;
    return TextVerdict::kClean;
  }
  if (bad * 10 > in.size() || (in.size() < 10 && bad > 0 && bad * 2 > in.size())) {
    return TextVerdict::kBinary;
  }
  scratch->clear();
  scratch->append(in.data(), i);
  for (size_t j = i; j < in.size();) {
    const auto c = static_cast<unsigned char>(in[j]);
    if (plainByte(c, allow_newline)) {
      scratch->push_back(static_cast<char>(c));
      ++j;
    } else if (c >= 0x80) {
      const size_t n = utf8SequenceLength(in, j);
      if (n == 0) {
        scratch->push_back('?');
        ++j;
      } else {
        scratch->append(in.data() + j, n);
        j += n;
      }
    } else if (c == 0x1B && csiLength(in, j) > 0) {
      j += csiLength(in, j);
    } else {
      scratch->push_back('?');
      ++j;
    }
  }
  *out = *scratch;
  return TextVerdict::kRepaired;
}

namespace {
int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

void unescapeKmsg(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '\\' && i + 3 < in.size() && in[i + 1] == 'x') {
      const int hi = hexValue(in[i + 2]);
      const int lo = hexValue(in[i + 3]);
      if (hi >= 0 && lo >= 0) {
        out->push_back(static_cast<char>(hi * 16 + lo));
        i += 3;
        continue;
      }
    }
    out->push_back(in[i]);
  }
}

void unescapeRsyslog(std::string_view in, std::string* out) {
  out->clear();
  out->reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '#' && i + 3 < in.size() && in[i + 1] >= '0' && in[i + 1] <= '3' &&
        in[i + 2] >= '0' && in[i + 2] <= '7' && in[i + 3] >= '0' && in[i + 3] <= '7') {
      const int v = (in[i + 1] - '0') * 64 + (in[i + 2] - '0') * 8 + (in[i + 3] - '0');
      if (v < 0x20 || v == 0x7F) {
        out->push_back(static_cast<char>(v));
        i += 3;
        continue;
      }
    }
    out->push_back(in[i]);
  }
}

bool readUint(std::string_view s, size_t* pos, uint64_t* value) {
  size_t i = *pos;
  uint64_t v = 0;
  const size_t start = i;
  while (i < s.size() && isDigit(s[i])) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    ++i;
  }
  if (i == start) return false;
  *pos = i;
  *value = v;
  return true;
}

}  // namespace faultline::common::parse

namespace faultline::common::parse {
void repairText(std::string_view in, bool allow_newline, std::string* out) {
  std::string_view view;
  std::string scratch;
  switch (checkText(in, allow_newline, &scratch, &view)) {
    case TextVerdict::kClean:
      out->assign(in);
      return;
    case TextVerdict::kRepaired:
      *out = std::move(scratch);
      return;
    case TextVerdict::kBinary:
      break;
  }
  out->clear();
  out->reserve(in.size());
  for (char ch : in) {
    const auto c = static_cast<unsigned char>(ch);
    const bool ok = (c >= 0x20 && c < 0x7F) || c == '\t' || (allow_newline && c == '\n');
    out->push_back(ok ? ch : '?');
  }
}
}  // namespace faultline::common::parse

#include "common/template_mask.h"

#include <array>
#include <cstring>

namespace faultline::common {

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isLowerAlpha(char c) { return c >= 'a' && c <= 'z'; }
bool isAlpha(char c) { return isLowerAlpha(c) || (c >= 'A' && c <= 'Z'); }
bool isHexDigit(char c) { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool isSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
char toLower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

// Characters that end a core inside a whitespace token: "pid=42," is the cores "pid" and "42".
// ':' '/' '.' '-' are not among them: they are part of times, addresses, paths and host names;
// a core that is none of those is split on them later (maskCore's fallback).
bool isSeparator(char c) {
  switch (c) {
    case '=': case ',': case ';': case '(': case ')': case '[': case ']': case '{': case '}':
    case '<': case '>': case '"': case '\'': case '+': case '|': case '`': case '*': case '#':
    case '&': case '@': case '!': case '?': case '\\':
      return true;
    default:
      return false;
  }
}

size_t countDigits(std::string_view s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && isDigit(s[pos + n])) ++n;
  return n;
}

size_t countHex(std::string_view s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && isHexDigit(s[pos + n])) ++n;
  return n;
}

bool hasDigit(std::string_view s) {
  for (char c : s)
    if (isDigit(c)) return true;
  return false;
}

bool startsWithNoCase(std::string_view s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (toLower(s[i]) != prefix[i]) return false;
  return true;
}

// Length of a UUID (8-4-4-4-12 hex) at the start of s, after an optional GPU- / MIG- /
// MIG-GPU- prefix (NVIDIA's device UUIDs); 0 when there is none.
size_t uuidPrefixLength(std::string_view s) {
  size_t p = 0;
  if (startsWithNoCase(s, "mig-gpu-")) p = 8;
  else if (startsWithNoCase(s, "gpu-") || startsWithNoCase(s, "mig-")) p = 4;
  static constexpr std::array<size_t, 5> kGroups{8, 4, 4, 4, 12};
  for (size_t g = 0; g < kGroups.size(); ++g) {
    if (g > 0) {
      if (p >= s.size() || s[p] != '-') return 0;
      ++p;
    }
    if (countHex(s, p) < kGroups[g]) return 0;
    p += kGroups[g];
  }
  if (p < s.size() && isHexDigit(s[p])) return 0;
  return p;
}

bool isMac(std::string_view s) {
  if (s.size() != 17) return false;
  char sep = s[2];
  if (sep != ':' && sep != '-') return false;
  for (size_t i = 0; i < 17; ++i) {
    if (i % 3 == 2) {
      if (s[i] != sep) return false;
    } else if (!isHexDigit(s[i])) {
      return false;
    }
  }
  return true;
}

bool isPci(std::string_view s) {
  size_t a = countHex(s, 0);
  if (a >= 4 && a <= 8 && a < s.size() && s[a] == ':') {  // domain:bus:device[.function]
    size_t p = a + 1;
    if (countHex(s, p) != 2 || p + 2 >= s.size() || s[p + 2] != ':') return false;
    p += 3;
    if (countHex(s, p) != 2) return false;
    p += 2;
    if (p == s.size()) return true;
    return p + 2 == s.size() && s[p] == '.' && s[p + 1] >= '0' && s[p + 1] <= '7';
  }
  if (a != 2 || s.size() < 5 || s[2] != ':' || countHex(s, 3) != 2) return false;
  if (s.size() == 5) {  // bus:device, told from mm:ss by a hex letter
    for (char c : s)
      if (!isDigit(c) && c != ':') return true;
    return false;
  }
  return s.size() == 7 && s[5] == '.' && s[6] >= '0' && s[6] <= '7';
}

bool isIpv4(std::string_view s) {
  size_t p = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0) {
      if (p >= s.size() || s[p] != '.') return false;
      ++p;
    }
    size_t n = countDigits(s, p);
    if (n == 0 || n > 3) return false;
    p += n;
  }
  if (p < s.size() && s[p] == ':') {
    size_t n = countDigits(s, p + 1);
    if (n == 0) return false;
    p += 1 + n;
  }
  if (p < s.size() && s[p] == '/') {
    size_t n = countDigits(s, p + 1);
    if (n == 0 || n > 2) return false;
    p += 1 + n;
  }
  return p == s.size();
}

bool isIpv6(std::string_view s) {
  size_t colons = 0, hex = 0;
  bool double_colon = false;
  size_t end = s.size();
  if (size_t pct = s.find('%'); pct != std::string_view::npos) end = pct;  // fe80::1%eth0
  for (size_t i = 0; i < end; ++i) {
    char c = s[i];
    if (c == ':') {
      ++colons;
      if (i + 1 < end && s[i + 1] == ':') double_colon = true;
    } else if (isHexDigit(c)) {
      ++hex;
    } else if (c != '.') {
      return false;
    }
  }
  return hex > 0 && colons >= 2 && (double_colon || colons == 7);
}

// 2024-06-01, 2024/06/01, 2024-06-01T10:00:00.123+02:00, 10:00:00, 10:00:00.5, 10:00, 10:00Z.
bool isTime(std::string_view s) {
  size_t p = 0;
  bool date = false;
  if (countDigits(s, 0) == 4 && s.size() >= 10 && (s[4] == '-' || s[4] == '/') && countDigits(s, 5) == 2 &&
      s[7] == s[4] && countDigits(s, 8) == 2) {
    date = true;
    p = 10;
    if (p == s.size()) return true;
    if (s[p] != 'T' && s[p] != '_' && s[p] != '-') return false;
    ++p;
  }
  size_t h = countDigits(s, p);
  if (h < 1 || h > 2 || p + h >= s.size() || s[p + h] != ':') return false;
  p += h + 1;
  if (countDigits(s, p) != 2) return false;
  p += 2;
  if (p < s.size() && s[p] == ':') {
    if (countDigits(s, p + 1) != 2) return false;
    p += 3;
    if (p < s.size() && s[p] == '.') {
      size_t f = countDigits(s, p + 1);
      if (f == 0) return false;
      p += 1 + f;
    }
  } else if (!date && h != 2) {
    return false;  // "1:30" could be anything; a clock has two hour digits or seconds
  }
  if (p == s.size()) return true;
  if (s[p] == 'Z' && p + 1 == s.size()) return true;
  if (s[p] == '+' || s[p] == '-') {
    size_t z = countDigits(s, p + 1);
    if (z == 4 && p + 5 == s.size()) return true;
    if (z == 2 && p + 3 == s.size()) return true;
    if (z == 2 && p + 6 == s.size() && s[p + 3] == ':' && countDigits(s, p + 4) == 2) return true;
  }
  return false;
}

// 42, -3, 1.5e-3, 535.104.05, v2.18, and a unit of up to 7 letters (or % or /s): 12ms, 4GiB,
// 100%, 3.2GB/s.
bool isNumber(std::string_view s) {
  size_t p = 0;
  if (p < s.size() && (s[p] == '-' || s[p] == '+')) ++p;
  else if (p + 1 < s.size() && (s[p] == 'v' || s[p] == 'V') && isDigit(s[p + 1])) ++p;
  size_t n = countDigits(s, p);
  if (n == 0) return false;
  p += n;
  while (p + 1 < s.size() && s[p] == '.' && isDigit(s[p + 1])) p += 1 + countDigits(s, p + 1);
  if (p + 1 < s.size() && (s[p] == 'e' || s[p] == 'E')) {
    size_t q = p + 1;
    if (q < s.size() && (s[q] == '-' || s[q] == '+')) ++q;
    if (size_t e = countDigits(s, q); e > 0) p = q + e;
  }
  size_t unit = 0;
  while (p < s.size() && (isAlpha(s[p]) || s[p] == '%' || s[p] == '/')) {
    ++p;
    ++unit;
  }
  return p == s.size() && unit <= 7;
}

// 0x7f3a..., or 8+ hex digits that mix digits and letters (ids, hashes, addresses).
bool isHex(std::string_view s) {
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) return countHex(s, 2) == s.size() - 2;
  if (s.size() < 8 || countHex(s, 0) != s.size()) return false;
  bool letter = false, digit = false;
  for (char c : s) (isDigit(c) ? digit : letter) = true;
  return letter && digit;
}

// Node names as clusters name them: gpu-h01, ip-172-31-92-157, dgx-07, node042, nid001234, cn01,
// and dotted FQDNs whose first label has a digit (n01.cluster.local, ip-10-0-0-1.ec2.internal).
// Lower case only: "A100-SXM4-80GB" is a product, not a host.
bool isHost(std::string_view s) {
  if (s.empty() || !isLowerAlpha(s[0])) return false;
  size_t dots = 0, hyphens = 0, digits = 0;
  for (char c : s) {
    if (c == '.') ++dots;
    else if (c == '-') ++hyphens;
    else if (isDigit(c)) ++digits;
    else if (!isLowerAlpha(c)) return false;
  }
  if (digits == 0) return false;
  if (dots > 0) {
    if (dots < 2 || s.back() == '.' || s.find("..") != std::string_view::npos) return false;
    std::string_view first = s.substr(0, s.find('.'));
    std::string_view last = s.substr(s.rfind('.') + 1);
    for (char c : last)
      if (!isLowerAlpha(c)) return false;
    return hasDigit(first);
  }
  if (hyphens > 0) {
    if (s.back() == '-' || s.find("--") != std::string_view::npos) return false;
    return digits >= 2 && hasDigit(s.substr(s.rfind('-') + 1));
  }
  size_t letters = 0;
  while (letters < s.size() && isLowerAlpha(s[letters])) ++letters;
  size_t run = s.size() - letters;
  if (countDigits(s, letters) != run) return false;  // letters then digits only
  return run >= 4 || (run >= 2 && s[letters] == '0');
}

bool isPath(std::string_view s) {
  if (s.size() > 1 && s[0] == '/') return true;
  if (s.size() > 2 && (s.substr(0, 2) == "./" || s.substr(0, 2) == "~/")) return true;
  if (s.size() > 3 && s.substr(0, 3) == "../") return true;
  size_t slashes = 0;
  for (char c : s) slashes += c == '/';
  return slashes >= 2;
}

// Words after which a bare 0 stays literal: "exit code 0", "errors: 0", "rc=0".
bool zeroMatters(std::string_view lower_word) {
  // The last part of a snake_case name counts: slurm_rc, exit_code, error_count.
  if (size_t us = lower_word.rfind('_'); us != std::string_view::npos && us + 1 < lower_word.size())
    lower_word = lower_word.substr(us + 1);
  static constexpr std::string_view kWords[] = {
      "code", "status", "rc", "exitcode", "returncode", "exit", "errors", "error", "failures",
      "failed", "fails", "errs", "err", "faults", "returned", "count", "counter", "cnt", "total"};
  for (auto w : kWords)
    if (w == lower_word) return true;
  return false;
}

bool isPidWord(std::string_view lower_word) {
  return lower_word == "pid" || lower_word == "tid" || lower_word == "ppid" || lower_word == "pgid" ||
         lower_word == "process" || lower_word == "lwp";
}

struct MaskState {
  std::string* out;
  bool any_placeholder = false;
  bool kept_zero = false;
  // The last alphabetic core, lower-cased (empty when longer than the buffer or when a
  // non-alphabetic core came after it).
  std::array<char, 16> prev_word{};
  size_t prev_len = 0;

  std::string_view prevWord() const { return {prev_word.data(), prev_len}; }
  void put(TokenClass c) {
    out->append(placeholderOf(c));
    any_placeholder = true;
  }
  void notePrevious(std::string_view core) {
    prev_len = 0;
    if (core.size() > prev_word.size()) return;
    for (char c : core)
      if (!isAlpha(c) && c != '_') return;
    for (size_t i = 0; i < core.size(); ++i) prev_word[i] = toLower(core[i]);
    prev_len = core.size();
  }
};

void maskCore(std::string_view core, MaskState& st);

// A snake_case name with a digit in a word but no number of its own (mlx5_core, ib_mlx5_log):
// a name, not a variable. mlx5_0 and sm_80 have numbers.
bool isIdentifier(std::string_view core) {
  bool word = false;
  size_t start = 0;
  while (start <= core.size()) {
    size_t stop = core.find('_', start);
    if (stop == std::string_view::npos) stop = core.size();
    std::string_view part = core.substr(start, stop - start);
    if (!part.empty()) {
      if (countDigits(part, 0) == part.size() || !isAlpha(part[0])) return false;
      bool letters = true;
      for (char c : part) {
        if (!isAlpha(c) && !isDigit(c)) return false;
        letters = letters && isAlpha(c);
      }
      word = word || letters;
    }
    start = stop + 1;
  }
  return word;
}

// A core no class took whole: split on the first ':' whose right side is a variable ("PCI:
// 0000:3b:00", "gpu-h01:4242:4250"), else on ':' '/' '-' '_' '.', else mask the digits that end
// a word ("mlx5" -> "mlx<NUM>", "rank3" -> "rank<RANK>").
void maskComposite(std::string_view core, MaskState& st) {
  for (size_t i = core.find(':'); i != std::string_view::npos; i = core.find(':', i + 1)) {
    std::string_view right = core.substr(i + 1);
    if (right.empty()) break;
    TokenClass c = classifyToken(right);
    if (c != TokenClass::kNone) {
      maskCore(core.substr(0, i), st);
      st.out->push_back(':');
      st.put(c);
      return;
    }
  }
  for (char sep : {':', '/', '-', '_', '.'}) {
    size_t at = core.find(sep);
    if (at == std::string_view::npos) continue;
    if (sep == '_' && isIdentifier(core)) {
      st.out->append(core);
      return;
    }
    size_t start = 0;
    while (true) {
      size_t stop = core.find(sep, start);
      std::string_view part = core.substr(start, stop == std::string_view::npos ? stop : stop - start);
      if (!part.empty()) maskCore(part, st);
      if (stop == std::string_view::npos) break;
      st.out->push_back(sep);
      start = stop + 1;
    }
    return;
  }
  // A name with a hex tail of six or more mixing digits and letters: veth06ebf1, vethbcea12.
  size_t tail = core.size();
  while (tail > 0 && isHexDigit(core[tail - 1])) --tail;
  bool name_head = tail > 0;
  for (size_t i = 0; i < tail && name_head; ++i) name_head = isAlpha(core[i]);
  std::string_view hex_tail = core.substr(tail);
  if (name_head && hex_tail.size() >= 6 && hasDigit(hex_tail) && countDigits(hex_tail, 0) < hex_tail.size()) {
    st.out->append(core.substr(0, tail));
    st.put(TokenClass::kHex);
    return;
  }
  // Letters and digits: every digit run is a number (gpu3, nvme0n1p1, mlx5), after "rank" a rank.
  bool alnum = true;
  for (char c : core) alnum = alnum && (isAlpha(c) || isDigit(c));
  if (!alnum) {
    st.out->append(core);
    return;
  }
  for (size_t i = 0; i < core.size();) {
    size_t digits = countDigits(core, i);
    if (digits == 0) {
      st.out->push_back(core[i++]);
      continue;
    }
    bool rank = i == 4 && startsWithNoCase(core, "rank") && i + digits == core.size();
    st.put(rank ? TokenClass::kRank : TokenClass::kNum);
    i += digits;
  }
}

void maskCore(std::string_view core, MaskState& st) {
  if (core.empty()) return;
  if (!hasDigit(core) && core.find('/') == std::string_view::npos) {
    st.out->append(core);
    return;
  }
  if (size_t u = uuidPrefixLength(core); u > 0) {
    st.put(TokenClass::kUuid);
    maskCore(core.substr(u), st);
    return;
  }
  TokenClass c = classifyToken(core);
  if (c != TokenClass::kNone) {
    st.put(c);
    return;
  }
  maskComposite(core, st);
}

}  // namespace

std::string_view placeholderOf(TokenClass c) {
  switch (c) {
    case TokenClass::kNone: return "";
    case TokenClass::kNum: return "<NUM>";
    case TokenClass::kHex: return "<HEX>";
    case TokenClass::kIp: return "<IP>";
    case TokenClass::kMac: return "<MAC>";
    case TokenClass::kPci: return "<PCI>";
    case TokenClass::kPath: return "<PATH>";
    case TokenClass::kUrl: return "<URL>";
    case TokenClass::kUuid: return "<UUID>";
    case TokenClass::kHost: return "<HOST>";
    case TokenClass::kRank: return "<RANK>";
    case TokenClass::kPid: return "<PID>";
    case TokenClass::kTime: return "<TIME>";
  }
  return "";
}

TokenClass classifyToken(std::string_view s) {
  if (s.empty()) return TokenClass::kNone;
  if (s.find("://") != std::string_view::npos) return TokenClass::kUrl;
  if (uuidPrefixLength(s) == s.size()) return TokenClass::kUuid;
  if (isTime(s)) return TokenClass::kTime;
  if (isPath(s)) return TokenClass::kPath;
  if (!hasDigit(s)) return TokenClass::kNone;
  if (isMac(s)) return TokenClass::kMac;
  if (isPci(s)) return TokenClass::kPci;
  if (isIpv4(s)) return TokenClass::kIp;
  if (isIpv6(s)) return TokenClass::kIp;
  if (isHex(s)) return TokenClass::kHex;
  if (isNumber(s)) return TokenClass::kNum;
  if (isHost(s)) return TokenClass::kHost;
  return TokenClass::kNone;
}

void maskMessage(std::string_view message, MaskedMessage* out) {
  out->clear();
  MaskState st{&out->text};
  size_t i = 0, n = message.size();
  while (i < n) {
    while (i < n && isSpace(message[i])) ++i;
    if (i == n) break;
    size_t tok_start = i;
    while (i < n && !isSpace(message[i])) ++i;
    std::string_view tok = message.substr(tok_start, i - tok_start);

    if (!out->begin.empty()) out->text.push_back(' ');
    out->begin.push_back(static_cast<uint32_t>(out->text.size()));
    st.any_placeholder = false;
    st.kept_zero = false;
    size_t p = 0;
    while (p < tok.size()) {
      if (isSeparator(tok[p])) {
        out->text.push_back(tok[p++]);
        continue;
      }
      size_t q = p;
      while (q < tok.size() && !isSeparator(tok[q])) ++q;
      std::string_view core = tok.substr(p, q - p);
      // Leading ':' (after "]" in "[::1]:8080") and trailing ':' '.' go around the core:
      // "NVRM:" is the word NVRM, "rank3." is rank3.
      size_t lead = 0, trail = core.size();
      if (!isIpv6(core)) {  // "::1", "fe80::" keep their colons
        while (lead < core.size() && core[lead] == ':') ++lead;
        while (trail > lead && (core[trail - 1] == ':' || core[trail - 1] == '.')) --trail;
      }
      out->text.append(core.substr(0, lead));
      std::string_view inner = core.substr(lead, trail - lead);
      bool all_digits = !inner.empty() && countDigits(inner, 0) == inner.size();
      if (all_digits && p > 0 && tok[p - 1] == '[' && q < tok.size() && tok[q] == ']') {
        // "[3]" on its own is a rank (launcher prefixes); "python[4242]" is a pid.
        bool own = p == 1 || !(isAlpha(tok[p - 2]) || isDigit(tok[p - 2]) || tok[p - 2] == '_');
        st.put(own ? TokenClass::kRank : TokenClass::kPid);
      } else if (all_digits && isPidWord(st.prevWord())) {
        st.put(TokenClass::kPid);
      } else if (inner == "0" && zeroMatters(st.prevWord())) {
        out->text.push_back('0');
        st.kept_zero = true;
      } else {
        maskCore(inner, st);
      }
      if (!inner.empty()) st.notePrevious(inner);  // "exitcode : 0": the colon is no word
      out->text.append(core.substr(trail));
      p = q;
    }
    out->end.push_back(static_cast<uint32_t>(out->text.size()));
    out->variable.push_back(st.any_placeholder ? 1 : 0);
    out->pinned.push_back(st.kept_zero ? 1 : 0);
  }
}

std::string maskMessage(std::string_view message) {
  MaskedMessage m;
  maskMessage(message, &m);
  return std::move(m.text);
}

std::vector<std::string_view> templateTokens(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t j = i;
    while (j < text.size() && text[j] != ' ') ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

void maskTemplateText(std::string_view text, MaskedMessage* out) {
  out->clear();
  static const std::vector<std::string_view> kPlaceholders = [] {
    std::vector<std::string_view> v{"<*>", "<...>"};
    for (auto c : {TokenClass::kNum, TokenClass::kHex, TokenClass::kIp, TokenClass::kMac, TokenClass::kPci,
                   TokenClass::kPath, TokenClass::kUrl, TokenClass::kUuid, TokenClass::kHost, TokenClass::kRank,
                   TokenClass::kPid, TokenClass::kTime})
      v.push_back(placeholderOf(c));
    return v;
  }();
  for (std::string_view tok : templateTokens(text)) {
    if (!out->begin.empty()) out->text.push_back(' ');
    out->begin.push_back(static_cast<uint32_t>(out->text.size()));
    out->text.append(tok);
    out->end.push_back(static_cast<uint32_t>(out->text.size()));
    bool variable = false;
    for (auto p : kPlaceholders) variable = variable || tok.find(p) != std::string_view::npos;
    out->variable.push_back(variable ? 1 : 0);
    const size_t zero = tok.rfind('0');
    const bool pinned = tok == "0" || (zero != std::string_view::npos && zero + 1 == tok.size() && zero > 0 &&
                                       (tok[zero - 1] == '=' || tok[zero - 1] == ':'));
    out->pinned.push_back(pinned ? 1 : 0);
  }
}

}  // namespace faultline::common

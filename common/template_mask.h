// Masking of a log message's variable parts by token class, before template mining.
//
// A message is split on whitespace; inside each whitespace token the parts that vary from one
// occurrence of a message to the next (numbers, addresses, ids, paths, host names ...) are
// replaced by a placeholder naming their class, so "Xid (PCI:0000:3b:00): 79, pid=4242" becomes
// "Xid (PCI:<PCI>): <NUM>, pid=<PID>". Each class has its own placeholder so a template still
// reads like the message it stands for.
//
// Pure and deterministic; no allocation per call once a MaskedMessage has grown to its largest
// message. Not thread-safe per MaskedMessage (one per thread).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::common {

enum class TokenClass : uint8_t {
  kNone,
  kNum,   // 42, -3, 1.5e-3, 12ms, 4GiB, 100%, 535.104.05 (units and version dots included)
  kHex,   // 0x7f3a, long hex ids (>= 8 hex digits mixing digits and letters)
  kIp,    // IPv4 (with :port, /prefix), IPv6 ("::" forms or eight groups)
  kMac,   // 00:1b:21:3a:4f:5c
  kPci,   // 0000:3b:00.0, 3b:00.0, 3b:00
  kPath,  // /abs/path, ./rel, ~/x, a/b/c (two or more slashes)
  kUrl,   // scheme://...
  kUuid,  // 8-4-4-4-12 hex, with a GPU- / MIG- prefix or none
  kHost,  // node-like names: gpu-h01, ip-172-31-9-15, node042, nid001234, n01.cluster.local
  kRank,  // rank3, a standalone [3]
  kPid,   // pid=1234, pid 1234, python[1234]
  kTime,  // 2024-06-01, 2024-06-01T10:00:00Z, 10:00:00.123, 10:00
};

// "<NUM>", "<HEX>", ...; "" for kNone.
std::string_view placeholderOf(TokenClass c);

// The class a whole string belongs to (no context: kRank and kPid need their neighbours and are
// only given by maskMessage). kNone when it is no variable.
TokenClass classifyToken(std::string_view core);

// A message after masking: its tokens in order, each with whether it holds a placeholder.
struct MaskedMessage {
  std::string text;                // tokens joined by one space
  std::vector<uint32_t> begin;     // token i is text[begin[i], end[i])
  std::vector<uint32_t> end;
  std::vector<uint8_t> variable;   // 1: the token holds at least one placeholder
  std::vector<uint8_t> pinned;     // 1: the token holds a zero kept literal ("code 0")

  size_t size() const { return begin.size(); }
  std::string_view token(size_t i) const {
    return std::string_view(text).substr(begin[i], end[i] - begin[i]);
  }
  void clear() {
    text.clear();
    begin.clear();
    end.clear();
    variable.clear();
    pinned.clear();
  }
};

// Masks `message` into *out (cleared first). Whitespace (space, tab, CR, LF, VT, FF) separates
// tokens; runs of it count as one. A zero after a count or status word ("exit code 0",
// "errors: 0") stays "0": zero and non-zero mean different things there.
void maskMessage(std::string_view message, MaskedMessage* out);

// Convenience: the masked text alone.
std::string maskMessage(std::string_view message);

// The tokens of a template's text (MaskedMessage::text, Template::text): runs of non-space bytes.
std::vector<std::string_view> templateTokens(std::string_view text);

// A template's text as another miner made it (Template::text: an agent's, shipped) read back as
// the MaskedMessage its lines would have given: its tokens as they are, variable where one holds a
// placeholder ("<NUM>" ... "<TIME>", "<*>", "<...>"), pinned where it is a kept zero ("0" alone
// or after '=' / ':'). Masking the text again would not do: a placeholder's letters are no
// variable to the masker. Into *out (cleared first).
void maskTemplateText(std::string_view text, MaskedMessage* out);

}  // namespace faultline::common

// The submatch search of a rule's pattern over the match RE2 already found.
//
// RE2 finds where a pattern matches with its DFA (fast), but the groups of that match come from
// a second, anchored search over it, and for most rule patterns (a lazy `[^\n]*? on ` gap, an
// optional word before a literal) that is RE2's BitState: ~200 instructions a byte of the match
// (kernel.edac_ce: ~13 k of the ~17 k a match costs). SpanCapture is that second search for the
// RE2 syntax rule patterns use, as a small backtracking program over bytes: given the span
// [begin, end) of RE2's match, it explores the parses of text[begin, end) in the priority order
// RE2 defines (leftmost-first: alternatives left to right, greedy repeats longest first, lazy
// ones shortest first) and takes the first that ends at `end` — what RE2's anchored full-match
// submatch search returns. search() finds the match itself as RE2's unanchored search would (the
// leftmost start, its first parse), sparing RE2's reverse DFA. Patterns outside the subset are not
// compiled (null); a text holding a byte >= 0x80 (UTF-8 decoding would matter), a span over 64 KiB
// or a search past its step budget is left undecided: RE2 answers those.
// tests/common/rule_engine_capture_test.cpp compares it with RE2.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

namespace faultline::common {

class SpanCapture {
 public:
  // Null when the pattern uses what this does not implement (flags other than i and m, flags
  // turned off, Unicode or POSIX classes, \x/\p/\Q and other escapes, a non-ASCII byte, a loop over
  // something that can match empty) or would need more than a few thousand instructions.
  static std::unique_ptr<const SpanCapture> compile(std::string_view pattern);

  // Capturing groups, numbered as RE2 numbers them.
  int groups() const { return groups_; }

  // The groups of the leftmost-first parse of text[begin, end) as a whole: out[2k], out[2k+1] the
  // offsets of group k in `text` (-1, -1: it took no part; group 0 is [begin, end)); out holds
  // 2 * (groups() + 1) ints. ^, $ and \b see the bytes around the span. False: undecided (a
  // byte >= 0x80 in the span, a span over 64 KiB, no parse, or the step budget spent).
  bool capture(std::string_view text, size_t begin, size_t end, int* out) const;

  // RE2's unanchored match in `text` and its groups, as capture() gives them (out[0], out[1]: the
  // match). False: no match, or undecided (a byte >= 0x80 in the text, the step budget spent).
  bool search(std::string_view text, int* out) const;

 private:
  enum Op : uint8_t { kChar, kClass, kStar, kSplit, kJump, kSave, kAssert, kMatch };
  enum Assert : uint8_t {
    kBeginText,
    kEndText,
    kBeginLine,
    kEndLine,
    kWordBoundary,
    kNotWordBoundary
  };
  struct Inst {
    Op op;
    uint8_t arg;  // kChar: the byte; kAssert: an Assert; kSave: the slot; kStar: 1 greedy, 0 lazy
    int x = 0;    // kSplit/kJump: the preferred target; kClass/kStar: the class's index
    int y = 0;    // kSplit: the other target; kStar: 1 + the literal byte after it, or 0
    int id = 0;   // kSplit/kStar: its number, for the visited states
  };
  struct Class {
    uint64_t bits[4] = {0, 0, 0, 0};
    bool has(uint8_t c) const { return (bits[c >> 6] >> (c & 63)) & 1; }
  };
  bool run(std::string_view text, size_t begin, size_t end, bool whole, int* out) const;
  static int stopBefore(const Inst& in, const unsigned char* t, int lo, int q);
  int stopAfter(const Inst& in, const unsigned char* t, int from, int end) const;
  friend struct SpanCaptureCompiler;
  std::vector<Inst> prog_;
  std::vector<Class> classes_;
  int groups_ = 0;
  int splits_ = 0;
  Class first_;  // the bytes a match can begin with
  Class firstBytes() const;
};

}  // namespace faultline::common

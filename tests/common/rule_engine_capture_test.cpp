// SpanCapture (common/rule_engine_capture.h) against RE2: for a text RE2 matches, the groups
// SpanCapture finds over RE2's match, and the match and groups of its own search of the text,
// must be RE2's own, exactly; where RE2 finds no match, neither does its search. Checked on every shipped
// rule's examples and mutations of them, on patterns built to hit the priority rules (greedy and
// lazy repeats, alternatives, counted repeats, flags, anchors and word boundaries at the span's
// edges) over random texts, and through the engine (a span it leaves to RE2).
#include <catch2/catch.hpp>

#include <algorithm>

#include <re2/re2.h>

#include <string>
#include <vector>

#include "common/rule_engine.h"
#include "common/rule_engine_capture.h"
#include "common/rule_set.h"

using namespace faultline::common;

namespace {

struct Rng {
  uint64_t x = 88172645463325252ull;
  uint64_t next() { return x ^= x << 13, x ^= x >> 7, x ^= x << 17; }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
};

// Groups as offsets, -1 for a group that took no part.
using Offsets = std::vector<int>;

std::optional<Offsets> re2Groups(const RE2& re, std::string_view text) {
  const int n = re.NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> g(static_cast<size_t>(n));
  if (!re.Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED, g.data(), n))
    return std::nullopt;
  Offsets out;
  for (const auto& s : g) {
    out.push_back(s.data() ? static_cast<int>(s.data() - text.data()) : -1);
    out.push_back(s.data() ? static_cast<int>(s.data() - text.data() + s.size()) : -1);
  }
  return out;
}

struct Tally {
  size_t compared = 0, decided = 0, searched = 0;
};

// If RE2 matches `text`, SpanCapture over RE2's match gives RE2's groups (or leaves it undecided),
// and so does its own search of the text; if RE2 does not, neither does the search.
void compareOn(const RE2& re, const SpanCapture& sc, std::string_view text, Tally* tally) {
  INFO("pattern " << re.pattern() << "\ntext    " << text);
  const auto want = re2Groups(re, text);
  Offsets got(2 * static_cast<size_t>(sc.groups() + 1));
  const bool found = sc.search(text, got.data());
  if (!want) {
    CHECK_FALSE(found);
    return;
  }
  // Bytes above 0x7f are RE2's to decide (SpanCapture may leave them undecided); whatever it does
  // decide must still be RE2's answer.
  const bool ascii = std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
  if (ascii) ++tally->compared;
  if (found) {
    if (ascii) ++tally->searched;
    CHECK(got == *want);
  }
  if (!sc.capture(text, static_cast<size_t>((*want)[0]), static_cast<size_t>((*want)[1]), got.data())) return;
  if (ascii) ++tally->decided;
  CHECK(got == *want);
}

}  // namespace

TEST_CASE("span capture: RE2's groups on every shipped rule's examples and mutations of them", "[capture]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.errors.empty());
  Rng rng;
  Tally tally;
  size_t rules = 0, compiled = 0;
  for (const auto& r : loaded.rules->rules) {
    if (!r.regex || !r.regex->ok()) continue;
    ++rules;
    const auto sc = SpanCapture::compile(r.pattern);
    if (!sc) continue;
    ++compiled;
    REQUIRE(sc->groups() == r.regex->NumberOfCapturingGroups());
    std::vector<std::string> texts = r.match_examples;
    texts.insert(texts.end(), r.no_match_examples.begin(), r.no_match_examples.end());
    const size_t originals = texts.size();
    for (size_t k = 0; k < originals; ++k) {
      // Mutations: a byte dropped, doubled or replaced by one the pattern uses; a prefix and a
      // suffix (the bytes around the match: ^, $, \b).
      for (int m = 0; m < 24; ++m) {
        std::string t = texts[k];
        if (t.empty()) break;
        const size_t at = rng.below(t.size());
        switch (m % 4) {
          case 0: t.erase(at, 1); break;
          case 1: t.insert(at, 1, t[at]); break;
          case 2: t[at] = r.pattern[rng.below(r.pattern.size())]; break;
          default: t = std::string(1 + rng.below(3), " x\n_"[rng.below(4)]) + t + std::string(rng.below(3), " y\n("[rng.below(4)]);
        }
        texts.push_back(std::move(t));
      }
    }
    for (const auto& t : texts) compareOn(*r.regex, *sc, t, &tally);
  }
  // The subset covers the shipped rules (the fabric manager rule has a non-ASCII apostrophe).
  CHECK(compiled + 2 > rules);
  CHECK(tally.compared > 5000);
  CHECK(tally.decided == tally.compared);  // every ASCII text, none near the step budget
  CHECK(tally.searched == tally.compared);
}

TEST_CASE("span capture: priority rules of RE2 on random texts", "[capture]") {
  const char* patterns[] = {
      // lazy and greedy gaps before a capture; the lazy one takes the first place the rest fits
      R"(CE(?:[^\n]*? on (?P<loc>[^\s(]+))?)",
      R"(CE(?:[^\n]* on (?P<loc>[^\s(]+))?)",
      R"(a(?P<x>[ab]*?)(?P<y>b+)(?P<z>a?)$)",
      R"((?P<x>a|ab)(?P<y>c|bcd)(?P<z>d*))",
      R"((?P<x>ab|a)(?P<y>bcd|c)?)",
      // counted repeats: nested optionals, greedy and lazy, with a group inside (its last turn)
      R"((?:(?P<g>[ab])c){1,3}?(?P<rest>[abc]*))",
      R"((?:(?P<g>[ab])c){1,3}(?P<rest>[abc]*))",
      R"(x(?P<n>[0-9]{2,4})(?P<m>[0-9]*))",
      R"(x(?P<n>[0-9]{2,})(?P<m>[0-9]+))",
      R"((?P<a>a{0,2}?)(?P<b>a*))",
      // an optional body that can match empty (NCCL's prefix)
      R"((?:(?P<h>[a-c]+):(?:[^\n]*?)?)?(?P<t>b+))",
      R"((?:,? ?(?P<d>[^\n]*))?)",
      // anchors and word boundaries see the bytes around the match
      R"((?:^|\s)(?P<w>ab+)\b)",
      R"(\b(?P<w>[a-c]+)\B(?P<v>[a-c]*)$)",
      R"((?m)^(?P<line>[abc ]+)$)",
      R"((?:(?m:^)[ \t]*(?P<k>a+)|b(?P<k2>c+)))",
      // flags and classes
      R"((?i)(?P<x>ab[c-e]+)(?i:X)(?P<y>[^a]?))",
      R"((?i:[^b]+)(?P<x>B+))",
      R"([]a-]+(?P<x>[^]a\n]*)(?P<y>\s*)(?P<z>\S*))",
      R"((?P<x>[\w.]+)(?P<y>\W+)(?P<z>\d*)(?P<v>\D?))",
      R"((?P<x>.+?)(?P<y>\.)(?P<z>.*))",
      R"((?P<x>(?:a|b)+?)(?P<y>(?:ab|ba)*)(?P<z>a|b)?)",
  };
  // Small alphabets so that the interesting cases (several parses of one match) are common.
  const std::string alphabet = "aabbcCdeAB x0123 \n\t\v()o.n,_:";
  Rng rng;
  Tally tally;
  for (const char* p : patterns) {
    RE2 re(p);
    REQUIRE(re.ok());
    const auto sc = SpanCapture::compile(p);
    INFO(p);
    REQUIRE(sc);
    REQUIRE(sc->groups() == re.NumberOfCapturingGroups());
    for (int k = 0; k < 3000; ++k) {
      std::string t;
      for (size_t n = rng.below(24); n > 0; --n) t += alphabet[rng.below(alphabet.size())];
      if (k % 3 == 0) t = "CE memory error on " + t;
      compareOn(re, *sc, t, &tally);
    }
  }
  CHECK(tally.compared > 20000);
  CHECK(tally.decided == tally.compared);
  CHECK(tally.searched == tally.compared);
}

TEST_CASE("span capture: what it does not implement is not compiled, a non-ASCII span is left undecided", "[capture]") {
  for (const char* p : {"(?s:.)", R"(\pL)", "[[:alpha:]]", "(a*)*", "(?:a?)+", "(?-i:a)", R"(\x41)", "é", "(?U)a*",
                        "[é]", R"(\Qa\E)", "(?P=x)", R"(\1)"})
    CHECK_FALSE(SpanCapture::compile(p));
  const auto sc = SpanCapture::compile(R"(on (?P<loc>\S+))");
  REQUIRE(sc);
  const std::string text = "CE on DIMM_\xc3\xa9";  // "é": RE2 takes a UTF-8 character as one
  std::vector<int> out(4);
  CHECK_FALSE(sc->capture(text, 3, text.size(), out.data()));
  CHECK_FALSE(sc->search(text, out.data()));
  CHECK(sc->capture("CE on DIMM_A1", 3, 13, out.data()));
  CHECK(out == std::vector<int>{3, 13, 6, 13});
}

TEST_CASE("the engine's groups: from the span capture, and from RE2 where it leaves a span undecided", "[capture]") {
  auto rules = std::make_shared<RuleSet>();
  Rule rule;
  rule.id = "t.ce";
  rule.prefilters = {"EDAC "};
  rule.pattern = R"(EDAC (?:[A-Za-z0-9_]+ )?(?P<mc>MC[0-9]+): (?P<count>[0-9]+) CE(?:[^\n]*? on (?P<location>[^\s(]+))?)";
  rules->rules.push_back(rule);  // no compiled regex: the engine compiles it, as the agent's does
  RuleEngine engine(rules);
  const RE2 re(rule.pattern);
  for (const std::string text : {"EDAC skx MC1: 3 CE memory scrub error on CPU_SrcID#0_MC#1_Chan#2_DIMM#0 (channel:2)",
                                 "EDAC MC2: 12 CE on on x (y) on DIMM_B2",
                                 "EDAC MC0: 1 CE memory read error on DIMM_\xc3\xa9 (channel:1)",  // UTF-8: RE2's groups
                                 "x EDAC MC0: 1 CE\n on A"}) {
    INFO(text);
    std::map<std::string, std::string> caps;
    REQUIRE(engine.match(text, SourceKind::kKernel, &caps));
    const auto want = re2Groups(re, text);
    REQUIRE(want);
    std::map<std::string, std::string> expected;
    for (const auto& [i, name] : re.CapturingGroupNames())
      if ((*want)[2 * static_cast<size_t>(i)] >= 0)
        expected[name] = text.substr(static_cast<size_t>((*want)[2 * static_cast<size_t>(i)]),
                                     static_cast<size_t>((*want)[2 * static_cast<size_t>(i) + 1] - (*want)[2 * static_cast<size_t>(i)]));
    CHECK(caps == expected);
    CHECK(caps.count("mc"));
  }
}

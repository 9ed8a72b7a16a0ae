#include "common/rule_skeleton.h"

#include <re2/re2.h>

#include <fmt/format.h>

#include "common/template_mask.h"

namespace faultline::common {

namespace {

// A placeholder of the masker starting at text[i] ("<NUM>", "<*>", "<...>"): its length, else 0.
size_t placeholderAt(std::string_view text, size_t i) {
  if (text[i] != '<') return 0;
  const size_t close = text.find('>', i);
  if (close == std::string_view::npos || close == i + 1 || close - i > 8) return 0;
  for (size_t k = i + 1; k < close; ++k) {
    const char c = text[k];
    if (!((c >= 'A' && c <= 'Z') || c == '*' || c == '.')) return 0;
  }
  return close - i + 1;
}

// What each class of variable may look like. Wide on purpose (a number's unit, "2.83s/it", is
// part of it): a skeleton must match every line it stands for; the author tightens it.
std::string_view expressionOf(std::string_view placeholder) {
  if (placeholder == "<NUM>") return R"([-+vV]?\.?[0-9]\S*)";  // the masker's numbers include v2.18
  if (placeholder == "<PID>") return R"([0-9]+)";
  if (placeholder == "<HEX>" || placeholder == "<IP>" || placeholder == "<MAC>" || placeholder == "<PCI>")
    return R"([0-9A-Fa-fxX:.]\S*)";
  if (placeholder == "<TIME>") return R"([0-9]\S*)";
  return R"(\S+)";  // <*>, <HOST>, <PATH>, <URL>, <UUID>, <RANK> and anything new
}

std::vector<std::string_view> tokensOf(std::string_view s) {
  std::vector<std::string_view> out = templateTokens(s);
  if (!out.empty() && out.back() == "<...>") out.pop_back();
  return out;
}

std::string yamlQuoted(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (static_cast<unsigned char>(c) < 0x20) out += ' ';  // a control byte has no place in a one-line example
    else out += c;
  }
  return out + "'";
}

std::string patternOfTokens(const std::vector<std::string_view>& tokens) {
  std::string out;
  for (std::string_view tok : tokens) {
    if (!out.empty()) out += R"(\s+)";
    size_t lit = 0;
    for (size_t i = 0; i < tok.size();) {
      if (size_t n = placeholderAt(tok, i)) {
        out += RE2::QuoteMeta(re2::StringPiece(tok.data() + lit, i - lit));
        out += expressionOf(tok.substr(i, n));
        i += n;
        lit = i;
      } else {
        ++i;
      }
    }
    out += RE2::QuoteMeta(re2::StringPiece(tok.data() + lit, tok.size() - lit));
  }
  return out;
}

std::string prefilterOfTokens(const std::vector<std::string_view>& tokens) {
  std::string_view best;
  auto consider = [&](std::string_view piece) {
    if (piece.size() < 4 || piece.size() <= best.size()) return;
    for (unsigned char c : piece)
      if (c < 0x20 || c == 0x7f || c == '?') return;
    best = piece;
  };
  for (std::string_view tok : tokens) {
    size_t lit = 0;
    for (size_t i = 0; i < tok.size();) {
      if (size_t n = placeholderAt(tok, i)) {
        consider(tok.substr(lit, i - lit));
        i += n;
        lit = i;
      } else {
        ++i;
      }
    }
    consider(tok.substr(lit));
  }
  return std::string(best);
}

// The template's tokens, or, when an example stops before the template does (the miner keeps the
// first 512 bytes of a message but up to 64 of its tokens), its longest leading run of tokens
// whose pattern every example matches: a skeleton's pattern and prefilter must hold for its examples.
std::vector<std::string_view> tokensOfExamples(std::string_view template_text, const std::vector<std::string>& examples) {
  std::vector<std::string_view> tokens = tokensOf(template_text);
  auto matchesAll = [&] {
    RE2 re(patternOfTokens(tokens), RE2::Quiet);
    if (!re.ok()) return false;
    for (const auto& e : examples)
      if (!RE2::PartialMatch(e, re)) return false;
    return true;
  };
  while (tokens.size() > 1 && !matchesAll()) tokens.pop_back();
  return tokens;
}

}  // namespace

std::string patternOfTemplate(std::string_view template_text) { return patternOfTokens(tokensOf(template_text)); }

std::string prefilterOfTemplate(std::string_view template_text) { return prefilterOfTokens(tokensOf(template_text)); }

std::string ruleSkeletonsYaml(const std::vector<RuleSkeletonInput>& rules, const std::vector<std::string>& header) {
  std::string y;
  for (const auto& h : header) y += "# " + h + "\n";
  y += "pack: TODO\n";
  y += "description: 'TODO: rules suggested from error lines no rule matched (faultline rules suggest)'\n";
  y += rules.empty() ? "rules: []\n" : "rules:\n";
  int n = 0;
  for (const auto& r : rules) {
    ++n;
    y += "\n";
    y += fmt::format("  # from {}: {} line(s) on {}\n", r.source, r.count,
                     r.nodes.empty() ? std::string("an unknown node") : fmt::format("{}", fmt::join(r.nodes, ", ")));
    for (const auto& w : r.why) y += "  #   " + w + "\n";
    y += fmt::format("  # template: {}\n", r.template_text);
    y += fmt::format("  - id: TODO-{}\n", n);
    y += "    since: TODO\n";
    y += "    symptom: TODO\n";
    y += "    sub_domain: TODO              # docs/taxonomy.md: whose action makes the next run succeed?\n";
    y += "    category: TODO\n";
    y += "    role: TODO                    # root|cascade|teardown|context\n";
    y += "    severity: error\n";
    if (!r.sources.empty()) y += "    sources: [" + r.sources + "]\n";
    const std::vector<std::string_view> tokens = tokensOfExamples(r.template_text, r.examples);
    const std::string pre = prefilterOfTokens(tokens);
    y += "    prefilter: " + (pre.empty() ? std::string("TODO                # no literal of 4+ bytes in the template") : yamlQuoted(pre)) + "\n";
    y += "    pattern: " + yamlQuoted(patternOfTokens(tokens)) + "\n";
    y += "    summary: TODO\n";
    y += "    meaning: TODO\n";
    y += "    action: TODO\n";
    y += "    examples:\n";
    y += "      match:\n";
    for (const auto& e : r.examples) y += "        - " + yamlQuoted(e) + "\n";
    y += "      no_match: []                # TODO: lines of the same emitter that do not mean this\n";
  }
  return y;
}

}  // namespace faultline::common

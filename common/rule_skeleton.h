// `faultline rules suggest` (issue 30 part 5): failure-indicating templates as rule skeletons in
// the rules' YAML (docs/rules.md), a rule author's starting point. Pure: text in, text out.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::common {

// An RE2 pattern for a template's lines: its literal parts quoted, each placeholder ("<NUM>",
// "<HEX>", "<PCI>", ...) a class-wide expression, "<*>" any token, whitespace runs between
// tokens, a trailing "<...>" (a message cut at the miner's max_tokens) dropped. Unanchored, like
// every rule's pattern; it matches every line the template stood for.
std::string patternOfTemplate(std::string_view template_text);

// The template's longest literal piece without a placeholder (at least 4 bytes, no '?' or
// control byte): a prefilter literal every line of the template holds. "" when there is none.
std::string prefilterOfTemplate(std::string_view template_text);

struct RuleSkeletonInput {
  std::string template_text;
  std::vector<std::string> examples;  // lines of the template (examples.match)
  std::vector<std::string> nodes;
  uint64_t count = 0;
  std::vector<std::string> why;       // why the line is unusual
  std::string source;                 // the bundle it came from
  std::string sources;                // the rule's `sources` list ("kernel, journal"), "" for all
};

// A YAML document: a pack with every field a person must decide left "TODO" (pack name, id as
// "TODO-<n>", symptom, sub_domain, category, role, summary, meaning, action), the pattern and
// prefilter generalized from the template, the lines as examples.match, and comments naming the
// bundle, the nodes and why the line was unusual. `header` is printed as comment lines first.
std::string ruleSkeletonsYaml(const std::vector<RuleSkeletonInput>& rules, const std::vector<std::string>& header);

}  // namespace faultline::common

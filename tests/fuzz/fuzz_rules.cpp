// libFuzzer target for the rule loader and the rule check (common/rule_set.h): the input is one
// rule pack file (YAML: `rules:` with their patterns, templates and examples, `defines:`, or a
// causality file's `relations:`), loaded as rules/fuzz/fuzz.yaml. What loads is then checked as
// `faultline rules check` does (every example through a RuleEngine and the correlator's phases)
// and each rule's examples are matched again.
//
// Properties: no crash, hang, leak or sanitizer report, no exception; a file either loads or
// gets at least one "file:line: why" error, never both.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "tests/fuzz/fuzz_util.h"

using faultline::fuzz::fail;
using namespace faultline::common;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  RuleLoadResult loaded;
  try {
    loaded = loadRuleSet({{"rules/fuzz/fuzz.yaml", std::string(faultline::fuzz::bytes(data, size))}}, "1.0.0");
  } catch (const std::exception& e) {
    fail("exception out of loadRuleSet: %s", e.what());
  }
  if (!loaded.rules) {
    if (loaded.errors.empty()) fail("no rules and no error");
    for (const auto& e : loaded.errors)
      if (e.empty()) fail("an empty error");
    return 0;
  }
  if (!loaded.errors.empty()) fail("rules loaded with errors: %s", loaded.errors[0].c_str());
  try {
    (void)checkRuleExamples(loaded.rules);
    RuleEngine engine(loaded.rules);
    for (const auto& rule : loaded.rules->rules)
      for (const auto& example : rule.match_examples) {
        LogRecord record;
        record.text = example;
        record.time_ns = int64_t{1717236000} * 1'000'000'000;
        record.time_known = true;
        MatchContext ctx{"gpu-a01", "fuzz", rule.sources.empty() ? SourceKind::kKernel : rule.sources[0], {}};
        (void)engine.extract(record, ctx);
      }
  } catch (const std::exception& e) {
    fail("exception out of the rule check: %s", e.what());
  }
  return 0;
}

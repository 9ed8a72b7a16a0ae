// Causal knowledge as data: loading and validating rules/causality, and a site's own relation.
#include <catch2/catch.hpp>

#include "common/correlator.h"
#include "common/rule_set.h"

using namespace faultline::common;

namespace {

constexpr int64_t kSec = 1000000000;
constexpr int64_t kT0 = 1717236000LL * kSec;

std::vector<std::string> problemsOf(const std::string& yaml) {
  auto r = loadRuleSet({{"site/relations.yaml", yaml}}, "1.0.0");
  if (!r.errors.empty()) return r.errors;
  return checkRuleExamples(r.rules);
}

const char* kGood = R"(relations:
  - id: slow-storage-after-lustre
    since: 9.9.0
    reason: a test relation
    effect: consequence
    symptom: {rule: 'python.storage_*', role: root}
    cause: {rule: kernel.lustre_error, role: root}
    scope: same_node
    window: {before: 0, after: 120}
    examples:
      - symptoms:
          lustre: {rule: kernel.lustre_error, node: n1, t: 0, domain: infrastructure}
          eio: {rule: python.storage_os_error, node: n1, t: 30, domain: infrastructure, source: application}
        expect: {eio: consequence, lustre: none}
)";

}  // namespace

TEST_CASE("the shipped relations load, each with a reason and examples that pass", "[causality]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.errors.empty());
  const auto& rel = loaded.rules->relations;
  CHECK(rel.size() >= 16);
  for (const auto& r : rel) {
    INFO(r.id);
    CHECK(!r.reason.empty());
    CHECK(!r.examples.empty());
    CHECK(r.file.find("rules/causality/") != std::string::npos);
  }
  CHECK(checkRuleExamples(loaded.rules).empty());
  CHECK(problemsOf(kGood).empty());
}

TEST_CASE("broken relation files are reported as file:line: why", "[causality]") {
  auto has = [](const std::vector<std::string>& v, const std::string& what) {
    INFO(what);
    for (const auto& p : v) INFO(p);
    return std::any_of(v.begin(), v.end(), [&](const std::string& p) { return p.find(what) != std::string::npos; });
  };
  std::string y = kGood;
  auto swap = [&](const std::string& from, const std::string& to) {
    std::string out = y;
    out.replace(out.find(from), from.size(), to);
    return problemsOf(out);
  };
  CHECK(has(swap("effect: consequence", "effect: maybe"), "site/relations.yaml:5: unknown effect 'maybe'"));
  CHECK(has(swap("    scope: same_node\n", "    scope: same_rack\n"), "site/relations.yaml:8: unknown scope 'same_rack'"));
  CHECK(has(swap("role: root}\n    cause", "role: root, colour: red}\n    cause"), ":6: unknown selector key 'colour'"));
  CHECK(has(swap("after: 120", "after: soon"), "'soon' is not a number of seconds or 'any'"));
  CHECK(has(swap("    reason: a test relation\n", ""), ":2: missing 'reason'"));
  CHECK(has(swap("    since: 9.9.0\n", "    since: 9.9.0\n    colour: red\n"), ":4: unknown key 'colour'"));
  CHECK(has(swap("effect: consequence", "effect: wrapper"), "a wrapper relation lists its 'plausible' domains"));
  CHECK(has(swap("symptom: {rule: 'python.storage_*', role: root}", "symptom: {}"), "an empty selector matches every symptom"));
  CHECK(has(swap("expect: {eio: consequence", "expect: {eoi: consequence"), "expectation names no example symptom 'eoi'"));
  // An example that disagrees with what the correlator does.
  CHECK(has(swap("t: 30, domain", "t: 300, domain"),
            "site/relations.yaml:11: relation slow-storage-after-lustre: example symptom 'eio' expected consequence, got none"));
  CHECK(has(problemsOf("relations: {a: 1}\n"), "site/relations.yaml:1: 'relations' must be a list"));
  CHECK(has(problemsOf("relations:\n  - [1, 2]\n"), "site/relations.yaml:2: a relation must be a mapping"));
}

TEST_CASE("a site adds a relation in its override directory and it changes the verdict", "[causality]") {
  auto shipped = readRuleFiles({FAULTLINE_SOURCE_DIR "/rules/causality"});
  REQUIRE(shipped.errors.empty());
  auto base = loadRuleSet(shipped.files, "1.0.0");
  REQUIRE(base.errors.empty());
  auto files = shipped.files;
  files.push_back({"/etc/faultline/rules.d/site.yaml", kGood});
  auto site = loadRuleSet(files, "1.0.0");
  REQUIRE(site.errors.empty());
  CHECK(site.rules->relations.size() == base.rules->relations.size() + 1);
  CHECK(site.rules->version != base.rules->version);

  auto root = [](std::string rule, std::string node, SubDomain d, int t, SourceKind k) {
    Symptom s;
    s.rule_id = s.symptom = std::move(rule);
    s.node = std::move(node);
    s.sub_domain = d;
    s.first_ns = s.last_ns = kT0 + t * kSec;
    s.time_known = true;
    s.source_kind = k;
    return s;
  };
  JobInfo job;
  job.state = "FAILED";
  job.start_ns = kT0 - 60 * kSec;
  job.end_ns = kT0 + 600 * kSec;
  job.nodes = {"n1", "n2"};
  // The rank's EIO (n1) 30 s after the Lustre error (n1) and a DBE on n2 in between.
  std::vector<Symptom> s{root("kernel.lustre_error", "n1", SubDomain::kInfrastructure, 0, SourceKind::kKernel),
                         root("python.storage_os_error", "n1", SubDomain::kInfrastructure, 30, SourceKind::kApplication),
                         root("xid.48", "n2", SubDomain::kHardware, 10, SourceKind::kKernel)};
  auto without = correlate(job, s, base.rules.get());
  auto with = correlate(job, s, site.rules.get());
  auto roleOf = [](const Diagnosis& d, const std::string& rule) {
    for (const auto& e : d.chain)
      if (e.rule_id == rule) return e;
    return ChainEntry{};
  };
  CHECK(roleOf(without, "python.storage_os_error").role == Role::kRoot);
  CHECK(roleOf(with, "python.storage_os_error").role == Role::kCascade);
  CHECK(roleOf(with, "python.storage_os_error").because ==
        "consequence of kernel.lustre_error on n1 [causality: slow-storage-after-lustre]");
  // The same id twice (a site copying a shipped relation) is an error naming both places.
  files.push_back({"/etc/faultline/rules.d/copy.yaml", kGood});
  auto twice = loadRuleSet(files, "1.0.0");
  REQUIRE(twice.errors.size() == 1);
  CHECK_THAT(twice.errors[0], Catch::Contains("duplicate relation id 'slow-storage-after-lustre'"));
}

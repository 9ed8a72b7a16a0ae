// Loads every shipped rule file and runs every example through the real engine.
#include <catch2/catch.hpp>

#include <re2/re2.h>

#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "common/rule_engine.h"
#include "common/rule_set.h"

using namespace faultline::common;

TEST_CASE("every shipped rule file loads, compiles and agrees with its examples", "[rules]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  for (const auto& e : loaded.errors) UNSCOPED_INFO(e);
  REQUIRE(loaded.errors.empty());
  REQUIRE(loaded.rules);
  auto problems = checkRuleExamples(loaded.rules);
  for (const auto& p : problems) UNSCOPED_INFO(p);
  CHECK(problems.empty());
  CHECK(loaded.rules->rules.size() > 200);
}

TEST_CASE("every Xid of NVIDIA's catalog has a rule carrying the catalog's facts", "[rules]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  std::ifstream in(FAULTLINE_SOURCE_DIR "/../shared/reference/xid_catalog.tsv");
  if (!in) {
    WARN("shared/reference/xid_catalog.tsv not present beside the checkout; skipped");
    return;
  }
  std::string line;
  std::getline(in, line);  // header
  int checked = 0;
  RuleEngine engine(loaded.rules);
  while (std::getline(in, line)) {
    auto tab = line.find('\t');
    std::string xid = line.substr(0, tab);
    auto second = line.find('\t', tab + 1);
    auto third = line.find('\t', second + 1);
    auto fourth = line.find('\t', third + 1);
    std::string immediate = line.substr(third + 1, fourth - third - 1);
    const Rule* r = loaded.rules->find("xid." + xid);
    INFO("Xid " << xid);
    REQUIRE(r != nullptr);
    CHECK(r->pattern.find("(?P<xid>" + xid + ")") != std::string::npos);
    REQUIRE(r->nvidia.count("immediate"));
    if (!immediate.empty()) CHECK(r->nvidia.at("immediate") == immediate);
    // Every match example of the rule is won by it, so the line variants resolve to this Xid.
    for (const auto& ex : r->match_examples) CHECK(engine.match(ex, SourceKind::kKernel) == r);
    ++checked;
  }
  CHECK(checked > 150);
}

namespace {
std::vector<std::string> loadErrors(const std::string& yaml) {
  return loadRuleSet({{"bad.yaml", yaml}}, "0.1.0").errors;
}
const char* kGood = R"(pack: t
rules:
  - id: t.one
    since: 0.1.0
    symptom: one
    sub_domain: hardware
    category: gpu
    role: root
    severity: error
    prefilter: 'ONE'
    pattern: 'ONE (?P<n>\d+)'
    summary: 'one {n}'
    meaning: m
    action: a
    examples: {match: ['ONE 1'], no_match: ['TWO 2']}
)";
}  // namespace

TEST_CASE("broken rule files are reported as file:line: why", "[rules]") {
  CHECK(loadErrors(kGood).empty());

  auto errs = loadErrors("pack: t\nrules:\n  - id: [unclosed\n");
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].rfind("bad.yaml:", 0) == 0);

  std::string bad_regex = kGood;
  bad_regex.replace(bad_regex.find("ONE (?P<n>"), 10, "ONE ((?P<n>");
  errs = loadErrors(bad_regex);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("bad.yaml:11:") == 0);
  CHECK(errs[0].find("bad pattern") != std::string::npos);

  std::string bad_enum = kGood;
  bad_enum.replace(bad_enum.find("role: root"), 10, "role: boss");
  errs = loadErrors(bad_enum);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("bad role 'boss'") != std::string::npos);

  std::string unknown = kGood;
  unknown.replace(unknown.find("    meaning: m"), 14, "    meaning: m\n    colour: red");
  errs = loadErrors(unknown);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("unknown key 'colour'") != std::string::npos);

  std::string missing_capture = kGood;
  missing_capture.replace(missing_capture.find("'one {n}'"), 9, "'one {m}'");
  errs = loadErrors(missing_capture);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("'{m}'") != std::string::npos);

  auto dup = loadRuleSet({{"a.yaml", kGood}, {"b.yaml", std::string(kGood).replace(6, 1, "u")}}, "0.1.0");
  REQUIRE(dup.errors.size() == 1);
  CHECK(dup.errors[0].find("duplicate rule id 't.one'") != std::string::npos);
  CHECK(!dup.rules);
}

TEST_CASE("a disagreeing example is caught", "[rules]") {
  std::string wrong = kGood;
  wrong.replace(wrong.find("no_match: ['TWO 2']"), 19, "no_match: ['ONE 7']");
  auto loaded = loadRuleSet({{"x.yaml", wrong}}, "0.1.0");
  REQUIRE(loaded.rules);
  auto problems = checkRuleExamples(loaded.rules);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("no_match example matches") != std::string::npos);
}

TEST_CASE("a prefilter ending in blanks that a match at the line's end does not hold is caught", "[rules]") {
  // A record's text has no trailing blanks or newline: 'Error: ' is not in "ValueError:" although
  // the pattern matches it there, so the rule would never see that record (fuzz_parse_application
  // found this on python.exception).
  const char* yaml = R"(pack: t
rules:
  - id: t.exc
    since: 0.1.0
    symptom: exc
    sub_domain: application
    category: python
    role: root
    severity: error
    prefilter: 'Error: '
    pattern: '(?P<exc>\w+Error)(?::[ ]?(?P<msg>.*))?$'
    summary: '{exc}'
    meaning: m
    action: a
    examples: {match: ['ValueError: x'], no_match: ['fine']}
)";
  auto loaded = loadRuleSet({{"x.yaml", yaml}}, "0.1.0");
  REQUIRE(loaded.rules);
  auto problems = checkRuleExamples(loaded.rules);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0].find("prefilter 'Error: ' is not needed for a match") != std::string::npos);
  CHECK(problems[0].find("\"ValueError:\"") != std::string::npos);

  std::string fixed = yaml;
  fixed.replace(fixed.find("prefilter: 'Error: '"), 20, "prefilter: 'Error'");
  auto refixed = loadRuleSet({{"x.yaml", fixed}}, "0.1.0");
  REQUIRE(refixed.rules);
  CHECK(checkRuleExamples(refixed.rules).empty());
}

TEST_CASE("the highest priority rule wins a record, templates fill node, device, summary", "[rules]") {
  const char* yaml = R"(pack: t
defines: {PCI: '(?P<pci>[0-9a-f:.]+)'}
rules:
  - id: t.generic
    since: 0.1.0
    symptom: generic
    sub_domain: application
    category: python
    role: root
    severity: error
    prefilter: 'Error'
    pattern: '(?P<exc>\w+Error): (?P<msg>.*)'
    summary: '{exc}'
    meaning: m
    action: a
    examples: {match: ['ValueError: x'], no_match: ['fine']}
  - id: t.specific
    since: 0.1.0
    priority: 10
    symptom: gpu
    sub_domain: hardware
    category: gpu
    role: root
    severity: critical
    prefilter: ['GPU', 'gpu']
    pattern: 'GPU {{PCI}} RuntimeError: (?P<what>.*)'
    device: '{pci}'
    summary: 'GPU {pci} on {host}: {what}'
    meaning: m
    action: a
    examples: {match: ['GPU 3b:00.0 RuntimeError: lost'], no_match: ['RuntimeError: lost']}
)";
  auto loaded = loadRuleSet({{"x.yaml", yaml}}, "1.2.3");
  REQUIRE(loaded.errors.empty());
  CHECK(loaded.rules->version.rfind("1.2.3+", 0) == 0);
  RuleEngine engine(loaded.rules);
  CHECK(checkRuleExamples(loaded.rules).empty());
  LogRecord rec;
  rec.text = "GPU 3b:00.0 RuntimeError: lost";
  rec.time_ns = 42;
  rec.time_known = true;
  auto s = engine.extract(rec, {"node-1", "/var/log/x", SourceKind::kKernel, {}});
  REQUIRE(s);
  CHECK(s->rule_id == "t.specific");
  CHECK(s->node == "node-1");
  CHECK(s->device == "0000:3b:00.0");
  CHECK(s->summary == "GPU 3b:00.0 on node-1: lost");
  CHECK(s->first_ns == 42);
  CHECK(s->source_kind == SourceKind::kKernel);
  rec.text = "nothing to see";
  CHECK(!engine.extract(rec, {}));
  rec.text = "[rank5]: KeyError... ValueError: bad";
  rec.rank = 5;
  auto a = engine.extract(rec, {"", "job.out", SourceKind::kApplication, [](int r) { return r == 5 ? std::string("n5") : ""; }});
  REQUIRE(a);
  CHECK(a->rule_id == "t.generic");
  CHECK(a->node == "n5");
  CHECK(a->field("rank") == "5");
}

TEST_CASE("a capture name used in several alternatives takes the value of the one that matched", "[rules]") {
  const char* yaml = R"(pack: t
rules:
  - id: t.port
    since: 0.1.0
    symptom: port_down
    sub_domain: network
    category: infiniband
    role: root
    severity: error
    prefilter: ['Link down', 'Port module event']
    pattern: '(?:(?P<pci>[0-9a-f:.]+): Link down|(?P<pci>[0-9a-f:.]+): Port module event: module (?P<module>\d+))'
    device: '{pci}'
    summary: 'port down on {pci}'
    meaning: m
    action: a
    examples: {match: ['0000:1f:00.0: Link down'], no_match: ['fine']}
)";
  auto loaded = loadRuleSet({{"x.yaml", yaml}}, "1.2.3");
  REQUIRE(loaded.errors.empty());
  RuleEngine engine(loaded.rules);
  LogRecord rec;
  for (const char* text : {"mlx5_core 0000:1f:00.0: Link down", "mlx5_core 0000:1f:00.0: Port module event: module 0"}) {
    rec.text = text;
    auto s = engine.extract(rec, {"n1", "dmesg", SourceKind::kKernel, {}});
    INFO(text);
    REQUIRE(s);
    CHECK(s->device == "0000:1f:00.0");
    CHECK(s->summary == "port down on 0000:1f:00.0");
  }
}

TEST_CASE("boot_settle_s: a link going down while the node boots is context, later a fault", "[rules]") {
  const char* yaml = R"(pack: t
rules:
  - id: t.link
    since: 0.1.0
    symptom: link_down
    sub_domain: network
    category: infiniband
    role: root
    severity: error
    boot_settle_s: 300
    prefilter: 'Link down'
    pattern: 'Link down'
    summary: 'link down'
    meaning: m
    action: a
    examples: {match: ['ens1: Link down'], no_match: ['ens1: Link up']}
)";
  auto loaded = loadRuleSet({{"x.yaml", yaml}}, "1.2.3");
  REQUIRE(loaded.errors.empty());
  RuleEngine engine(loaded.rules);
  LogRecord rec;
  rec.text = "mlx5_core 0000:3b:00.0 ens1f0np0: Link down";
  rec.monotonic_ns = 12'345'678'000;  // [   12.345678]
  auto s = engine.extract(rec, {"n1", "dmesg", SourceKind::kKernel, {}});
  REQUIRE(s);
  CHECK(s->role == Role::kContext);
  CHECK(s->fields["boot_settle"] == "within 300 s of boot");
  rec.monotonic_ns = 86'400'000'000'000;  // a day after boot
  s = engine.extract(rec, {"n1", "dmesg", SourceKind::kKernel, {}});
  REQUIRE(s);
  CHECK(s->role == Role::kRoot);
  rec.monotonic_ns = -1;  // no uptime stamp (dmesg -T, syslog): as the rule says
  CHECK(engine.extract(rec, {"n1", "dmesg", SourceKind::kKernel, {}})->role == Role::kRoot);

  std::string bad = yaml;
  bad.replace(bad.find("boot_settle_s: 300"), 18, "boot_settle_s: -5");
  auto errs = loadRuleSet({{"x.yaml", bad}}, "1.2.3").errors;
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].find("boot_settle_s") != std::string::npos);
}

namespace {
// The engine's contract spelled out the slow way: of the rules one of whose literals occurs in
// the text and whose own pattern matches, the highest priority wins, ties to the rule loaded
// first; the captures are that pattern's leftmost match's.
using Compiled = std::map<const Rule*, std::unique_ptr<RE2>>;  // each pattern compiled once

const Rule* straightforwardMatch(const RuleSet& rs, std::string_view text, SourceKind kind,
                                 std::map<std::string, std::string>* captures, Compiled* compiled) {
  const Rule* best = nullptr;
  for (const auto& r : rs.rules) {
    if (r.deprecated || !r.appliesTo(kind) || (best && r.priority <= best->priority)) continue;
    bool literal = false;
    for (const auto& lit : r.prefilters) literal = literal || text.find(lit) != std::string_view::npos;
    if (!literal) continue;
    auto& slot = (*compiled)[&r];
    if (!slot) slot = std::make_unique<RE2>(r.pattern);
    const RE2& re = *slot;
    if (!re.ok()) continue;
    std::vector<re2::StringPiece> groups(static_cast<size_t>(re.NumberOfCapturingGroups()) + 1);
    if (!re.Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED, groups.data(),
                  static_cast<int>(groups.size())))
      continue;
    best = &r;
    captures->clear();
    for (const auto& [gi, name] : re.CapturingGroupNames())
      if (groups[static_cast<size_t>(gi)].data())
        captures->emplace(name, std::string(groups[static_cast<size_t>(gi)].data(), groups[static_cast<size_t>(gi)].size()));
  }
  return best;
}
}  // namespace

TEST_CASE("the Xid pack is one table: every record gets the rule and captures of a per-rule evaluation", "[rules]") {
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  RuleEngine engine(loaded.rules);
  CHECK(engine.tableCount() == 1);  // xid.yaml's 172 rules; xid_misc's own patterns stay as they are
  std::vector<std::string> texts;
  for (const auto& r : loaded.rules->rules) {
    for (const auto& e : r.match_examples) texts.push_back(e);
    for (const auto& e : r.no_match_examples) texts.push_back(e);
  }
  // Two heads in one record, codes that are a prefix of another, a code run into letters, a code
  // without its word boundary, non-ASCII around the head.
  const size_t examples = texts.size();
  for (const char* extra : {
           "NVRM: Xid (PCI:0000:3b:00): 13, Ch 1 NVRM: Xid (PCI:0000:3c:00): 79, pid=1, name=x, GPU has fallen off the bus.",
           "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, NVRM: Xid (PCI:0000:3c:00): 13, Graphics Exception",
           "NVRM: Xid (PCI:0000:3b:00): 1a, Ch 1",
           "NVRM: Xid (PCI:0000:3b:00): 131",
           "NVRM: Xid (PCI:0000:3b:00): 13",
           "NVRM: Xid (PCI:0000:3b:00): 0013, Ch 1",
           "NVRM: Xid (PCI:0000:3b:00): 999, Ch 1",
           "NVRM: Xid (PCI:0000:3b:00) junk (x): 48, DBE",
           "NVRM: Xid (PCI:0000:3b:00 GPU-I:05): 94, pid=7, name=é, Contained: CE User Channel",
           "é NVRM: Xid (0000:3b:00): 45, pid=1, name=a,b, Ch 0000000a (caused by previous Xid 79)",
           "NVRM: Xid (PCI:0000:3b:00): NVRM: Xid (PCI:0000:3b:01): 62, Ch 1",
       })
    texts.push_back(extra);
  size_t won = 0;
  Compiled compiled;
  for (size_t i = 0; i < texts.size(); ++i) {
    const auto& text = texts[i];
    // Every example as a kernel record; the odd lines as every kind of record.
    for (auto kind : {SourceKind::kKernel, SourceKind::kJournal, SourceKind::kApplication}) {
      if (i < examples && kind != SourceKind::kKernel) continue;
      std::map<std::string, std::string> want, got;
      const Rule* expect = straightforwardMatch(*loaded.rules, text, kind, &want, &compiled);
      const Rule* r = engine.match(text, kind, &got);
      INFO(text << " (kind " << static_cast<int>(kind) << ")");
      REQUIRE((r ? r->id : "-") == (expect ? expect->id : "-"));
      if (expect) CHECK(got == want);
      CHECK(engine.match(text, kind) == r);
      won += r != nullptr;
    }
  }
  CHECK(won > 1000);
}

TEST_CASE("templates: {host} is the record's host, then the node found, {node_default} the context's node", "[rules]") {
  auto rules = std::make_shared<RuleSet>();
  Rule rule;
  rule.id = "t.disk";
  rule.prefilters = {"disk "};
  rule.pattern = R"(disk (?P<dev>\w+)(?: on (?P<host>\w+))?)";  // a capture named host does not replace it
  rule.node_template = "{node_default}-{dev}";
  rule.device_template = "{host}/{dev}";
  rule.summary_template = "{host} {node_default} {dev} [{nope}] {unclosed";
  rules->rules.push_back(rule);
  rule.id = "t.disk2";
  rule.prefilters = {"disk2 "};
  rule.pattern = R"(disk2 (?P<dev>\w+))";
  rule.node_template.clear();
  rules->rules.push_back(rule);
  RuleEngine engine(rules);
  LogRecord rec;
  rec.host = "rechost";
  rec.text = "disk sda on zz";
  auto s = engine.extract(rec, {"ctxnode", "f", SourceKind::kKernel, {}});
  REQUIRE(s);
  CHECK(s->node == "ctxnode-sda");
  CHECK(s->device == "rechost/sda");
  CHECK(s->summary == "ctxnode-sda ctxnode sda [] {unclosed");
  CHECK(s->field("host") == "zz");
  rec.text = "disk2 sdb";
  s = engine.extract(rec, {"", "f", SourceKind::kKernel, {}});
  REQUIRE(s);
  CHECK(s->node == "rechost");
  CHECK(s->device == "rechost/sdb");
  CHECK(s->summary == "rechost  sdb [] {unclosed");
}

TEST_CASE("metric rules load with the packs and their examples are run", "[rules][metrics]") {
  const char* yaml = R"(metric_rules:
  - id: metric.t.dbe
    since: 0.9.0
    metric: DCGM_FI_DEV_ECC_DBE_VOL_TOTAL
    node_labels: [Hostname, instance]
    device_labels: [pci_bus_id, gpu]
    condition: increase
    symptom: gpu_ecc_dbe
    sub_domain: hardware
    category: gpu_memory
    role: root
    severity: critical
    summary: 'GPU {device} of {node}: {value} DBE'
    meaning: m
    action: a
    examples:
      match:
        - series: 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{Hostname="n1",pci_bus_id="00000000:3B:00.0"}'
          samples: '0 0 2'
          expect: {node: n1, device: '0000:3b:00.0'}
      no_match:
        - series: 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{instance="n1.example:9400",gpu="0"}'
          samples: '5 5 5'
)";
  auto loaded = loadRuleSet({{"m.yaml", yaml}}, "0.1.0");
  for (const auto& e : loaded.errors) UNSCOPED_INFO(e);
  REQUIRE(loaded.rules);
  REQUIRE(loaded.rules->metric_rules.size() == 1);
  CHECK(checkRuleExamples(loaded.rules).empty());
  // A wrong expectation and a no_match example that meets the condition are both reported.
  std::string wrong = yaml;
  wrong.replace(wrong.find("device: '0000:3b:00.0'"), 22, "device: '0000:5d:00.0'");
  wrong.replace(wrong.find("samples: '5 5 5'"), 16, "samples: '5 5 9'");
  auto bad = loadRuleSet({{"m.yaml", wrong}}, "0.1.0");
  REQUIRE(bad.rules);
  auto problems = checkRuleExamples(bad.rules);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find("gave device '0000:3b:00.0', expected '0000:5d:00.0'") != std::string::npos);
  CHECK(problems[1].find("no_match example met the condition") != std::string::npos);
  // An unknown key and a missing node label are load errors with their line.
  std::string broken = yaml;
  broken.replace(broken.find("    node_labels: [Hostname, instance]\n"), 37, "    nodes: [Hostname]\n");
  auto refused = loadRuleSet({{"m.yaml", broken}}, "0.1.0");
  CHECK_FALSE(refused.rules);
  REQUIRE(refused.errors.size() == 2);
  for (const auto& e : refused.errors) UNSCOPED_INFO(e);
  CHECK(refused.errors[0].find("m.yaml:5: unknown key 'nodes'") != std::string::npos);
}

TEST_CASE("metric rules: conditions over a series, the node it names, the symptom it stands for", "[rules][metrics]") {
  MetricRule r;
  r.id = "metric.t";
  r.metric = "X";
  r.node_labels = {"Hostname", "instance"};
  r.device_labels = {"pci_bus_id"};
  MetricSeries s;
  s.labels = {{"__name__", "X"}, {"instance", "gpu-a01.cluster:9400"}, {"pci_bus_id", "00000000:3B:00.0"}};
  const int64_t sec = 1'000'000'000;
  auto at = [&](std::vector<double> values) {  // the first value 10 s before the window, then every 10 s
    s.samples.clear();
    for (size_t i = 0; i < values.size(); ++i) s.samples.emplace_back(int64_t(i) * 10 * sec, values[i]);
  };
  const int64_t start = 10 * sec, end = 1000 * sec;
  CHECK(metricSeriesNode(r, s, {"gpu-a02", "gpu-a01"}) == "gpu-a01");
  CHECK(metricSeriesNode(r, s, {"gpu-a02"}).empty());
  SECTION("increase: from the sample before the window; a reset counts from zero") {
    r.condition = MetricCondition::kIncrease;
    at({4, 4, 4});
    CHECK_FALSE(evaluateMetricRule(r, s, start, end));
    at({4, 4, 1, 1});
    auto hit = evaluateMetricRule(r, s, start, end);
    REQUIRE(hit);
    CHECK(hit->time_ns == 20 * sec);
    CHECK(hit->value == 1);
    at({4, 4, 6});
    CHECK(evaluateMetricRule(r, s, start, 15 * sec) == std::nullopt);  // the rise is after the window
  }
  SECTION("above, held for a time; edge needs a sample not meeting it first") {
    r.condition = MetricCondition::kAbove;
    r.threshold = 90;
    r.for_ns = 20 * sec;
    at({95, 95, 95, 95});
    auto hit = evaluateMetricRule(r, s, start, end);
    REQUIRE(hit);
    CHECK(hit->time_ns == 10 * sec);
    r.edge = true;
    CHECK_FALSE(evaluateMetricRule(r, s, start, end));
    at({80, 95, 95, 95});
    REQUIRE(evaluateMetricRule(r, s, start, end));
    at({80, 95, 80, 95});  // never held 20 s
    CHECK_FALSE(evaluateMetricRule(r, s, start, end));
  }
  SECTION("changes_to_nonzero and the log rule it stands for") {
    r.condition = MetricCondition::kChangesToNonZero;
    r.as_rule = "xid.{value}";
    r.sub_domain = SubDomain::kHardware;
    r.role = Role::kContext;
    r.summary_template = "Xid {value} on {device} of {node}";
    at({79, 79, 79});
    CHECK_FALSE(evaluateMetricRule(r, s, start, end));
    at({0, 0, 48, 48});
    auto hit = evaluateMetricRule(r, s, start, end);
    REQUIRE(hit);
    CHECK(hit->last_ns == 30 * sec);
    auto rules = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
    REQUIRE(rules.rules);
    Symptom sym = metricSymptom(r, s, *hit, "gpu-a01", rules.rules.get(), "prometheus http://p:9090");
    CHECK(sym.rule_id == "xid.48");
    CHECK(sym.role == Role::kRoot);  // xid.48's classification, not the metric rule's context
    CHECK(sym.device == "0000:3b:00.0");
    CHECK(sym.source_kind == SourceKind::kMetric);
    CHECK(sym.summary == "Xid 48 on 0000:3b:00.0 of gpu-a01");
    REQUIRE(sym.evidence.size() == 1);
    CHECK(sym.evidence[0].find("X{instance=\"gpu-a01.cluster:9400\",pci_bus_id=\"00000000:3B:00.0\"} changed from 0 to 48") == 0);
    // An Xid without a rule keeps the metric rule's own classification.
    at({0, 0, 999});
    Symptom other = metricSymptom(r, s, *evaluateMetricRule(r, s, start, end), "gpu-a01", rules.rules.get(), "");
    CHECK(other.rule_id == "metric.t");
    CHECK(other.role == Role::kContext);
  }
}

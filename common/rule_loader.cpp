#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "common/correlator_phases.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "common/wire_detail.h"

namespace faultline::common {

bool Rule::appliesTo(SourceKind kind) const {
  return sources.empty() || std::find(sources.begin(), sources.end(), kind) != sources.end();
}

const Rule* RuleSet::find(const std::string& id) const {
  for (const auto& r : rules)
    if (r.id == id) return &r;
  return nullptr;
}

namespace {

const std::set<std::string> kRuleKeys = {
    "id",       "since",    "deprecated", "symptom", "sub_domain", "category", "role",
    "severity", "priority", "fallback_root", "prefilter", "pattern", "sources", "device",
    "node",     "summary",  "meaning",    "action",  "fields",     "nvidia",   "examples", "boot_settle_s",
    "detection_delay_s", "detection_delay_field"};
const std::set<std::string> kRequired = {"id",      "since",   "symptom", "sub_domain",
                                         "category", "role",   "severity", "prefilter",
                                         "pattern",  "summary", "meaning", "action", "examples"};
const std::set<std::string> kPackKeys = {"pack", "description", "defines", "rules"};

struct Problems {
  std::vector<std::string>* out;
  void add(const std::string& file, const YAML::Node& at, const std::string& why) {
    int line = at.IsDefined() ? at.Mark().line + 1 : 0;
    out->push_back(fmt::format("{}:{}: {}", file, line, why));
  }
};

std::optional<std::string> scalar(const YAML::Node& n) {
  if (!n.IsDefined() || !n.IsScalar()) return std::nullopt;
  return n.as<std::string>();
}

// Expands {{NAME}} with pack defines; reports undefined names.
std::optional<std::string> expandDefines(const std::string& pattern,
                                         const std::map<std::string, std::string>& defines,
                                         std::string* undefined) {
  std::string out;
  size_t pos = 0;
  while (true) {
    size_t open = pattern.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = pattern.find("}}", open + 2);
    if (close == std::string::npos) break;
    std::string name = pattern.substr(open + 2, close - open - 2);
    auto it = defines.find(name);
    if (it == defines.end()) {
      *undefined = name;
      return std::nullopt;
    }
    out.append(pattern, pos, open - pos);
    out += it->second;
    pos = close + 2;
  }
  out.append(pattern, pos);
  return out;
}

std::vector<std::string> templateNames(std::string_view tmpl) {
  std::vector<std::string> names;
  size_t pos = 0;
  while ((pos = tmpl.find('{', pos)) != std::string_view::npos) {
    size_t close = tmpl.find('}', pos + 1);
    if (close == std::string_view::npos) break;
    names.emplace_back(tmpl.substr(pos + 1, close - pos - 1));
    pos = close + 1;
  }
  return names;
}

std::optional<SourceKind> parseSourceKind(std::string_view s) {
  for (SourceKind k : {SourceKind::kKernel, SourceKind::kJournal, SourceKind::kFabricManager,
                       SourceKind::kApplication})
    if (sourceKindName(k) == s) return k;
  return std::nullopt;
}

uint64_t fnv1a(uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One rule's reading, in named steps: each reads its keys into `rule` and adds a problem for what
// it cannot take. A rule with a problem is not kept (loadRule).
struct RuleReader {
  const std::string& file;
  const YAML::Node& node;
  Problems& problems;
  Rule& rule;

  void str(const char* key, std::string& dst) {
    if (!node[key].IsDefined()) return;
    auto v = scalar(node[key]);
    if (!v) {
      problems.add(file, node[key], fmt::format("'{}' must be a string", key));
      return;
    }
    dst = *v;
  }

  void checkKeys() {
    for (const auto& kv : node) {
      auto key = kv.first.as<std::string>();
      if (!kRuleKeys.count(key)) problems.add(file, kv.first, fmt::format("unknown key '{}'", key));
    }
    for (const auto& key : kRequired)
      if (!node[key].IsDefined()) problems.add(file, node, fmt::format("missing key '{}'", key));
  }

  void readTexts() {
    str("id", rule.id);
    str("since", rule.since);
    str("symptom", rule.symptom);
    str("category", rule.category);
    str("device", rule.device_template);
    str("node", rule.node_template);
    str("summary", rule.summary_template);
    str("meaning", rule.meaning);
    str("action", rule.action);
  }

  // sub_domain, role, severity: each a word of its enum.
  void readClassification() {
    std::string text;
    if (node["sub_domain"].IsDefined()) {
      str("sub_domain", text);
      auto d = parseSubDomain(text);
      if (!d || *d == SubDomain::kAmbiguous || *d == SubDomain::kUnattributed)
        problems.add(file, node["sub_domain"], fmt::format("bad sub_domain '{}'", text));
      else
        rule.sub_domain = *d;
    }
    if (node["role"].IsDefined()) {
      str("role", text);
      if (auto r = parseRole(text))
        rule.role = *r;
      else
        problems.add(file, node["role"], fmt::format("bad role '{}'", text));
    }
    if (node["severity"].IsDefined()) {
      str("severity", text);
      if (auto s = parseSeverity(text))
        rule.severity = *s;
      else
        problems.add(file, node["severity"], fmt::format("bad severity '{}'", text));
    }
  }

  // priority, deprecated, fallback_root and the timing keys.
  void readNumbers() {
    try {
      if (node["priority"].IsDefined()) rule.priority = node["priority"].as<int>();
      if (node["deprecated"].IsDefined()) rule.deprecated = node["deprecated"].as<bool>();
      if (node["fallback_root"].IsDefined()) rule.fallback_root = node["fallback_root"].as<bool>();
      if (node["boot_settle_s"].IsDefined()) {
        const int s = node["boot_settle_s"].as<int>();
        if (s < 0 || s > 3600) problems.add(file, node["boot_settle_s"], "boot_settle_s must be 0..3600");
        else rule.boot_settle_ns = int64_t{s} * 1'000'000'000;
      }
      if (node["detection_delay_s"].IsDefined()) {
        const int s = node["detection_delay_s"].as<int>();
        if (s < 0 || s > 86400) problems.add(file, node["detection_delay_s"], "detection_delay_s must be 0..86400");
        else rule.detection_delay_ns = int64_t{s} * 1'000'000'000;
      }
      if (node["detection_delay_field"].IsDefined())
        rule.detection_delay_field = node["detection_delay_field"].as<std::string>();
    } catch (const YAML::Exception& e) {
      problems.add(file, node, fmt::format("rule '{}': {}", rule.id, e.msg));
    }
  }

  void checkId() {
    for (char c : rule.id)
      if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '.' ||
            c == '_' || c == '-')) {
        problems.add(file, node["id"], fmt::format("id '{}' must be [a-z0-9._-]", rule.id));
        return;
      }
  }

  void readPrefilters() {
    const YAML::Node& pre = node["prefilter"];
    if (pre.IsScalar()) {
      rule.prefilters.push_back(pre.as<std::string>());
    } else if (pre.IsSequence()) {
      for (const auto& p : pre)
        if (auto v = scalar(p)) rule.prefilters.push_back(*v);
    } else if (pre.IsDefined()) {
      problems.add(file, pre, "'prefilter' must be a string or a list of strings");
    }
    for (const auto& p : rule.prefilters)
      if (p.empty()) problems.add(file, pre, "empty prefilter literal");
  }

  void readSources() {
    const YAML::Node& srcs = node["sources"];
    if (!srcs.IsDefined()) return;
    if (!srcs.IsSequence()) problems.add(file, srcs, "'sources' must be a list");
    for (const auto& s : srcs) {
      auto k = scalar(s) ? parseSourceKind(*scalar(s)) : std::nullopt;
      if (!k)
        problems.add(file, s, "bad source (kernel|journal|fabricmanager|application)");
      else
        rule.sources.push_back(*k);
    }
  }

  // `fields` and `nvidia`: mappings of scalars (a list is joined with '+', null is "").
  void readMaps() {
    for (const char* mapkey : {"fields", "nvidia"}) {
      const YAML::Node& m = node[mapkey];
      if (!m.IsDefined()) continue;
      if (!m.IsMap()) {
        problems.add(file, m, fmt::format("'{}' must be a mapping", mapkey));
        continue;
      }
      auto& dst = std::string(mapkey) == "fields" ? rule.fields : rule.nvidia;
      for (const auto& kv : m) {
        if (kv.second.IsScalar()) {
          dst[kv.first.as<std::string>()] = kv.second.as<std::string>();
        } else if (kv.second.IsNull()) {
          dst[kv.first.as<std::string>()] = "";
        } else if (kv.second.IsSequence()) {
          std::string joined;
          for (const auto& e : kv.second)
            if (e.IsScalar()) joined += (joined.empty() ? "" : "+") + e.as<std::string>();
          dst[kv.first.as<std::string>()] = joined;
        } else {
          problems.add(file, kv.second, fmt::format("'{}.{}' must be a scalar", mapkey, kv.first.as<std::string>()));
        }
      }
    }
  }

  void readExampleList(const YAML::Node& ex, const char* key, std::vector<std::string>& dst) {
    const YAML::Node& l = ex[key];
    if (!l.IsDefined()) return;
    if (!l.IsSequence()) {
      problems.add(file, l, fmt::format("'examples.{}' must be a list", key));
      return;
    }
    for (const auto& e : l) {
      if (auto v = scalar(e))
        dst.push_back(*v);
      else
        problems.add(file, e, "an example must be a string");
    }
  }

  void readExamples() {
    const YAML::Node& ex = node["examples"];
    if (!ex.IsDefined()) return;
    if (!ex.IsMap()) {
      problems.add(file, ex, "'examples' must be a mapping with match/no_match lists");
      return;
    }
    for (const auto& kv : ex) {
      auto k = kv.first.as<std::string>();
      if (k != "match" && k != "no_match") problems.add(file, kv.first, fmt::format("unknown examples key '{}'", k));
    }
    readExampleList(ex, "match", rule.match_examples);
    readExampleList(ex, "no_match", rule.no_match_examples);
    if (rule.match_examples.empty())
      problems.add(file, ex, fmt::format("rule '{}' needs at least one match example", rule.id));
  }

  // The pattern, its defines expanded, compiled; the templates and detection_delay_field must
  // name its captures.
  void compilePattern(const std::map<std::string, std::string>& defines) {
    auto raw = scalar(node["pattern"]);
    if (!raw) {
      if (node["pattern"].IsDefined()) problems.add(file, node["pattern"], "'pattern' must be a string");
      return;
    }
    std::string undefined;
    auto expanded = expandDefines(*raw, defines, &undefined);
    if (!expanded) {
      problems.add(file, node["pattern"], fmt::format("undefined define '{{{{{}}}}}'", undefined));
      return;
    }
    rule.pattern = *expanded;
    RE2::Options opts;
    opts.set_log_errors(false);
    auto re = std::make_shared<RE2>(rule.pattern, opts);
    if (!re->ok()) {
      problems.add(file, node["pattern"], fmt::format("rule '{}': bad pattern: {}", rule.id, re->error()));
      return;
    }
    rule.regex = re;
    const auto& groups = re->NamedCapturingGroups();
    for (const auto* tmpl : {&rule.summary_template, &rule.device_template, &rule.node_template})
      for (const auto& name : templateNames(*tmpl))
        if (name != "host" && name != "node_default" && !groups.count(name) && !rule.fields.count(name))
          problems.add(file, node,
                       fmt::format("rule '{}': template names '{{{}}}' which the pattern does not capture", rule.id,
                                   name));
    if (!rule.detection_delay_field.empty() && !groups.count(rule.detection_delay_field))
      problems.add(file, node["detection_delay_field"],
                   fmt::format("rule '{}': detection_delay_field '{}' is not a named capture of the pattern", rule.id,
                               rule.detection_delay_field));
  }
};

void loadRule(const std::string& file, const std::string& pack, const YAML::Node& node,
              const std::map<std::string, std::string>& defines, Problems& problems,
              std::vector<Rule>& out) {
  if (!node.IsMap()) {
    problems.add(file, node, "a rule must be a mapping");
    return;
  }
  const size_t before = problems.out->size();
  Rule rule;
  rule.file = file;
  rule.pack = pack;
  rule.line = node.Mark().line + 1;
  RuleReader r{file, node, problems, rule};
  r.checkKeys();
  r.readTexts();
  r.readClassification();
  r.readNumbers();
  r.checkId();
  r.readPrefilters();
  r.readSources();
  r.readMaps();
  r.readExamples();
  r.compilePattern(defines);
  if (problems.out->size() == before) out.push_back(std::move(rule));
}

}  // namespace

RuleLoadResult loadRuleSet(const std::vector<RuleFile>& files, const std::string& base_version) {
  RuleLoadResult result;
  Problems problems{&result.errors};
  auto set = std::make_shared<RuleSet>();
  std::set<std::string> packs;
  uint64_t hash = 1469598103934665603ull;
  for (const auto& f : files) {
    hash = fnv1a(hash, f.path.substr(f.path.find_last_of('/') + 1));
    hash = fnv1a(hash, f.content);
    // YAML is UTF-8, and RE2 refuses other bytes in a prefilter literal (the engine asserted on
    // one: tests/fuzz fuzz_rules). Named by the first line holding such bytes.
    if (!wire_detail::validUtf8(f.content)) {
      size_t line = 1;
      for (size_t pos = 0;; ++line) {
        size_t end = f.content.find('\n', pos);
        if (!wire_detail::validUtf8(std::string_view(f.content).substr(pos, end - pos)) || end == std::string::npos) break;
        pos = end + 1;
      }
      result.errors.push_back(fmt::format("{}:{}: not UTF-8 text", f.path, line));
      continue;
    }
    YAML::Node doc;
    try {
      doc = YAML::Load(f.content);
    } catch (const YAML::Exception& e) {
      result.errors.push_back(fmt::format("{}:{}: YAML: {}", f.path, e.mark.line + 1, e.msg));
      continue;
    }
    if (!doc.IsMap()) {
      result.errors.push_back(fmt::format("{}:1: a rule pack must be a mapping", f.path));
      continue;
    }
    // Packs of another kind, by their top-level key: metric rules, causal relations.
    const bool metric = bool(doc["metric_rules"]);
    if (metric || doc["relations"]) {
      try {
        if (metric) loadMetricRules(f.path, doc, set->metric_rules, result.errors);
        else loadRelations(f.path, doc, set->relations, result.errors);
      } catch (const YAML::Exception& e) {
        result.errors.push_back(fmt::format("{}:{}: {}", f.path, e.mark.line + 1, e.msg));
      }
      continue;
    }
    try {
      for (const auto& kv : doc) {
        auto key = kv.first.as<std::string>();
        if (!kPackKeys.count(key)) problems.add(f.path, kv.first, fmt::format("unknown key '{}'", key));
      }
      auto pack = scalar(doc["pack"]);
      if (!pack) {
        problems.add(f.path, doc, "missing 'pack' name");
        continue;
      }
      if (!packs.insert(*pack).second)
        problems.add(f.path, doc["pack"], fmt::format("duplicate pack '{}'", *pack));
      std::map<std::string, std::string> defines;
      if (doc["defines"].IsDefined()) {
        if (!doc["defines"].IsMap()) {
          problems.add(f.path, doc["defines"], "'defines' must be a mapping");
        } else {
          for (const auto& kv : doc["defines"]) defines[kv.first.as<std::string>()] = kv.second.as<std::string>();
        }
      }
      const YAML::Node& rules = doc["rules"];
      if (!rules.IsSequence()) {
        problems.add(f.path, doc, "'rules' must be a list");
        continue;
      }
      for (const auto& r : rules) loadRule(f.path, *pack, r, defines, problems, set->rules);
    } catch (const YAML::Exception& e) {
      result.errors.push_back(fmt::format("{}:{}: {}", f.path, e.mark.line + 1, e.msg));
    }
  }
  std::map<std::string, const Rule*> ids;
  for (const auto& r : set->rules) {
    auto [it, inserted] = ids.emplace(r.id, &r);
    if (!inserted)
      result.errors.push_back(fmt::format("{}:{}: duplicate rule id '{}' (first at {}:{})", r.file,
                                          r.line, r.id, it->second->file, it->second->line));
  }
  std::map<std::string, const Relation*> relation_ids;
  for (const auto& r : set->relations) {
    auto [it, inserted] = relation_ids.emplace(r.id, &r);
    if (!inserted)
      result.errors.push_back(fmt::format("{}:{}: duplicate relation id '{}' (first at {}:{})", r.file, r.line,
                                          r.id, it->second->file, it->second->line));
  }
  if (!result.errors.empty()) return result;
  auto trimmed = base_version;
  while (!trimmed.empty() && std::isspace(static_cast<unsigned char>(trimmed.back()))) trimmed.pop_back();
  set->version = fmt::format("{}+{:08x}", trimmed.empty() ? "0.0.0" : trimmed,
                             static_cast<uint32_t>(hash ^ (hash >> 32)));
  result.rules = std::move(set);
  return result;
}

std::vector<std::string> checkRuleExamples(const std::shared_ptr<const RuleSet>& rules) {
  std::vector<std::string> problems;
  RuleEngine engine(rules);
  for (const auto& r : rules->rules) {
    if (r.deprecated) continue;
    SourceKind kind = r.sources.empty() ? SourceKind::kApplication : r.sources.front();
    for (const auto& ex : r.match_examples) {
      const Rule* won = engine.match(ex, kind);
      if (won != &r)
        problems.push_back(fmt::format("{}:{}: rule {}: match example {} by: \"{}\"", r.file, r.line,
                                       r.id, won ? "won by " + won->id + " instead," : "not matched",
                                       ex));
    }
    // A record's text ends without the line's trailing blanks and newline, so a literal that ends
    // in them is not in the text when the pattern can match with the text ending there. Checked
    // on each match example cut just before such a literal's trailing blanks.
    const auto holdsPrefilter = [&r](std::string_view text) {
      for (const auto& lit : r.prefilters)
        if (text.find(lit) != std::string_view::npos) return true;
      return false;
    };
    for (const auto& lit : r.prefilters) {
      size_t keep = lit.size();
      while (keep > 0 && (lit[keep - 1] == ' ' || lit[keep - 1] == '\t' || lit[keep - 1] == '\n')) --keep;
      if (keep == lit.size() || keep == 0 || !r.regex) continue;
      bool told = false;
      for (const auto& ex : r.match_examples) {
        if (told) break;
        for (size_t at = ex.find(lit.substr(0, keep)); at != std::string::npos; at = ex.find(lit.substr(0, keep), at + 1)) {
          const std::string_view cut = std::string_view(ex).substr(0, at + keep);
          if (!holdsPrefilter(cut) && RE2::PartialMatch(re2::StringPiece(cut.data(), cut.size()), *r.regex)) {
            problems.push_back(fmt::format(
                "{}:{}: rule {}: prefilter '{}' is not needed for a match: the pattern matches \"{}\" (a record "
                "whose line ends there), which holds none of the rule's prefilters",
                r.file, r.line, r.id, lit, cut));
            told = true;
            break;
          }
        }
      }
    }
    for (const auto& ex : r.no_match_examples) {
      bool hit = false;
      for (const auto& lit : r.prefilters) hit = hit || ex.find(lit) != std::string::npos;
      if (hit && RE2::PartialMatch(ex, *r.regex))
        problems.push_back(
            fmt::format("{}:{}: rule {}: no_match example matches: \"{}\"", r.file, r.line, r.id, ex));
    }
  }
  for (auto& p : phases::checkRelationExamples(rules->relations)) problems.push_back(std::move(p));
  for (auto& p : checkMetricRuleExamples(*rules)) problems.push_back(std::move(p));
  return problems;
}

std::vector<std::string> checkTaxonomy(const RuleSet& rules) {
  std::vector<std::string> problems;
  auto in = [](std::string_view x, std::initializer_list<std::string_view> set) {
    return std::find(set.begin(), set.end(), x) != set.end();
  };
  auto has = [](std::string_view s, std::initializer_list<std::string_view> words) {
    return std::any_of(words.begin(), words.end(), [&](std::string_view w) { return s.find(w) != std::string_view::npos; });
  };
  for (const auto& r : rules.rules) {
    if (r.deprecated) continue;
    const SubDomain d = r.sub_domain;
    const bool root = r.role == Role::kRoot;
    std::vector<std::string> why;
    // docs/taxonomy.md, "Container runtimes and the toolkit": the node's GPU software stack; the
    // image and the command are the user's, the registry a service.
    if (r.category == "container") {
      SubDomain want = has(r.symptom, {"container_image_", "container_command_"}) ? SubDomain::kApplication
                       : has(r.symptom, {"registry"})                             ? SubDomain::kInfrastructure
                                                                                  : SubDomain::kSystemSoftware;
      if (d != want && !(d == SubDomain::kNone && !root))
        why.push_back(fmt::format("a container rule ({}) is {}", r.symptom, subDomainName(want)));
    }
    // "Storage": unavailable, full or read-only shared storage is infrastructure; a local disk's
    // fault is hardware.
    if (r.category == "storage" && d != SubDomain::kInfrastructure && !(d == SubDomain::kNone && !root))
      why.push_back("a storage rule is infrastructure");
    if (r.category == "local_storage" && r.role != Role::kContext && r.role != Role::kTeardown &&
        d != SubDomain::kHardware)
      why.push_back("a local-disk rule is hardware");
    // "Version mismatches": system_software wherever they show.
    if (has(r.symptom, {"version_mismatch", "driver_library_mismatch", "driver_mismatch", "dso_mismatch"}) &&
        d != SubDomain::kSystemSoftware && !(d == SubDomain::kNone && !root))
      why.push_back("a version mismatch is system_software");
    // "Configuration vs part": NVLink links and their training are the GPU interconnect.
    if ((r.category == "nvlink" || has(r.symptom, {"ali_training"})) && d != SubDomain::kNetwork &&
        !(d == SubDomain::kNone && !root))
      why.push_back("an NVLink rule is network");
    // Parts of the node a technician replaces.
    if (in(r.category, {"cpu", "thermal", "power_supply", "system_board", "platform", "gpu_power"}) &&
        d != SubDomain::kHardware && !(d == SubDomain::kNone && !root))
      why.push_back(fmt::format("a {} rule is hardware", r.category));
    if (r.category == "scheduler" && d != SubDomain::kInfrastructure && d != SubDomain::kApplication &&
        d != SubDomain::kNone)
      why.push_back("a scheduler rule is infrastructure (application for the job's own limits)");
    if (d == SubDomain::kNone && root) why.push_back("a root with sub_domain none decides nothing");
    // NVIDIA's catalogue: a part to check is hardware.
    auto imm = r.nvidia.find("immediate");
    if (imm != r.nvidia.end() && imm->second.find("CHECK_MECHANICALS") != std::string::npos &&
        d != SubDomain::kHardware)
      why.push_back("NVIDIA's catalogue says CHECK_MECHANICALS: hardware");
    for (const auto& w : why)
      problems.push_back(fmt::format("{}:{}: rule {}: sub_domain {} contradicts docs/taxonomy.md: {}", r.file, r.line,
                                     r.id, subDomainName(d), w));
  }
  // A relation saying the fault lies in a service names storage/cloud rules; one saying it lies
  // between nodes names network rules.
  for (const auto& rel : rules.relations) {
    if (rel.effect != RelationEffect::kService && rel.effect != RelationEffect::kBetween) continue;
    // A `between` fault is the path (network), a mismatch of the software at its ends
    // (system_software: a version differing between nodes), or the job's own configuration that
    // every node runs (application: a memory requirement above every node's memory, where the
    // launcher reports only the first rank killed).
    const bool service = rel.effect == RelationEffect::kService;
    for (const auto& id : rel.symptom.rules) {
      const Rule* r = rules.find(id);
      if (!r) continue;
      const bool fits = service ? r->sub_domain == SubDomain::kInfrastructure
                                : r->sub_domain == SubDomain::kNetwork || r->sub_domain == SubDomain::kSystemSoftware ||
                                      r->sub_domain == SubDomain::kApplication;
      if (!fits)
        problems.push_back(fmt::format("{}:{}: relation {}: names rule {} ({}), but a {} relation is about {} faults",
                                       rel.file, rel.line, rel.id, id, subDomainName(r->sub_domain),
                                       relationEffectName(rel.effect),
                                       service ? "infrastructure" : "network, system_software or application"));
    }
  }
  return problems;
}

RuleFilesRead readRuleFiles(const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  RuleFilesRead out;
  std::vector<std::string> paths;
  bool version_read = false;
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      out.errors.push_back(fmt::format("{}: not a directory", dir));
      continue;
    }
    if (!version_read && fs::exists(fs::path(dir) / "VERSION")) {
      std::ifstream in(fs::path(dir) / "VERSION");
      std::getline(in, out.base_version);
      version_read = true;
    }
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      auto ext = it->path().extension();
      if (it->is_regular_file() && (ext == ".yaml" || ext == ".yml")) paths.push_back(it->path().string());
    }
    if (ec) out.errors.push_back(fmt::format("{}: {}", dir, ec.message()));
  }
  std::sort(paths.begin(), paths.end());
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    if (!in) {
      out.errors.push_back(fmt::format("{}: cannot read", p));
      continue;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    out.files.push_back({p, ss.str()});
  }
  return out;
}

RuleLoadResult loadRuleDirs(const std::vector<std::string>& dirs) {
  auto read = readRuleFiles(dirs);
  auto result = loadRuleSet(read.files, read.base_version);
  result.errors.insert(result.errors.begin(), read.errors.begin(), read.errors.end());
  if (!read.errors.empty()) result.rules.reset();
  return result;
}

}  // namespace faultline::common

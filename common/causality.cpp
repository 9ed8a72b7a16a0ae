#include "common/causality.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

namespace faultline::common {

namespace {

constexpr int64_t kSecNs = 1'000'000'000;

const std::set<std::string> kRelationKeys = {"id",    "since",  "reason",      "effect",   "symptom",
                                             "cause", "scope",  "window", "cause_domain",      "same_fields", "peer_field",
                                             "plausible", "until", "examples"};
const std::set<std::string> kMatcherKeys = {"rule", "not_rule",     "category", "sub_domain", "not_sub_domain", "role",
                                            "source",   "min_severity", "field", "node_fact", "fallback_only"};
const std::set<std::string> kSymptomKeys = {"rule",   "node",  "device", "t",      "domain", "role",
                                            "category", "severity", "source", "fields", "fallback", "count"};

bool listAccepts(const std::vector<std::string>& ids, const std::string& v) {
  if (ids.empty()) return true;
  return std::any_of(ids.begin(), ids.end(), [&](const std::string& id) {
    if (!id.empty() && id.back() == '*') return v.compare(0, id.size() - 1, id, 0, id.size() - 1) == 0;
    return id == v;
  });
}

template <typename T>
bool contains(const std::vector<T>& v, const T& x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

std::optional<SourceKind> parseSourceKind(std::string_view s) {
  for (auto k : {SourceKind::kKernel, SourceKind::kJournal, SourceKind::kFabricManager, SourceKind::kApplication, SourceKind::kMetric})
    if (sourceKindName(k) == s) return k;
  return std::nullopt;
}

// A scalar or a list of scalars, as strings.
std::vector<std::string> strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (!n.IsDefined()) return out;
  if (n.IsScalar()) out.push_back(n.as<std::string>());
  if (n.IsSequence())
    for (const auto& x : n) out.push_back(x.as<std::string>());
  return out;
}

struct Loader {
  const std::string& file;
  std::vector<std::string>& problems;

  void add(const YAML::Node& at, const std::string& why) {
    problems.push_back(fmt::format("{}:{}: {}", file, at.IsDefined() ? at.Mark().line + 1 : 0, why));
  }

  template <typename T, typename Parse>
  std::vector<T> enums(const YAML::Node& n, Parse parse, const char* what) {
    std::vector<T> out;
    for (const auto& s : strings(n)) {
      if (auto v = parse(s)) out.push_back(*v);
      else add(n, fmt::format("unknown {} '{}'", what, s));
    }
    return out;
  }

  // Durations: a number of seconds, or "any" (unbounded).
  int64_t seconds(const YAML::Node& n) {
    auto s = n.as<std::string>();
    if (s == "any") return INT64_MAX;
    try {
      size_t used = 0;
      double v = std::stod(s, &used);
      if (used == s.size() && v >= 0) return static_cast<int64_t>(v * kSecNs);
    } catch (const std::exception&) {
    }
    add(n, fmt::format("'{}' is not a number of seconds or 'any'", s));
    return 0;
  }

  SymptomMatcher matcher(const YAML::Node& n) {
    SymptomMatcher m;
    if (!n.IsDefined() || !n.IsMap()) {
      add(n, "a symptom selector must be a mapping");
      return m;
    }
    for (const auto& kv : n) {
      auto key = kv.first.as<std::string>();
      if (!kMatcherKeys.count(key)) add(kv.first, fmt::format("unknown selector key '{}'", key));
    }
    m.rules = strings(n["rule"]);
    m.not_rules = strings(n["not_rule"]);
    m.categories = strings(n["category"]);
    m.sub_domains = enums<SubDomain>(n["sub_domain"], parseSubDomain, "sub_domain");
    m.not_sub_domains = enums<SubDomain>(n["not_sub_domain"], parseSubDomain, "sub_domain");
    m.roles = enums<Role>(n["role"], parseRole, "role");
    m.sources = enums<SourceKind>(n["source"], parseSourceKind, "source");
    if (n["min_severity"]) {
      auto v = enums<Severity>(n["min_severity"], parseSeverity, "severity");
      if (!v.empty()) m.min_severity = v.front();
    }
    if (const auto& f = n["field"]; f) {
      if (!f.IsMap()) add(f, "'field' must map field names to present | absent | a value");
      else
        for (const auto& kv : f) m.fields[kv.first.as<std::string>()] = kv.second.as<std::string>();
    }
    if (const auto& f = n["node_fact"]; f) {
      if (!f.IsMap()) {
        add(f, "'node_fact' must be a mapping");
      } else {
        for (const auto& kv : f) {
          auto k = kv.first.as<std::string>(), v = kv.second.as<std::string>();
          if (k != "nvswitch") add(kv.first, fmt::format("unknown node fact '{}'", k));
          if (v != "true" && v != "false" && v != "unknown")
            add(kv.second, fmt::format("node fact '{}' must be true, false or unknown", k));
          m.node_facts[k] = v;
        }
      }
    }
    if (n["fallback_only"]) m.fallback_only = n["fallback_only"].as<bool>();
    if (m.empty()) add(n, "an empty selector matches every symptom; name at least one property");
    return m;
  }

  std::optional<RelationExample> example(const YAML::Node& n) {
    RelationExample ex;
    ex.line = n.Mark().line + 1;
    if (!n.IsMap() || !n["symptoms"] || !n["symptoms"].IsMap() || !n["expect"] || !n["expect"].IsMap()) {
      add(n, "an example needs 'symptoms' (name: symptom) and 'expect' (name: effect) mappings");
      return std::nullopt;
    }
    for (const auto& kv : n["symptoms"]) {
      const YAML::Node& v = kv.second;
      if (!v.IsMap()) {
        add(v, "an example symptom must be a mapping");
        return std::nullopt;
      }
      for (const auto& p : v)
        if (!kSymptomKeys.count(p.first.as<std::string>()))
          add(p.first, fmt::format("unknown example symptom key '{}'", p.first.as<std::string>()));
      Symptom s;
      s.rule_id = v["rule"].as<std::string>("");
      s.symptom = s.rule_id;
      s.node = v["node"].as<std::string>("");
      s.device = v["device"].as<std::string>("");
      s.category = v["category"].as<std::string>("");
      s.count = v["count"].as<uint32_t>(1);
      s.fallback_root = v["fallback"].as<bool>(false);
      auto one = [&](const char* key, auto parse, auto def) {
        if (!v[key]) return def;
        auto r = parse(v[key].as<std::string>());
        if (!r) add(v[key], fmt::format("bad {} '{}'", key, v[key].as<std::string>()));
        return r.value_or(def);
      };
      s.sub_domain = one("domain", parseSubDomain, SubDomain::kNone);
      s.role = one("role", parseRole, Role::kRoot);
      s.severity = one("severity", parseSeverity, Severity::kError);
      s.source_kind = one("source", parseSourceKind, SourceKind::kKernel);
      if (v["t"] && v["t"].as<std::string>() != "untimed") {
        s.time_known = true;
        s.first_ns = s.last_ns = static_cast<int64_t>(v["t"].as<double>() * kSecNs);
      }
      if (v["fields"] && v["fields"].IsMap())
        for (const auto& f : v["fields"]) s.fields[f.first.as<std::string>()] = f.second.as<std::string>();
      if (s.rule_id.empty()) add(v, "an example symptom needs a 'rule'");
      ex.symptoms.push_back({kv.first.as<std::string>(), std::move(s)});
    }
    static const std::set<std::string> kEffects = {"consequence", "context", "wrapper", "peer",
                                                   "job_wide",    "persists", "service", "between", "locates", "none", "dropped"};
    for (const auto& kv : n["expect"]) {
      auto name = kv.first.as<std::string>(), eff = kv.second.as<std::string>();
      if (!kEffects.count(eff)) add(kv.second, fmt::format("unknown expected effect '{}'", eff));
      bool known = std::any_of(ex.symptoms.begin(), ex.symptoms.end(), [&](const auto& e) { return e.name == name; });
      if (!known) add(kv.first, fmt::format("expectation names no example symptom '{}'", name));
      ex.expect[name] = eff;
    }
    if (n["job_nodes"]) ex.job_nodes = strings(n["job_nodes"]);
    if (n["job_start"]) ex.job_start_offset_ns = static_cast<int64_t>(n["job_start"].as<double>() * kSecNs);
    return ex;
  }

  // Where and when a cause counts: scope, window, same fields, domain.
  void shape(const YAML::Node& n, Relation& r) {
    if (n["scope"]) {
      static const std::map<std::string, RelationScope> kScope = {{"same_device", RelationScope::kSameDevice},
                                                                 {"same_node", RelationScope::kSameNode},
                                                                 {"other_node", RelationScope::kOtherNode},
                                                                 {"any_node", RelationScope::kAnyNode}};
      auto s = n["scope"].as<std::string>();
      if (auto it = kScope.find(s); it != kScope.end()) r.scope = it->second;
      else add(n["scope"], fmt::format("unknown scope '{}'", s));
    }
    if (const auto& w = n["window"]; w) {
      if (!w.IsMap()) add(w, "'window' must be a mapping with 'before' and/or 'after' (seconds or 'any')");
      else {
        for (const auto& kv : w)
          if (kv.first.as<std::string>() != "before" && kv.first.as<std::string>() != "after")
            add(kv.first, fmt::format("unknown window key '{}'", kv.first.as<std::string>()));
        if (w["before"]) r.before_ns = seconds(w["before"]);
        if (w["after"]) r.after_ns = seconds(w["after"]);
      }
    }
    for (const auto& p : strings(n["same_fields"])) {
      auto eq = p.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == p.size()) add(n["same_fields"], fmt::format("'{}' is not symptom_field=cause_field", p));
      else r.same_fields.emplace_back(p.substr(0, eq), p.substr(eq + 1));
    }
    if (n["cause_domain"]) {
      r.cause_domain = n["cause_domain"].as<std::string>();
      if (r.cause_domain != "same" && r.cause_domain != "other")
        add(n["cause_domain"], fmt::format("cause_domain must be same or other, not '{}'", r.cause_domain));
    }
  }

  void relation(const YAML::Node& n, std::vector<Relation>& out) {
    if (!n.IsMap()) {
      add(n, "a relation must be a mapping");
      return;
    }
    const size_t before = problems.size();
    Relation r;
    r.file = file;
    r.line = n.Mark().line + 1;
    for (const auto& kv : n) {
      auto key = kv.first.as<std::string>();
      if (!kRelationKeys.count(key)) add(kv.first, fmt::format("unknown key '{}'", key));
    }
    for (const char* k : {"id", "since", "reason", "effect", "symptom", "examples"})
      if (!n[k]) add(n, fmt::format("missing '{}'", k));
    if (problems.size() > before) return;
    r.id = n["id"].as<std::string>();
    r.since = n["since"].as<std::string>();
    r.reason = n["reason"].as<std::string>();
    static const std::map<std::string, RelationEffect> kEffect = {
        {"consequence", RelationEffect::kConsequence}, {"context", RelationEffect::kContext},
        {"wrapper", RelationEffect::kWrapper},         {"peer", RelationEffect::kPeer},
        {"job_wide", RelationEffect::kJobWide},        {"persists", RelationEffect::kPersists},
        {"service", RelationEffect::kService},         {"between", RelationEffect::kBetween},
        {"locates", RelationEffect::kLocates}};
    auto effect = n["effect"].as<std::string>();
    if (auto it = kEffect.find(effect); it != kEffect.end()) r.effect = it->second;
    else add(n["effect"], fmt::format("unknown effect '{}'", effect));
    r.symptom = matcher(n["symptom"]);
    if (n["cause"]) r.cause = matcher(n["cause"]);
    if (n["until"]) r.until = matcher(n["until"]);
    shape(n, r);
    if (n["peer_field"]) r.peer_field = n["peer_field"].as<std::string>();
    r.plausible = enums<SubDomain>(n["plausible"], parseSubDomain, "sub_domain");
    if (r.effect == RelationEffect::kWrapper && !r.cause) add(n, "a wrapper relation names its detail in 'cause'");
    if (r.effect == RelationEffect::kLocates && !r.cause) add(n, "a locates relation names the report that places it in 'cause'");
    if (r.effect == RelationEffect::kPersists && !r.until) add(n, "a persists relation names what ends the fault in 'until'");
    if (r.effect == RelationEffect::kWrapper && r.plausible.empty()) add(n, "a wrapper relation lists its 'plausible' domains");
    if (!n["examples"] || !n["examples"].IsSequence() || n["examples"].size() == 0) add(n["examples"], "'examples' must be a non-empty list");
    else
      for (const auto& e : n["examples"])
        if (auto ex = example(e)) r.examples.push_back(std::move(*ex));
    if (problems.size() == before) out.push_back(std::move(r));
  }
};

}  // namespace

bool SymptomMatcher::empty() const {
  return rules.empty() && not_rules.empty() && categories.empty() && sub_domains.empty() && not_sub_domains.empty() && roles.empty() &&
         sources.empty() && !min_severity && fields.empty() && node_facts.empty() && !fallback_only;
}

std::string_view relationEffectName(RelationEffect e) {
  switch (e) {
    case RelationEffect::kConsequence: return "consequence";
    case RelationEffect::kContext: return "context";
    case RelationEffect::kWrapper: return "wrapper";
    case RelationEffect::kPeer: return "peer";
    case RelationEffect::kJobWide: return "job_wide";
    case RelationEffect::kPersists: return "persists";
    case RelationEffect::kService: return "service";
    case RelationEffect::kBetween: return "between";
    case RelationEffect::kLocates: return "locates";
  }
  return "consequence";
}

bool matchesKind(const SymptomMatcher& m, const Symptom& s) {
  if (!listAccepts(m.rules, s.rule_id) || !listAccepts(m.categories, s.category)) return false;
  if (!m.not_rules.empty() && listAccepts(m.not_rules, s.rule_id)) return false;
  if (!contains(m.sub_domains, s.sub_domain) || !contains(m.sources, s.source_kind)) return false;
  if (!m.not_sub_domains.empty() &&
      std::find(m.not_sub_domains.begin(), m.not_sub_domains.end(), s.sub_domain) != m.not_sub_domains.end())
    return false;
  if (m.min_severity && s.severity < *m.min_severity) return false;
  return !m.fallback_only || s.fallback_root;
}

bool matchesState(const SymptomMatcher& m, const Symptom& s, const RelationContext& ctx) {
  if (!contains(m.roles, ctx.role)) return false;
  for (const auto& [k, want] : m.fields) {
    const std::string& v = s.field(k);
    if (want == "present" ? v.empty() : want == "absent" ? !v.empty() : v != want) return false;
  }
  for (const auto& [k, want] : m.node_facts) {
    std::string_view have = !ctx.nvswitch ? "unknown" : *ctx.nvswitch ? "true" : "false";
    if (have != want) return false;
  }
  return true;
}

bool matches(const SymptomMatcher& m, const Symptom& s, const RelationContext& ctx) {
  return matchesKind(m, s) && matchesState(m, s, ctx);
}

bool causeFits(const Relation& r, const Symptom& s, const Symptom& cause, const RelationContext& cause_ctx,
               bool cause_first) {
  return &s != &cause && r.cause && matches(*r.cause, cause, cause_ctx) && causePlaced(r, s, cause, cause_first);
}

bool causePlaced(const Relation& r, const Symptom& s, const Symptom& cause, bool cause_first) {
  switch (r.scope) {
    case RelationScope::kSameDevice:
      if (s.node != cause.node || s.device.empty() || s.device != cause.device) return false;
      break;
    case RelationScope::kSameNode:
      if (s.node != cause.node) return false;
      break;
    case RelationScope::kOtherNode:
      if (s.node == cause.node) return false;
      break;
    case RelationScope::kAnyNode: break;
  }
  if (r.cause_domain == "same" && s.sub_domain != cause.sub_domain) return false;
  if (r.cause_domain == "other" && s.sub_domain == cause.sub_domain) return false;
  if (s.time_known && cause.time_known) {
    if (r.before_ns != INT64_MAX && s.first_ns < cause.first_ns - r.before_ns) return false;
    if (r.after_ns != INT64_MAX && s.first_ns > cause.first_ns + r.after_ns) return false;
    if (r.before_ns == 0 && s.first_ns == cause.first_ns && !cause_first) return false;
  }
  for (const auto& [mine, theirs] : r.same_fields)
    if (s.field(mine).empty() || s.field(mine) != cause.field(theirs)) return false;
  return true;
}

void loadRelations(const std::string& file, const YAML::Node& doc, std::vector<Relation>& out,
                   std::vector<std::string>& problems) {
  Loader l{file, problems};
  for (const auto& kv : doc) {
    auto key = kv.first.as<std::string>();
    if (key != "relations" && key != "description") l.add(kv.first, fmt::format("unknown key '{}'", key));
  }
  const YAML::Node& list = doc["relations"];
  if (!list || !list.IsSequence()) {
    l.add(doc, "'relations' must be a list");
    return;
  }
  for (const auto& n : list) {
    try {
      l.relation(n, out);
    } catch (const YAML::Exception& e) {
      problems.push_back(fmt::format("{}:{}: {}", file, e.mark.line + 1, e.msg));
    }
  }
}

}  // namespace faultline::common

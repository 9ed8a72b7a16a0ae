#include "common/rule_engine.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <cassert>
#include <numeric>
#include <set>

namespace faultline::common {

// Literals shared by at least this many rules get a PatternSet.
constexpr size_t kMinRulesForSet = 8;

struct RuleEngine::PatternSet {
  explicit PatternSet(const RE2::Options& o) : set(o, RE2::UNANCHORED) {}
  RE2::Set set;
};

struct RuleEngine::Lazy {
  explicit Lazy(size_t rules, size_t literals)
      : rule_once(new std::once_flag[rules]), rule_re(rules), set_once(new std::once_flag[literals]) {}
  std::unique_ptr<std::once_flag[]> rule_once;
  std::vector<std::shared_ptr<const RE2>> rule_re;
  std::unique_ptr<std::once_flag[]> set_once;
};

namespace {
RE2::Options ruleOptions() {  // as the rule loader compiles patterns
  RE2::Options o;
  o.set_log_errors(false);
  return o;
}
}  // namespace

const RE2* RuleEngine::regexOf(size_t i) const {
  const Rule& r = rules_->rules[i];
  if (r.regex) return r.regex.get();
  std::call_once(lazy_->rule_once[i], [&] {
    auto re = std::make_shared<const RE2>(r.pattern, ruleOptions());
    if (re->ok()) lazy_->rule_re[i] = std::move(re);
  });
  return lazy_->rule_re[i].get();
}

const RuleEngine::PatternSet* RuleEngine::setOf(size_t l) const {
  if (by_literal_[l].size() < kMinRulesForSet) return nullptr;
  std::call_once(lazy_->set_once[l], [&] {
    auto ps = std::make_unique<PatternSet>(ruleOptions());
    bool ok = true;
    for (size_t idx : by_literal_[l]) ok = ok && ps->set.Add(rules_->rules[idx].pattern, nullptr) >= 0;
    // Written once, read only after call_once: else one search per rule.
    if (ok && ps->set.Compile()) const_cast<RuleEngine*>(this)->literal_sets_[l] = std::move(ps);
  });
  return literal_sets_[l].get();
}

struct RuleEngine::Prefilter {
  explicit Prefilter(const RE2::Options& o) : set(o, RE2::UNANCHORED) {}
  RE2::Set set;
};

std::string renderTemplate(std::string_view tmpl, const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(tmpl.size() + 16);
  size_t pos = 0;
  while (pos < tmpl.size()) {
    size_t open = tmpl.find('{', pos);
    if (open == std::string_view::npos) break;
    size_t close = tmpl.find('}', open + 1);
    if (close == std::string_view::npos) break;
    out.append(tmpl.substr(pos, open - pos));
    auto it = values.find(std::string(tmpl.substr(open + 1, close - open - 1)));
    if (it != values.end()) out += it->second;
    pos = close + 1;
  }
  out.append(tmpl.substr(pos));
  return out;
}

RuleEngine::RuleEngine(std::shared_ptr<const RuleSet> rules) : rules_(std::move(rules)) {
  assert(rules_);
  const auto& rs = rules_->rules;
  // Evaluation order: priority descending, then load order.
  std::vector<size_t> order(rs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rs[a].priority > rs[b].priority; });
  order_rank_.assign(rs.size(), 0);
  for (size_t i = 0; i < order.size(); ++i) order_rank_[order[i]] = i;

  // One pass over a record tells which distinct literals occur (the literals' Vectorscan
  // database; RE2::Set only if that cannot be built); only the rules owning those literals run
  // their (more expensive) patterns.
  std::map<std::string, int> literal_index;
  std::vector<std::string> literals;
  for (size_t i = 0; i < rs.size(); ++i) {
    if (rs[i].deprecated || (!rs[i].regex && rs[i].pattern.empty())) continue;
    for (const auto& lit : rs[i].prefilters) {
      auto [it, inserted] = literal_index.emplace(lit, static_cast<int>(by_literal_.size()));
      if (inserted) {
        literals.push_back(lit);
        by_literal_.emplace_back();
      }
      by_literal_[it->second].push_back(i);
    }
  }
  std::string scanner_error;
  if (rules_->literal_scanner && rules_->literal_scanner->literals() == literals)
    literal_scanner_ = rules_->literal_scanner;  // precompiled (the rule cache)
  else
    literal_scanner_ = LiteralScanner::build(literals, &scanner_error);
  literals_ = literals;
  if (!literal_scanner_) {
    RE2::Options opts;
    opts.set_log_errors(false);
    opts.set_max_mem(64 << 20);
    prefilter_ = std::make_unique<Prefilter>(opts);
    for (const auto& lit : literals) {
      std::string err;
      prefilter_->set.Add(RE2::QuoteMeta(lit), &err);
    }
    bool compiled = prefilter_->set.Compile();
    assert(compiled && "prefilter set failed to compile");
    (void)compiled;
  }
  for (auto& v : by_literal_) {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return order_rank_[a] < order_rank_[b]; });
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  literal_sets_.resize(by_literal_.size());
  lazy_ = std::make_unique<Lazy>(rs.size(), by_literal_.size());
}

RuleEngine::~RuleEngine() = default;

std::vector<std::string> RuleEngine::literalsOf(const RuleSet& rules) {
  std::set<std::string_view> seen;
  std::vector<std::string> literals;
  for (const auto& r : rules.rules) {
    if (r.deprecated || (!r.regex && r.pattern.empty())) continue;
    for (const auto& lit : r.prefilters)
      if (seen.insert(lit).second) literals.push_back(lit);
  }
  return literals;
}

const Rule* RuleEngine::match(std::string_view text, SourceKind kind,
                              std::map<std::string, std::string>* captures) const {
  if (by_literal_.empty()) return nullptr;
  // Scratch buffers reused across calls on this thread: this runs once per log record.
  thread_local std::vector<int> hits;
  thread_local std::vector<size_t> candidates;
  hits.clear();
  candidates.clear();
  // The literals' Vectorscan database answers which occur; RE2::Set only if that is missing or fails.
  bool found = false;
  if (literal_scanner_ && literal_scanner_->literalsIn(text, &hits)) {
    found = !hits.empty();
  } else if (prefilter_) {
    found = prefilter_->set.Match(re2::StringPiece(text.data(), text.size()), &hits);
  } else {  // the search failed: every rule with a literal in the text, found the slow way
    hits.clear();
    for (size_t i = 0; i < by_literal_.size(); ++i)
      if (text.find(literals_[i]) != std::string_view::npos) hits.push_back(static_cast<int>(i));
    found = !hits.empty();
  }
  if (!found) return nullptr;
  const auto& rs = rules_->rules;
  // Merge candidate lists (usually one or two short lists) in evaluation order.
  thread_local std::vector<int> matched;
  for (int h : hits) {
    const auto& owners = by_literal_[h];
    RE2::Set::ErrorInfo info{RE2::Set::kNoError};
    matched.clear();
    if (const PatternSet* ps = setOf(static_cast<size_t>(h));
        ps && (ps->set.Match(re2::StringPiece(text.data(), text.size()), &matched, &info) ||
               info.kind == RE2::Set::kNoError)) {
      for (int m : matched) candidates.push_back(owners[static_cast<size_t>(m)]);  // only rules that match
    } else {
      candidates.insert(candidates.end(), owners.begin(), owners.end());
    }
  }
  std::sort(candidates.begin(), candidates.end(),
            [&](size_t a, size_t b) { return order_rank_[a] < order_rank_[b]; });
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  re2::StringPiece input(text.data(), text.size());
  for (size_t idx : candidates) {
    const Rule& r = rs[idx];
    if (!r.appliesTo(kind)) continue;
    const RE2* compiled = regexOf(idx);
    if (!compiled) continue;  // a pattern RE2 refuses (the loader reports those) matches nothing
    const RE2& re = *compiled;
    if (!captures) {
      if (RE2::PartialMatch(input, re)) return &r;
      continue;
    }
    int n = re.NumberOfCapturingGroups();
    std::vector<re2::StringPiece> groups(n + 1);
    if (!re.Match(input, 0, input.size(), RE2::UNANCHORED, groups.data(), n + 1)) continue;
    captures->clear();
    // By index, not by NamedCapturingGroups(): a name may recur in several alternatives of one
    // pattern, and that map knows only its first group. The participating group gives the value.
    for (const auto& [gi, name] : re.CapturingGroupNames())
      if (groups[gi].data() != nullptr) captures->emplace(name, std::string(groups[gi].data(), groups[gi].size()));
    return &r;
  }
  return nullptr;
}

namespace {
bool looksLikePci(std::string_view s) {
  return s.find(':') != std::string_view::npos && s.size() >= 5 && s.size() <= 20;
}
}  // namespace

std::optional<Symptom> RuleEngine::extract(const LogRecord& record, const MatchContext& ctx) const {
  std::map<std::string, std::string> caps;
  const Rule* r = match(record.text, ctx.kind, &caps);
  if (!r) return std::nullopt;
  Symptom s;
  s.rule_id = r->id;
  s.symptom = r->symptom;
  s.sub_domain = r->sub_domain;
  s.category = r->category;
  s.role = r->role;
  s.severity = r->severity;
  s.fallback_root = r->fallback_root;
  s.source = ctx.source;
  s.source_kind = ctx.kind;
  s.first_ns = s.last_ns = record.time_ns;
  s.time_known = record.time_known;
  s.boot_id = record.boot_id;
  s.fields = r->fields;
  for (auto& [k, v] : caps) s.fields[k] = v;
  if (r->boot_settle_ns > 0 && record.monotonic_ns >= 0 && record.monotonic_ns < r->boot_settle_ns &&
      s.role != Role::kContext) {
    s.role = Role::kContext;
    s.fallback_root = false;
    s.fields["boot_settle"] = "within " + std::to_string(r->boot_settle_ns / 1'000'000'000) + " s of boot";
  }
  if (record.rank >= 0 && !s.fields.count("rank")) s.fields["rank"] = std::to_string(record.rank);
  std::map<std::string, std::string> values = s.fields;
  values["host"] = record.host;
  values["node_default"] = ctx.node;

  std::string node = r->node_template.empty() ? "" : renderTemplate(r->node_template, values);
  if (node.empty() && !ctx.node.empty()) node = ctx.node;
  if (node.empty() && !record.host.empty()) node = record.host;
  if (node.empty() && ctx.node_of_rank)
    if (auto rank = s.rank()) node = ctx.node_of_rank(*rank);
  s.node = node;
  if (!r->device_template.empty()) {
    s.device = renderTemplate(r->device_template, values);
    if (looksLikePci(s.device)) s.device = normalizePciId(s.device);
  }
  values["host"] = s.node.empty() ? record.host : s.node;
  s.summary = renderTemplate(r->summary_template, values);
  // Evidence is the first line of a multi-line record's text, plus the last line (the
  // exception line of a traceback is what an operator reads).
  std::string_view text = record.text;
  if (text.size() > 1024) {
    std::string ev(text.substr(0, 512));
    ev += " … ";
    ev += text.substr(text.size() - 480);
    s.evidence.push_back(std::move(ev));
  } else {
    s.evidence.emplace_back(text);
  }
  return s;
}

}  // namespace faultline::common

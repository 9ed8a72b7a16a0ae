#include "common/rule_engine.h"

#include <re2/re2.h>
#include <re2/set.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <numeric>
#include <set>

namespace faultline::common {

// Literals shared by at least this many rules get a PatternSet.
constexpr size_t kMinRulesForSet = 8;
// Records up to this long are searched by SpanCapture for a rule's match and groups.
constexpr size_t kSearchMax = 2048;

struct RuleEngine::PatternSet {
  explicit PatternSet(const RE2::Options& o) : set(o, RE2::UNANCHORED) {}
  RE2::Set set;
};

struct RuleEngine::Table {
  size_t literal = 0;
  std::string pattern;  // HEAD(?P<name>v1|v2|...)TAIL
  std::string name;     // the named group holding the code
  int group = 0;        // its index
  std::map<std::string, std::vector<size_t>, std::less<>> rules_of_value;  // code -> rules
  std::vector<size_t> rules;
};

// The winning match's regex and its groups (group 0 the whole match), which live in this
// thread's scratch buffers until its next match.
struct RuleEngine::Groups {
  const RE2* re = nullptr;
  const re2::StringPiece* at = nullptr;
};

namespace {
// std::call_once with a flag read first: libstdc++'s call_once goes through pthread_once and
// thread-local state on every call, ~150 instructions, and this runs per candidate rule.
struct Once {
  std::once_flag flag;
  std::atomic<bool> done{false};
};
template <class F>
void runOnce(Once& once, F&& f) {
  if (once.done.load(std::memory_order_acquire)) return;
  std::call_once(once.flag, [&] {
    f();
    once.done.store(true, std::memory_order_release);
  });
}
}  // namespace

// A template split at its "{name}" placeholders (an unclosed '{' is text): the text before each,
// then the text after the last.
struct Template {
  enum Kind { kField, kHost, kNodeDefault };
  struct Piece {
    std::string_view before;
    Kind kind;
    std::string name;
  };
  std::vector<Piece> pieces;
  std::string_view tail;

  explicit Template(std::string_view tmpl = {}) {
    size_t pos = 0;
    while (pos < tmpl.size()) {
      const size_t open = tmpl.find('{', pos);
      if (open == std::string_view::npos) break;
      const size_t close = tmpl.find('}', open + 1);
      if (close == std::string_view::npos) break;
      const auto name = tmpl.substr(open + 1, close - open - 1);
      pieces.push_back({tmpl.substr(pos, open - pos), name == "host" ? kHost : name == "node_default" ? kNodeDefault : kField,
                        std::string(name)});
      pos = close + 1;
    }
    tail = tmpl.substr(pos);
  }
};

struct RuleEngine::Templates {
  Template node, device, summary;
};

struct RuleEngine::Lazy {
  explicit Lazy(size_t rules, size_t literals, size_t tables)
      : rule_once(new Once[rules]), rule_re(rules), capture_once(new Once[rules]), capture(rules),
        set_once(new Once[literals]), table_once(new Once[tables]), table_re(tables),
        templates_once(new Once[rules]), templates(rules) {}
  std::unique_ptr<Once[]> rule_once;
  std::vector<std::shared_ptr<const RE2>> rule_re;
  std::unique_ptr<Once[]> capture_once;
  std::vector<std::unique_ptr<const SpanCapture>> capture;  // rule index -> its span capture, or null
  std::unique_ptr<Once[]> set_once;
  std::unique_ptr<Once[]> table_once;
  std::vector<std::unique_ptr<const RE2>> table_re;
  std::unique_ptr<Once[]> templates_once;
  std::vector<Templates> templates;  // rule index -> its node, device and summary templates, split
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
  runOnce(lazy_->rule_once[i], [&] {
    auto re = std::make_shared<const RE2>(r.pattern, ruleOptions());
    if (re->ok()) lazy_->rule_re[i] = std::move(re);
  });
  return lazy_->rule_re[i].get();
}

const RuleEngine::Templates& RuleEngine::templatesOf(size_t i) const {
  runOnce(lazy_->templates_once[i], [&] {
    const Rule& r = rules_->rules[i];
    lazy_->templates[i] = {Template(r.node_template), Template(r.device_template), Template(r.summary_template)};
  });
  return lazy_->templates[i];
}

const SpanCapture* RuleEngine::spanCaptureOf(size_t i) const {
  runOnce(lazy_->capture_once[i], [&] {
    const RE2* re = regexOf(i);
    auto sc = re ? SpanCapture::compile(rules_->rules[i].pattern) : nullptr;
    // Numbered as RE2 numbers the groups, else not used.
    if (sc && sc->groups() == re->NumberOfCapturingGroups()) lazy_->capture[i] = std::move(sc);
  });
  return lazy_->capture[i].get();
}

const RuleEngine::PatternSet* RuleEngine::setOf(size_t l) const {
  if (rest_of_literal_[l].size() < kMinRulesForSet) return nullptr;
  runOnce(lazy_->set_once[l], [&] {
    auto ps = std::make_unique<PatternSet>(ruleOptions());
    bool ok = true;
    for (size_t idx : rest_of_literal_[l]) ok = ok && ps->set.Add(rules_->rules[idx].pattern, nullptr) >= 0;
    // Written once, read only after call_once: else one search per rule.
    if (ok && ps->set.Compile()) const_cast<RuleEngine*>(this)->literal_sets_[l] = std::move(ps);
  });
  return literal_sets_[l].get();
}

const RE2* RuleEngine::tableRegexOf(size_t t) const {
  runOnce(lazy_->table_once[t], [&] {
    const Table& tab = *tables_[t];
    auto re = std::make_unique<const RE2>(tab.pattern, ruleOptions());
    // The code's group must be where findTables counted it, else the table is not used.
    const auto& names = re->CapturingGroupNames();
    const auto it = names.find(tab.group);
    if (re->ok() && it != names.end() && it->second == tab.name) lazy_->table_re[t] = std::move(re);
  });
  return lazy_->table_re[t].get();
}

namespace {
// A named group whose body is digits only: pattern[open, value_begin) is "(?P<name>",
// pattern[value_begin, value_end) the digits, then ")".
struct DigitGroup {
  size_t open, value_begin, value_end;
  int index;  // its capturing group's number
};

std::vector<DigitGroup> digitGroups(std::string_view p) {
  std::vector<DigitGroup> out;
  int captures = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      ++i;
      continue;
    }
    if (c == '[') {  // a class: skip to its end ('[:alpha:]' inside, ']' first is literal)
      size_t j = i + 1;
      if (j < p.size() && p[j] == '^') ++j;
      if (j < p.size() && p[j] == ']') ++j;
      for (; j < p.size() && p[j] != ']'; ++j) {
        if (p[j] == '\\') ++j;
        else if (p[j] == '[' && j + 1 < p.size() && p[j + 1] == ':') j = std::min(p.find(":]", j + 2), p.size()) + 1;
      }
      i = j;
      continue;
    }
    if (c != '(') continue;
    const bool named = p.compare(i, 4, "(?P<") == 0;
    if (i + 1 < p.size() && p[i + 1] == '?' && !named) continue;  // (?:...), (?i) and the like
    ++captures;
    if (!named) continue;
    const size_t gt = p.find('>', i + 4);
    if (gt == std::string_view::npos) break;
    size_t j = gt + 1;
    while (j < p.size() && p[j] >= '0' && p[j] <= '9') ++j;
    if (j > gt + 1 && j < p.size() && p[j] == ')') out.push_back({i, gt + 1, j, captures});
  }
  return out;
}
}  // namespace

// Groups, per literal, the rules whose patterns are HEAD(?P<name>DIGITS)TAIL with the same HEAD,
// name and TAIL, TAIL starting with \b: a code is then the whole digit run at its place, so at a
// given end of HEAD at most one code's rule can match, and the alternation finds it.
void RuleEngine::findTables() {
  const auto& rs = rules_->rules;
  table_of_rule_.assign(rs.size(), -1);
  tables_of_literal_.assign(by_literal_.size(), {});
  rest_of_literal_ = by_literal_;
  for (size_t l = 0; l < by_literal_.size(); ++l) {
    if (by_literal_[l].size() < kMinRulesForSet) continue;
    // (HEAD, TAIL) -> (rule, digits group) of the rules of this literal that have that form.
    std::map<std::pair<std::string_view, std::string_view>, std::vector<std::pair<size_t, DigitGroup>>> forms;
    for (size_t idx : by_literal_[l]) {
      const Rule& r = rs[idx];
      if (r.prefilters.size() != 1) continue;  // found through one literal only
      const std::string_view p = r.pattern;
      for (const auto& g : digitGroups(p)) {
        const auto tail = p.substr(g.value_end);
        if (tail.substr(1, 2) != "\\b") continue;
        forms[{p.substr(0, g.value_begin), tail}].push_back({idx, g});
      }
    }
    // Largest forms first; a rule joins one table.
    std::vector<const decltype(forms)::value_type*> order;
    for (const auto& f : forms) order.push_back(&f);
    std::stable_sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->second.size() > b->second.size(); });
    for (const auto* f : order) {
      std::vector<std::pair<size_t, DigitGroup>> members;
      for (const auto& m : f->second)
        if (table_of_rule_[m.first] < 0) members.push_back(m);
      if (members.size() < kMinRulesForSet) continue;
      auto tab = std::make_unique<Table>();
      tab->literal = l;
      const auto& [head, tail] = f->first;
      const DigitGroup& g0 = members.front().second;
      tab->name = std::string(head.substr(g0.open + 4, g0.value_begin - g0.open - 5));
      tab->group = g0.index;
      tab->pattern = std::string(head);
      for (size_t k = 0; k < members.size(); ++k) {
        const auto& [idx, g] = members[k];
        std::string code = rs[idx].pattern.substr(g.value_begin, g.value_end - g.value_begin);
        if (k > 0) tab->pattern += '|';
        tab->pattern += code;
        tab->rules_of_value[code].push_back(idx);
        tab->rules.push_back(idx);
        table_of_rule_[idx] = static_cast<int>(tables_.size());
      }
      tab->pattern += tail;
      tables_of_literal_[l].push_back(tables_.size());
      tables_.push_back(std::move(tab));
    }
    auto& rest = rest_of_literal_[l];
    rest.erase(std::remove_if(rest.begin(), rest.end(), [&](size_t idx) { return table_of_rule_[idx] >= 0; }),
               rest.end());
  }
}

struct RuleEngine::Prefilter {
  explicit Prefilter(const RE2::Options& o) : set(o, RE2::UNANCHORED) {}
  RE2::Set set;
};

std::string renderTemplate(std::string_view tmpl, const std::map<std::string, std::string>& values) {
  const Template t(tmpl);
  std::string out;
  for (const auto& piece : t.pieces) {
    out += piece.before;
    if (const auto it = values.find(piece.name); it != values.end()) out += it->second;
  }
  out += t.tail;
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
  findTables();
  literal_sets_.resize(by_literal_.size());
  lazy_ = std::make_unique<Lazy>(rs.size(), by_literal_.size(), tables_.size());
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
  Groups g;
  const Rule* r = matchText(text, kind, captures ? &g : nullptr);
  if (r && captures) putCaptures(g, captures);
  return r;
}

const Rule* RuleEngine::matchLiterals(std::string_view text, const std::vector<int>& hits, SourceKind kind,
                                      std::map<std::string, std::string>* captures) const {
  Groups g;
  const Rule* r = matchGroups(text, hits, kind, captures ? &g : nullptr);
  if (r && captures) putCaptures(g, captures);
  return r;
}

void RuleEngine::putCaptures(const Groups& g, std::map<std::string, std::string>* captures) {
  captures->clear();
  if (!g.re) return;
  // By index, not by NamedCapturingGroups(): a name may recur in several alternatives of one
  // pattern, and that map knows only its first group. The participating group gives the value.
  for (const auto& [gi, name] : g.re->CapturingGroupNames())
    if (g.at[gi].data() != nullptr) captures->emplace(name, std::string(g.at[gi].data(), g.at[gi].size()));
}

const Rule* RuleEngine::matchText(std::string_view text, SourceKind kind, Groups* groups) const {
  if (by_literal_.empty()) return nullptr;
  // Scratch buffers reused across calls on this thread: this runs once per log record.
  thread_local std::vector<int> hits;
  hits.clear();
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
  return matchGroups(text, hits, kind, groups);
}

const Rule* RuleEngine::matchGroups(std::string_view text, const std::vector<int>& hits, SourceKind kind,
                                    Groups* out) const {
  constexpr size_t kUnverified = std::string_view::npos;
  struct Candidate {
    size_t rule;
    size_t at;      // where its table's regex matched it (then it matches), or kUnverified
    size_t groups;  // then: that match's groups, from table_groups[groups]
  };
  const auto& rs = rules_->rules;
  const re2::StringPiece input(text.data(), text.size());
  thread_local std::vector<Candidate> candidates;
  thread_local std::vector<int> matched;
  thread_local std::vector<re2::StringPiece> groups;
  thread_local std::vector<re2::StringPiece> table_groups;  // every table match's groups, one after another
  candidates.clear();
  table_groups.clear();
  for (int h : hits) {
    if (h < 0 || static_cast<size_t>(h) >= by_literal_.size()) continue;
    for (size_t t : tables_of_literal_[h]) {
      const Table& tab = *tables_[t];
      const RE2* re = tableRegexOf(t);
      if (!re) {  // no table regex: each rule's own
        for (size_t idx : tab.rules) candidates.push_back({idx, kUnverified, 0});
        continue;
      }
      // Every position the table's regex matches at (a record rarely holds two heads: whether
      // there is another is asked of the DFA alone), with all its groups.
      const size_t n = static_cast<size_t>(re->NumberOfCapturingGroups()) + 1;
      size_t pos = 0;
      while (pos <= text.size() && (pos == 0 || re->Match(input, pos, text.size(), RE2::UNANCHORED, nullptr, 0))) {
        const size_t first = table_groups.size();
        table_groups.resize(first + n);
        if (!re->Match(input, pos, text.size(), RE2::UNANCHORED, &table_groups[first], static_cast<int>(n))) {
          table_groups.resize(first);
          break;
        }
        const size_t at = static_cast<size_t>(table_groups[first].data() - text.data());
        const auto code = table_groups[first + static_cast<size_t>(tab.group)];
        const auto it = code.data() ? tab.rules_of_value.find(std::string_view(code.data(), code.size()))
                                    : tab.rules_of_value.end();
        if (it != tab.rules_of_value.end()) {
          for (size_t idx : it->second) candidates.push_back({idx, at, first});
        } else {  // the code's group took no part: let each rule's own regex say
          for (size_t idx : tab.rules) candidates.push_back({idx, kUnverified, 0});
        }
        pos = at + 1;
      }
    }
    const auto& owners = rest_of_literal_[h];
    if (owners.empty()) continue;
    RE2::Set::ErrorInfo info{RE2::Set::kNoError};
    matched.clear();
    if (const PatternSet* ps = setOf(static_cast<size_t>(h));
        ps && (ps->set.Match(input, &matched, &info) || info.kind == RE2::Set::kNoError)) {
      for (int m : matched) candidates.push_back({owners[static_cast<size_t>(m)], kUnverified, 0});  // only rules that match
    } else {
      for (size_t idx : owners) candidates.push_back({idx, kUnverified, 0});
    }
  }
  // Evaluation order; a rule's leftmost table match first.
  std::sort(candidates.begin(), candidates.end(), [&](const Candidate& a, const Candidate& b) {
    return order_rank_[a.rule] != order_rank_[b.rule] ? order_rank_[a.rule] < order_rank_[b.rule] : a.at < b.at;
  });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const Candidate& a, const Candidate& b) { return a.rule == b.rule; }),
                   candidates.end());
  for (const auto& c : candidates) {
    const Rule& r = rs[c.rule];
    if (!r.appliesTo(kind)) continue;
    const RE2* compiled = c.at != kUnverified ? tableRegexOf(static_cast<size_t>(table_of_rule_[c.rule])) : regexOf(c.rule);
    if (!compiled) continue;  // a pattern RE2 refuses (the loader reports those) matches nothing
    const RE2& re = *compiled;
    if (!out) {
      if (c.at != kUnverified || RE2::PartialMatch(input, re)) return &r;
      continue;
    }
    if (c.at != kUnverified) {
      out->at = &table_groups[c.groups];  // the table's match is this rule's own
    } else {
      const int n = re.NumberOfCapturingGroups() + 1;
      groups.assign(static_cast<size_t>(n), {});
      const SpanCapture* sc = spanCaptureOf(c.rule);
      // RE2's DFA finds the match, SpanCapture its groups (what RE2's submatch search over it
      // would give, at a fraction of the cost); RE2's own when SpanCapture leaves it undecided.
      if (sc && n > 1) {
        thread_local std::vector<int> offsets;
        offsets.resize(2 * static_cast<size_t>(n));
        const auto take = [&] {
          for (size_t k = 0; k < static_cast<size_t>(n); ++k)
            groups[k] = offsets[2 * k] < 0 ? re2::StringPiece()
                                           : re2::StringPiece(text.data() + offsets[2 * k],
                                                              static_cast<size_t>(offsets[2 * k + 1] - offsets[2 * k]));
        };
        // A short record: RE2's forward DFA says whether it matches, SpanCapture finds where and
        // the groups (no reverse DFA for the start). Else RE2's DFAs find the match (forward and
        // reverse) and SpanCapture its groups over it.
        if (text.size() <= kSearchMax) {
          if (!re.Match(input, 0, input.size(), RE2::UNANCHORED, nullptr, 0)) continue;
        }
        if (text.size() <= kSearchMax && sc->search(text, offsets.data())) {
          take();
        } else {
          if (!re.Match(input, 0, input.size(), RE2::UNANCHORED, groups.data(), 1)) continue;
          const size_t b = static_cast<size_t>(groups[0].data() - text.data());
          if (sc->capture(text, b, b + groups[0].size(), offsets.data())) {
            take();
          } else if (!re.Match(input, 0, input.size(), RE2::UNANCHORED, groups.data(), n)) {
            continue;
          }
        }
      } else if (!re.Match(input, 0, input.size(), RE2::UNANCHORED, groups.data(), n)) {
        continue;
      }
      out->at = groups.data();
    }
    out->re = &re;
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
  Groups g;
  // The parser's literal search already named the literals of the record's line: no second search.
  const bool ids_known = record.literals_of != 0 && literal_scanner_ && record.literals_of == literal_scanner_->serial();
  const Rule* r = ids_known ? matchGroups(record.text, record.literal_ids, ctx.kind, &g)
                            : matchText(record.text, ctx.kind, &g);
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
  // The captures over the rule's constant fields; of groups sharing a name the first that took
  // part (putCaptures' choice): written last, going from the last group to the first.
  if (g.re) {
    const auto& names = g.re->CapturingGroupNames();
    for (auto it = names.rbegin(); it != names.rend(); ++it) {
      const re2::StringPiece& v = g.at[it->first];
      if (v.data() != nullptr) s.fields.insert_or_assign(it->second, std::string(v.data(), v.size()));
    }
  }
  if (r->boot_settle_ns > 0 && record.monotonic_ns >= 0 && record.monotonic_ns < r->boot_settle_ns &&
      s.role != Role::kContext) {
    s.role = Role::kContext;
    s.fallback_root = false;
    s.fields["boot_settle"] = "within " + std::to_string(r->boot_settle_ns / 1'000'000'000) + " s of boot";
  }
  if (record.rank >= 0 && !s.fields.count("rank")) s.fields["rank"] = std::to_string(record.rank);
  // Templates see the fields, and "host" (the record's, then the node found) and "node_default"
  // (the context's node) over any field of those names.
  const std::string* host = &record.host;
  thread_local std::string scratch;
  const auto render = [&](const Template& t, std::string* out) {
    scratch.clear();
    for (const auto& piece : t.pieces) {
      scratch += piece.before;
      if (piece.kind == Template::kHost) {
        scratch += *host;
      } else if (piece.kind == Template::kNodeDefault) {
        scratch += ctx.node;
      } else if (const auto it = s.fields.find(piece.name); it != s.fields.end()) {
        scratch += it->second;
      }
    }
    scratch += t.tail;
    out->assign(scratch);  // one allocation of the final size
  };
  const Templates& templates = templatesOf(static_cast<size_t>(r - rules_->rules.data()));
  if (!r->node_template.empty()) render(templates.node, &s.node);
  if (s.node.empty() && !ctx.node.empty()) s.node = ctx.node;
  if (s.node.empty() && !record.host.empty()) s.node = record.host;
  if (s.node.empty() && ctx.node_of_rank)
    if (auto rank = s.rank()) s.node = ctx.node_of_rank(*rank);
  if (!r->device_template.empty()) {
    render(templates.device, &s.device);
    if (looksLikePci(s.device)) s.device = normalizePciId(s.device);
  }
  if (!s.node.empty()) host = &s.node;
  render(templates.summary, &s.summary);
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

#include "common/metric_text.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>

namespace faultline::common {

namespace {

bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
bool isNameChar(char c) { return isNameStart(c) || std::isdigit(static_cast<unsigned char>(c)); }

void skipBlanks(std::string_view s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

// A quoted string at s[i] ('"'), its escapes (\\ \" \n) undone; i moves past the closing quote.
bool readQuoted(std::string_view s, size_t& i, std::string* out) {
  if (i >= s.size() || s[i] != '"') return false;
  for (++i; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      ++i;
      return true;
    }
    if (c == '\\' && i + 1 < s.size()) {
      c = s[++i];
      if (c == 'n') c = '\n';
    }
    out->push_back(c);
  }
  return false;
}

// A bare name ([a-zA-Z_:][a-zA-Z0-9_:]*) or a quoted one (UTF-8 names, Prometheus 3).
bool readName(std::string_view s, size_t& i, std::string* out) {
  if (i < s.size() && s[i] == '"') return readQuoted(s, i, out);
  if (i >= s.size() || !isNameStart(s[i])) return false;
  const size_t start = i;
  while (i < s.size() && isNameChar(s[i])) ++i;
  out->assign(s.substr(start, i - start));
  return true;
}

// One whitespace-delimited token from s[i].
std::string_view token(std::string_view s, size_t& i) {
  skipBlanks(s, i);
  const size_t start = i;
  while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
  return s.substr(start, i - start);
}

bool toDouble(std::string_view t, double* out) {
  if (t.empty() || t.size() > 64) return false;
  const std::string copy(t);
  char* end = nullptr;
  *out = std::strtod(copy.c_str(), &end);
  return end == copy.c_str() + copy.size();
}

// `{...}` at s[i]: labels into *labels (a bare quoted string is the metric's name).
bool readLabels(std::string_view s, size_t& i, std::map<std::string, std::string>* labels, std::string* why) {
  ++i;  // '{'
  for (;;) {
    skipBlanks(s, i);
    if (i < s.size() && s[i] == '}') {
      ++i;
      return true;
    }
    std::string name, value;
    const bool quoted = i < s.size() && s[i] == '"';
    if (!readName(s, i, &name)) {
      *why = "expected a label name";
      return false;
    }
    skipBlanks(s, i);
    if (quoted && i < s.size() && (s[i] == ',' || s[i] == '}')) {
      (*labels)["__name__"] = name;  // {"metric.name", ...}
    } else {
      if (i >= s.size() || s[i] != '=') {
        *why = fmt::format("expected '=' after label {}", name);
        return false;
      }
      ++i;
      skipBlanks(s, i);
      if (!readQuoted(s, i, &value)) {
        *why = fmt::format("label {}'s value is not a closed quoted string", name);
        return false;
      }
      (*labels)[name] = std::move(value);
    }
    skipBlanks(s, i);
    if (i < s.size() && s[i] == ',') ++i;
    else if (i >= s.size() || s[i] != '}') {
      *why = "expected ',' or '}' between labels";
      return false;
    }
  }
}

std::string keyOf(const std::map<std::string, std::string>& labels, bool with_name) {
  std::string key;
  auto name = labels.find("__name__");
  if (with_name && name != labels.end()) key = name->second;
  key += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (k == "__name__") continue;
    key += fmt::format("{}{}=\"{}\"", first ? "" : ",", k, v);
    first = false;
  }
  return key + '}';
}

// Keeps time order, one sample per time, the first and the newest within `max`.
void addSample(MetricSeries& s, int64_t t, double v, size_t max) {
  auto& xs = s.samples;
  auto at = std::lower_bound(xs.begin(), xs.end(), t, [](const auto& p, int64_t x) { return p.first < x; });
  if (at != xs.end() && at->first == t)
    at->second = v;
  else
    xs.insert(at, {t, v});
  if (max >= 2 && xs.size() > max) xs.erase(xs.begin() + 1, xs.begin() + static_cast<ptrdiff_t>(xs.size() - max + 1));
}

struct Matcher {
  std::string label, op, value;
  std::shared_ptr<RE2> re;
};

std::optional<std::vector<Matcher>> parseMatchers(std::string_view s, std::string* error) {
  std::vector<Matcher> out;
  size_t i = 0;
  for (;;) {
    skipBlanks(s, i);
    if (i >= s.size()) return out;
    Matcher m;
    if (!readName(s, i, &m.label)) {
      *error = fmt::format("matcher: expected a label name at '{}'", s.substr(i));
      return std::nullopt;
    }
    skipBlanks(s, i);
    for (const char* op : {"!=", "=~", "!~", "="})
      if (s.substr(i).starts_with(op)) {
        m.op = op;
        i += m.op.size();
        break;
      }
    skipBlanks(s, i);
    if (m.op.empty() || !readQuoted(s, i, &m.value)) {
      *error = fmt::format("matcher: expected = != =~ or !~ and a quoted value after {}", m.label);
      return std::nullopt;
    }
    if (m.op == "=~" || m.op == "!~") {
      m.re = std::make_shared<RE2>("^(?:" + m.value + ")$", RE2::Quiet);
      if (!m.re->ok()) {
        *error = fmt::format("matcher {}: {}", m.label, m.re->error());
        return std::nullopt;
      }
    }
    out.push_back(std::move(m));
    skipBlanks(s, i);
    if (i < s.size() && s[i] == ',') ++i;
    else if (i < s.size()) {
      *error = fmt::format("matcher: expected ',' at '{}'", s.substr(i));
      return std::nullopt;
    }
  }
}

bool meetsAll(const MetricSeries& series, const std::vector<Matcher>& ms) {
  for (const auto& m : ms) {
    const std::string& v = series.label(m.label);
    bool ok = m.op == "=" ? v == m.value : m.op == "!=" ? v != m.value : RE2::FullMatch(v, *m.re);
    if (m.op == "!~") ok = !ok;
    if (!ok) return false;
  }
  return true;
}

// One operand of a rule's expr: NAME or NAME{...}, "{selector}" standing for the rule's selector.
struct Operand {
  std::string name;
  std::vector<Matcher> matchers;
};

std::optional<Operand> parseOperand(std::string_view s, const std::string& selector, std::string* error) {
  Operand o;
  size_t i = 0;
  skipBlanks(s, i);
  if (!readName(s, i, &o.name)) {
    *error = fmt::format("'{}' is not METRIC{{...}}", s);
    return std::nullopt;
  }
  skipBlanks(s, i);
  if (i < s.size()) {
    const size_t close = s.rfind('}');
    if (s[i] != '{' || close == std::string_view::npos || s.find_first_not_of(" \t", close + 1) != std::string_view::npos) {
      *error = fmt::format("'{}' is not METRIC{{...}}", s);
      return std::nullopt;
    }
    std::string_view inner = s.substr(i + 1, close - i - 1);
    auto ms = parseMatchers(inner == "selector" ? std::string_view(selector) : inner, error);
    if (!ms) return std::nullopt;
    o.matchers = std::move(*ms);
  }
  return o;
}

std::vector<const MetricSeries*> select(const std::vector<MetricSeries>& held, const Operand& o) {
  std::vector<const MetricSeries*> out;
  for (const auto& s : held)
    if (s.label("__name__") == o.name && meetsAll(s, o.matchers)) out.push_back(&s);
  return out;
}

}  // namespace

std::string metricSeriesKey(const MetricSeries& series) { return keyOf(series.labels, true); }

MetricText parseMetricText(std::string_view text, int64_t default_ns, const MetricTextLimits& limits) {
  MetricText out;
  {
    std::string_view tail = text;
    while (!tail.empty() && std::isspace(static_cast<unsigned char>(tail.back()))) tail.remove_suffix(1);
    out.openmetrics = tail.ends_with("# EOF") &&
                      (tail.size() == 5 || tail[tail.size() - 6] == '\n');
  }
  std::unordered_map<std::string, size_t> index;
  size_t line_no = 0;
  auto malformed = [&](const std::string& why) {
    if (++out.malformed == 1) out.first_problem = fmt::format("line {}: {}", line_no, why);
  };
  for (size_t pos = 0; pos < text.size();) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    size_t i = 0;
    skipBlanks(line, i);
    if (i == line.size() || line[i] == '#') continue;
    if (line.size() > limits.max_line_bytes) {
      ++out.over_limit;
      continue;
    }
    MetricSeries series;
    std::string name, why;
    if (line[i] != '{') {
      if (!readName(line, i, &name)) {
        malformed("not a sample: a sample starts with its metric's name");
        continue;
      }
      series.labels["__name__"] = name;
    }
    if (i < line.size() && line[i] == '{' && !readLabels(line, i, &series.labels, &why)) {
      malformed(why);
      continue;
    }
    if (series.labels.find("__name__") == series.labels.end()) {
      malformed("a sample without a metric name");
      continue;
    }
    if (i < line.size() && line[i] != ' ' && line[i] != '\t') {
      malformed("expected a space before the value");
      continue;
    }
    double value = 0;
    if (!toDouble(token(line, i), &value)) {
      malformed("the value is not a number");
      continue;
    }
    int64_t t = default_ns;
    std::string_view stamp = token(line, i);
    if (!stamp.empty() && stamp != "#") {
      // OpenMetrics: seconds; Prometheus text: milliseconds. Whole numbers exactly (a double
      // loses nanoseconds at today's stamps), fractions through a double.
      const int64_t unit = out.openmetrics ? 1'000'000'000 : 1'000'000;
      int64_t whole = 0;
      double ts = 0;
      auto [end, ec] = std::from_chars(stamp.data(), stamp.data() + stamp.size(), whole);
      if (ec == std::errc() && end == stamp.data() + stamp.size()) {
        if (__builtin_mul_overflow(whole, unit, &t)) {
          malformed("the timestamp is out of range");
          continue;
        }
      } else if (!toDouble(stamp, &ts) || !std::isfinite(ts)) {
        malformed("the timestamp is not a number");
        continue;
      } else if (std::fabs(ts * static_cast<double>(unit)) > 9.0e18) {
        malformed("the timestamp is out of range");
        continue;
      } else {
        t = static_cast<int64_t>(std::llround(ts * static_cast<double>(unit)));
      }
      stamp = token(line, i);
    }
    if (!stamp.empty() && stamp != "#") {
      malformed("text after the timestamp");
      continue;
    }
    const std::string key = metricSeriesKey(series);
    auto it = index.find(key);
    if (it == index.end()) {
      if (out.series.size() >= limits.max_series) {
        ++out.over_limit;
        continue;
      }
      it = index.emplace(key, out.series.size()).first;
      out.series.push_back(std::move(series));
    }
    addSample(out.series[it->second], t, value, limits.max_samples_per_series);
    ++out.samples;
  }
  return out;
}

size_t mergeMetricSeries(std::vector<MetricSeries>& into, const std::vector<MetricSeries>& more,
                         const MetricTextLimits& limits) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < into.size(); ++i) index.emplace(metricSeriesKey(into[i]), i);
  size_t dropped = 0;
  for (const auto& s : more) {
    const std::string key = metricSeriesKey(s);
    auto it = index.find(key);
    if (it == index.end()) {
      if (into.size() >= limits.max_series) {
        dropped += s.samples.size();
        continue;
      }
      it = index.emplace(key, into.size()).first;
      MetricSeries fresh;
      fresh.labels = s.labels;
      into.push_back(std::move(fresh));
    }
    for (const auto& [t, v] : s.samples) addSample(into[it->second], t, v, limits.max_samples_per_series);
  }
  return dropped;
}

std::optional<bool> seriesMatches(const MetricSeries& series, std::string_view matchers, std::string* error) {
  auto ms = parseMatchers(matchers, error);
  if (!ms) return std::nullopt;
  return meetsAll(series, *ms);
}

std::vector<MetricSeries> metricRuleSeries(const MetricRule& rule, const std::vector<MetricSeries>& held,
                                           std::string* unsupported) {
  std::vector<MetricSeries> out;
  std::string error;
  if (rule.expr.empty()) {
    auto ms = parseMatchers(rule.selector, &error);
    if (!ms) {
      *unsupported = error;
      return out;
    }
    for (const auto& s : held)
      if (s.label("__name__") == rule.metric && meetsAll(s, *ms)) out.push_back(s);
    return out;
  }
  // A / B or A or B, at the top level (no parentheses in the packs' expressions).
  const std::string& e = rule.expr;
  std::string op;
  size_t at = std::string::npos, depth = 0;
  for (size_t i = 0; i < e.size() && at == std::string::npos; ++i) {
    if (e[i] == '{') ++depth;
    else if (e[i] == '}' && depth) --depth;
    else if (e[i] == '"' && depth) {
      for (++i; i < e.size() && e[i] != '"'; ++i)
        if (e[i] == '\\') ++i;
    } else if (!depth && e[i] == '/') {
      op = "/";
      at = i;
    } else if (!depth && e.compare(i, 4, " or ") == 0) {
      op = "or";
      at = i + 1;
    } else if (!depth && (e[i] == '(' || e[i] == '*' || e[i] == '+' || e[i] == '-')) {
      break;
    }
  }
  if (at == std::string::npos) {
    *unsupported = fmt::format("expression '{}' is not `A / B` or `A or B`: it needs a PromQL endpoint", e);
    return out;
  }
  auto a = parseOperand(std::string_view(e).substr(0, at), rule.selector, &error);
  auto b = a ? parseOperand(std::string_view(e).substr(at + op.size()), rule.selector, &error) : std::nullopt;
  if (!a || !b) {
    *unsupported = fmt::format("expression '{}': {}", e, error);
    return out;
  }
  const auto as = select(held, *a), bs = select(held, *b);
  if (op == "or") {
    std::set<std::string> seen;
    for (const auto* s : as) {
      seen.insert(keyOf(s->labels, false));
      out.push_back(*s);
    }
    for (const auto* s : bs)
      if (!seen.count(keyOf(s->labels, false))) out.push_back(*s);
    return out;
  }
  std::unordered_map<std::string, const MetricSeries*> by_labels;
  for (const auto* s : bs) by_labels.emplace(keyOf(s->labels, false), s);
  for (const auto* s : as) {
    auto it = by_labels.find(keyOf(s->labels, false));
    if (it == by_labels.end()) continue;
    MetricSeries q;
    q.labels = s->labels;
    q.labels.erase("__name__");
    const auto& den = it->second->samples;
    for (const auto& [t, v] : s->samples) {
      auto d = std::lower_bound(den.begin(), den.end(), t, [](const auto& p, int64_t x) { return p.first < x; });
      if (d != den.end() && d->first == t) q.samples.emplace_back(t, v / d->second);
    }
    if (!q.samples.empty()) out.push_back(std::move(q));
  }
  return out;
}

}  // namespace faultline::common

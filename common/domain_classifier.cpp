#include "common/domain_classifier.h"

#include "common/diagnosis.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "common/rule_set.h"
#include "common/template_mask.h"

namespace faultline::common {

namespace {

constexpr size_t kClasses = kLeadDomains.size();
constexpr std::string_view kFormat = "faultline-domain-model 2";

bool isUpper(char c) { return c >= 'A' && c <= 'Z'; }
bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isWordChar(char c) { return isUpper(c) || isLower(c) || isDigit(c); }

std::optional<size_t> classIndex(SubDomain d) {
  for (size_t i = 0; i < kClasses; ++i)
    if (kLeadDomains[i] == d) return i;
  return std::nullopt;
}

// Length of a masking placeholder ("<NUM>", "<PCI>") at text[pos], 0 when there is none.
size_t placeholderAt(std::string_view text, size_t pos) {
  if (text[pos] != '<') return 0;
  size_t i = pos + 1;
  while (i < text.size() && isUpper(text[i])) ++i;
  return (i > pos + 1 && i < text.size() && text[i] == '>') ? i + 1 - pos : 0;
}

// The words of a masked message. A placeholder breaks the run of adjacent words (no bigram spans
// a variable), as does anything but spaces and light punctuation between two words.
struct Words {
  std::vector<std::string> words;
  std::vector<uint8_t> follows;  // 1: word i directly follows word i-1 (a bigram is formed)
};

Words wordsOf(std::string_view masked) {
  Words out;
  bool chained = false;  // the next word may pair with the previous one
  size_t pos = 0;
  while (pos < masked.size()) {
    if (size_t n = placeholderAt(masked, pos)) {
      pos += n;
      chained = false;
      continue;
    }
    if (!isWordChar(masked[pos])) {
      // Sentence and clause ends separate; spaces, quotes, '=', ':' and the like do not.
      char c = masked[pos];
      if (c == '.' || c == ';' || c == '|' || c == '\n') chained = false;
      ++pos;
      continue;
    }
    // A word ends at a non-word byte, at '_' and where lower case turns to upper (cudaErrorNoDevice).
    size_t start = pos;
    while (pos < masked.size() && isWordChar(masked[pos]) &&
           !(pos > start && isUpper(masked[pos]) && isLower(masked[pos - 1])))
      ++pos;
    std::string w(masked.substr(start, pos - start));
    bool any_letter = false;
    for (char& c : w) {
      if (isUpper(c)) c = static_cast<char>(c - 'A' + 'a');
      any_letter = any_letter || isLower(c);
    }
    if (w.size() < 2 || !any_letter) {
      chained = false;
      continue;
    }
    out.follows.push_back(chained ? 1 : 0);
    out.words.push_back(std::move(w));
    chained = true;
  }
  return out;
}

void softmaxInPlace(std::array<double, kClasses>& z) {
  double top = *std::max_element(z.begin(), z.end()), sum = 0;
  for (double& v : z) sum += (v = std::exp(v - top));
  for (double& v : z) v /= sum;
}

std::string formatDouble(double v) { return fmt::format("{:.9g}", v); }

bool parseDouble(std::string_view s, double* out) {
  auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::vector<std::string_view> splitOn(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(sep, start);
    if (end == std::string_view::npos) end = s.size();
    parts.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

}  // namespace

std::string emitterFamily(std::string_view rule_file, FamilyGrain grain) {
  size_t slash = rule_file.rfind('/');
  std::string_view name = slash == std::string_view::npos ? rule_file : rule_file.substr(slash + 1);
  std::string_view dir = slash == std::string_view::npos ? std::string_view() : rule_file.substr(0, slash);
  size_t dslash = dir.rfind('/');
  std::string_view folder = dslash == std::string_view::npos ? dir : dir.substr(dslash + 1);
  if (folder.empty()) folder = ".";
  if (grain == FamilyGrain::kFolder) return std::string(folder);
  size_t cut = name.find_first_of("_.");
  return fmt::format("{}/{}", folder, name.substr(0, cut));
}

std::vector<DomainExample> domainExamplesOf(const RuleSet& rules, FamilyGrain grain, DomainExampleCounts* counts) {
  std::vector<DomainExample> all;
  for (const auto& r : rules.rules) {
    if (r.deprecated || r.role != Role::kRoot || !classIndex(r.sub_domain)) continue;
    std::string family = emitterFamily(r.file, grain);
    for (const auto& line : r.match_examples) all.push_back({line, r.sub_domain, family});
  }
  // A line's wording: its distinct features, sorted.
  auto wording = [](const std::string& line) {
    auto f = domainFeaturesOf(line);
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
    std::string key;
    for (const auto& x : f) key += x + '\n';
    return key;
  };
  struct Seen {
    size_t first;
    bool conflict = false;
  };
  std::map<std::string, Seen> seen;
  std::vector<std::string> keys(all.size());
  DomainExampleCounts n;
  n.lines = all.size();
  for (size_t i = 0; i < all.size(); ++i) {
    keys[i] = wording(all[i].line);
    auto [it, fresh] = seen.try_emplace(keys[i], Seen{i});
    if (!fresh && all[it->second.first].domain != all[i].domain) it->second.conflict = true;
  }
  std::vector<DomainExample> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& s = seen.at(keys[i]);
    if (s.conflict) ++n.ambiguous;
    else if (s.first != i) ++n.repeated;
    else out.push_back(std::move(all[i]));
  }
  if (counts) *counts = n;
  return out;
}

std::vector<std::string> domainFeaturesOf(std::string_view line) {
  Words w = wordsOf(maskMessage(line));
  std::vector<std::string> features;
  features.reserve(w.words.size() * 2);
  for (size_t i = 0; i < w.words.size(); ++i) {
    features.push_back(w.words[i]);
    if (w.follows[i]) features.push_back(w.words[i - 1] + " " + w.words[i]);
  }
  return features;
}

DomainClassifier DomainClassifier::train(const std::vector<DomainExample>& examples,
                                         const DomainTrainOptions& options) {
  DomainClassifier m;
  m.l2_ = options.l2;
  m.epochs_ = options.epochs;
  // The lines in a canonical order (by text, then class), so the model does not depend on the
  // order the rules were loaded in; std::map numbers the features in sorted order for the same
  // reason (and for the model text).
  std::vector<std::pair<std::string_view, size_t>> lines;
  for (const auto& ex : examples)
    if (auto c = classIndex(ex.domain)) lines.push_back({ex.line, *c});
  std::sort(lines.begin(), lines.end());
  std::map<std::string, size_t> vocabulary;
  std::vector<std::vector<std::string>> raw(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    raw[i] = domainFeaturesOf(lines[i].first);
    for (const auto& f : raw[i]) vocabulary.emplace(f, 0);
    ++m.examples_[lines[i].second];
  }
  size_t next = 0;
  for (auto& [name, index] : vocabulary) {
    index = next++;
    m.names_.push_back(name);
  }
  // Each line as the set of its features (presence, not counts).
  std::vector<std::vector<size_t>> active(lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    for (const auto& f : raw[i]) active[i].push_back(vocabulary.at(f));
    std::sort(active[i].begin(), active[i].end());
    active[i].erase(std::unique(active[i].begin(), active[i].end()), active[i].end());
  }
  // Classes weighted to equal total weight: a uniform prior, since how many rules each domain has
  // says how many were written, not how often a domain fails.
  std::array<double, kClasses> class_weight{};
  for (size_t c = 0; c < kClasses; ++c)
    class_weight[c] = m.examples_[c] ? static_cast<double>(lines.size()) / (kClasses * m.examples_[c]) : 0;

  // Multinomial logistic regression by stochastic gradient descent with AdaGrad step sizes and L2
  // on the weights a step touches; the lines visited in an order shuffled by a fixed seed.
  using Row = std::array<double, kClasses>;
  m.weights_.assign(m.names_.size(), Row{});
  std::vector<Row> squared(m.names_.size(), Row{});
  Row bias_squared{};
  constexpr double kRate = 0.5, kEpsilon = 1e-8;
  std::vector<size_t> order(lines.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto random = [&state] {  // splitmix64: the same sequence on every platform
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (int epoch = 0; epoch < m.epochs_; ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[random() % i]);
    for (size_t i : order) {
      Row p = m.bias_;
      for (size_t f : active[i])
        for (size_t c = 0; c < kClasses; ++c) p[c] += m.weights_[f][c];
      softmaxInPlace(p);
      for (size_t c = 0; c < kClasses; ++c) {
        double g = class_weight[lines[i].second] * (p[c] - (c == lines[i].second ? 1.0 : 0.0));
        bias_squared[c] += g * g;
        m.bias_[c] -= kRate * g / std::sqrt(bias_squared[c] + kEpsilon);
        for (size_t f : active[i]) {
          double gw = g + m.l2_ * m.weights_[f][c];
          squared[f][c] += gw * gw;
          m.weights_[f][c] -= kRate * gw / std::sqrt(squared[f][c] + kEpsilon);
        }
      }
    }
  }
  return m;
}

size_t DomainClassifier::find(std::string_view feature) const {
  auto it = std::lower_bound(names_.begin(), names_.end(), feature,
                             [](const std::string& a, std::string_view b) { return a < b; });
  return (it != names_.end() && *it == feature) ? static_cast<size_t>(it - names_.begin()) : names_.size();
}

DomainGuess DomainClassifier::classify(std::string_view line, size_t top) const {
  DomainGuess g;
  g.posterior.fill(1.0 / kClasses);
  std::vector<size_t> known;
  for (const auto& f : domainFeaturesOf(line)) {
    size_t i = find(f);
    if (i != names_.size()) known.push_back(i);
  }
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  g.known_features = known.size();
  if (known.empty()) return g;
  std::array<double, kClasses> p = bias_;
  for (size_t i : known)
    for (size_t c = 0; c < kClasses; ++c) p[c] += weights_[i][c];
  softmaxInPlace(p);
  size_t win = static_cast<size_t>(std::max_element(p.begin(), p.end()) - p.begin());
  g.posterior = p;
  g.domain = kLeadDomains[win];
  g.probability = p[win];
  g.committable = commit_threshold_ && g.probability >= *commit_threshold_;

  // How far each known feature pulls toward the winner over the strongest other class.
  std::vector<std::pair<double, size_t>> pull;
  for (size_t i : known) {
    double other = -INFINITY;
    for (size_t c = 0; c < kClasses; ++c)
      if (c != win) other = std::max(other, weights_[i][c]);
    double d = weights_[i][win] - other;
    if (d > 0) pull.push_back({d, i});
  }
  std::sort(pull.begin(), pull.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  for (size_t k = 0; k < pull.size() && k < top; ++k) g.top_features.push_back(names_[pull[k].second]);
  return g;
}

std::string DomainClassifier::serialize() const {
  std::string out(kFormat);
  out += fmt::format("\nl2 {} epochs {}\nclasses", formatDouble(l2_), epochs_);
  for (auto d : kLeadDomains) out += fmt::format(" {}", subDomainName(d));
  out += "\nexamples";
  for (size_t n : examples_) out += fmt::format(" {}", n);
  out += "\nbias";
  for (double v : bias_) out += fmt::format(" {}", formatDouble(v));
  out += fmt::format("\ncommit_threshold {}\nfeatures {}\n",
                     commit_threshold_ ? formatDouble(*commit_threshold_) : std::string("none"), names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    out += names_[i];
    for (double v : weights_[i]) out += fmt::format("\t{}", formatDouble(v));
    out += '\n';
  }
  return out;
}

std::optional<DomainClassifier> DomainClassifier::parse(std::string_view text, std::string* error) {
  auto lines = splitOn(text, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  auto fail = [&](size_t line, std::string_view why) {
    *error = fmt::format("domain model line {}: {}", line + 1, why);
    return std::nullopt;
  };
  constexpr size_t kHeader = 7;
  if (lines.size() < kHeader || lines[0] != kFormat) return fail(0, fmt::format("not '{}'", kFormat));
  DomainClassifier m;
  // Line i as "key v1 v2 ...": the values, when the key is right and there are `n` of them.
  auto values = [&](size_t i, std::string_view key, size_t n) -> std::optional<std::vector<std::string_view>> {
    auto parts = splitOn(lines[i], ' ');
    if (parts.size() != n + 1 || parts[0] != key) return std::nullopt;
    parts.erase(parts.begin());
    return parts;
  };
  auto toSize = [](std::string_view s, auto* out) {
    auto r = std::from_chars(s.data(), s.data() + s.size(), *out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  auto l2 = values(1, "l2", 3);
  if (!l2 || !parseDouble((*l2)[0], &m.l2_) || (*l2)[1] != "epochs" || !toSize((*l2)[2], &m.epochs_))
    return fail(1, "expected 'l2 X epochs N'");
  auto classes = values(2, "classes", kClasses);
  if (!classes) return fail(2, "expected the five classes");
  for (size_t c = 0; c < kClasses; ++c)
    if ((*classes)[c] != subDomainName(kLeadDomains[c])) return fail(2, "classes out of order");
  auto examples = values(3, "examples", kClasses);
  if (!examples) return fail(3, "expected five example counts");
  for (size_t c = 0; c < kClasses; ++c)
    if (!toSize((*examples)[c], &m.examples_[c])) return fail(3, "bad count");
  auto bias = values(4, "bias", kClasses);
  if (!bias) return fail(4, "expected five biases");
  for (size_t c = 0; c < kClasses; ++c)
    if (!parseDouble((*bias)[c], &m.bias_[c])) return fail(4, "bad number");
  auto threshold = values(5, "commit_threshold", 1);
  if (!threshold) return fail(5, "expected 'commit_threshold X|none'");
  if ((*threshold)[0] != "none") {
    double t = 0;
    if (!parseDouble((*threshold)[0], &t)) return fail(5, "bad threshold");
    m.commit_threshold_ = t;
  }
  auto features = values(6, "features", 1);
  size_t n = 0;
  if (!features || !toSize((*features)[0], &n) || n != lines.size() - kHeader)
    return fail(6, "feature count does not match the lines that follow");
  m.names_.reserve(n);
  m.weights_.reserve(n);
  for (size_t i = kHeader; i < lines.size(); ++i) {
    auto cols = splitOn(lines[i], '\t');
    if (cols.size() != kClasses + 1 || cols[0].empty()) return fail(i, "expected a feature and five numbers");
    if (!m.names_.empty() && !(m.names_.back() < cols[0])) return fail(i, "features not sorted");
    std::array<double, kClasses> w{};
    for (size_t c = 0; c < kClasses; ++c)
      if (!parseDouble(cols[c + 1], &w[c])) return fail(i, "bad number");
    m.names_.emplace_back(cols[0]);
    m.weights_.push_back(w);
  }
  return m;
}

std::string describeDomainGuess(const DomainGuess& guess) {
  if (guess.domain == SubDomain::kNone) return "reads like no domain the rules know";
  std::string out = fmt::format("reads most like {} (p {:.2f})", subDomainName(guess.domain), guess.probability);
  for (size_t i = 0; i < guess.top_features.size(); ++i)
    out += fmt::format("{}'{}'", i == 0 ? ": " : ", ", guess.top_features[i]);
  return out;
}

LofoReport leaveOneFamilyOut(const std::vector<DomainExample>& examples, const LofoOptions& options) {
  LofoReport report;
  report.min_precision = options.min_precision;
  report.min_support = options.min_support;
  report.bands.resize(options.thresholds.size());
  for (size_t b = 0; b < options.thresholds.size(); ++b) report.bands[b].threshold = options.thresholds[b];

  std::map<std::string, std::vector<const DomainExample*>> by_family;
  for (const auto& ex : examples)
    if (classIndex(ex.domain)) by_family[ex.family].push_back(&ex);
  for (const auto& [family, held_out] : by_family) {
    std::vector<DomainExample> rest;
    for (const auto& ex : examples)
      if (ex.family != family) rest.push_back(ex);
    auto model = DomainClassifier::train(rest, options.train);
    LofoFamily row{family, held_out.size(), 0, 0};
    for (const auto* ex : held_out) {
      auto g = model.classify(ex->line, 0);
      if (g.domain == SubDomain::kNone) {
        ++row.unknown;
        continue;
      }
      bool right = g.domain == ex->domain;
      ++report.confusion[*classIndex(ex->domain)][*classIndex(g.domain)];
      row.correct += right ? 1 : 0;
      for (auto& band : report.bands)
        if (g.probability >= band.threshold) {
          ++band.guesses;
          band.correct += right ? 1 : 0;
        }
    }
    report.families.push_back(row);
  }

  // Walk the bands from the strictest down: a threshold qualifies while it and every stricter band
  // that has enough guesses to speak measure at least min_precision.
  std::vector<size_t> order(report.bands.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return report.bands[a].threshold > report.bands[b].threshold; });
  for (size_t i : order) {
    const auto& band = report.bands[i];
    if (band.guesses < options.min_support) continue;
    double precision = static_cast<double>(band.correct) / static_cast<double>(band.guesses);
    if (precision < options.min_precision) break;
    report.commit_threshold = band.threshold;
  }
  return report;
}

std::string formatLofoReport(const LofoReport& report) {
  std::string out = fmt::format("{:<24} {:>8} {:>8} {:>9} {:>8}\n", "held-out family", "examples", "correct",
                                "accuracy", "no-guess");
  size_t examples = 0, correct = 0, unknown = 0;
  auto pct = [](size_t a, size_t b) { return b ? fmt::format("{:.1f} %", 100.0 * a / b) : std::string("-"); };
  for (const auto& f : report.families) {
    out += fmt::format("{:<24} {:>8} {:>8} {:>9} {:>8}\n", f.family, f.examples, f.correct, pct(f.correct, f.examples),
                       f.unknown);
    examples += f.examples;
    correct += f.correct;
    unknown += f.unknown;
  }
  out += fmt::format("{:<24} {:>8} {:>8} {:>9} {:>8}\n\n", "all", examples, correct, pct(correct, examples), unknown);
  out += fmt::format("{:<24}", "label \\ guess");
  for (auto d : kLeadDomains) out += fmt::format(" {:>15}", subDomainName(d));
  out += "\n";
  for (size_t l = 0; l < kClasses; ++l) {
    out += fmt::format("{:<24}", subDomainName(kLeadDomains[l]));
    for (size_t n : report.confusion[l]) out += fmt::format(" {:>15}", n);
    out += "\n";
  }
  out += "\n";
  out += fmt::format("{:<24} {:>8} {:>8} {:>9}\n", "confidence", "guesses", "correct", "precision");
  for (const auto& b : report.bands)
    out += fmt::format("{:<24} {:>8} {:>8} {:>9}\n", fmt::format(">= {}", b.threshold), b.guesses, b.correct,
                       pct(b.correct, b.guesses));
  out += fmt::format("\ncommit threshold (precision >= {:.0f} % on >= {} guesses, in every stricter band too): {}\n",
                     100 * report.min_precision, report.min_support,
                     report.commit_threshold ? formatDouble(*report.commit_threshold) : std::string("none"));
  return out;
}

std::optional<double> stricterThreshold(std::optional<double> a, std::optional<double> b) {
  if (!a || !b) return std::nullopt;
  return std::max(*a, *b);
}

}  // namespace faultline::common

namespace faultline::common {

std::string unrecognizedDomainLead(const std::vector<UnrecognizedLine>& unrecognized, const DomainClassifier& model,
                                   size_t lines, double min_probability) {
  std::array<double, kLeadDomains.size()> sum{};
  std::optional<DomainGuess> strongest;
  size_t used = 0;
  for (size_t i = 0; i < unrecognized.size() && i < lines; ++i) {
    DomainGuess g = model.classify(unrecognized[i].first_line);
    if (g.domain == SubDomain::kNone) continue;
    ++used;
    for (size_t k = 0; k < sum.size(); ++k) sum[k] += g.posterior[k];
    if (!strongest || g.probability > strongest->probability) strongest = std::move(g);
  }
  if (!used) return "";
  const size_t best = static_cast<size_t>(std::max_element(sum.begin(), sum.end()) - sum.begin());
  DomainGuess lead = *strongest;
  if (lead.domain != kLeadDomains[best]) lead.top_features.clear();  // the strongest line reads otherwise
  lead.domain = kLeadDomains[best];
  lead.probability = sum[best] / static_cast<double>(used);
  if (lead.probability < min_probability) return "";
  const auto threshold = model.commitThreshold();
  lead.committable = threshold && lead.probability >= *threshold;
  std::string text = describeDomainGuess(lead);  // "reads most like ..."
  if (text.rfind("reads ", 0) == 0) text.erase(4, 1);
  std::string s = "The error lines no rule matched " + text;
  s += lead.committable ? "." : "; a lead, not a verdict.";
  return s;
}

}  // namespace faultline::common

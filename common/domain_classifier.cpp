#include "common/domain_classifier.h"

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
constexpr std::string_view kFormat = "faultline-domain-model 1";

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

std::vector<DomainExample> domainExamplesOf(const RuleSet& rules, FamilyGrain grain) {
  std::vector<DomainExample> out;
  for (const auto& r : rules.rules) {
    if (r.deprecated || r.role != Role::kRoot || !classIndex(r.sub_domain)) continue;
    std::string family = emitterFamily(r.file, grain);
    for (const auto& line : r.match_examples) out.push_back({line, r.sub_domain, family});
  }
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
  m.alpha_ = options.alpha;
  // std::map: features come out sorted, so the model (and its text) does not depend on hashing.
  std::map<std::string, std::array<double, kClasses>> counts;
  std::array<double, kClasses> totals{};
  for (const auto& ex : examples) {
    auto c = classIndex(ex.domain);
    if (!c) continue;
    ++m.examples_[*c];
    for (auto& f : domainFeaturesOf(ex.line)) {
      counts[std::move(f)][*c] += 1;
      totals[*c] += 1;
    }
  }
  const double vocabulary = static_cast<double>(counts.size());
  m.names_.reserve(counts.size());
  m.log_likelihood_.reserve(counts.size());
  for (const auto& [name, n] : counts) {
    std::array<double, kClasses> ll{};
    for (size_t c = 0; c < kClasses; ++c)
      ll[c] = std::log((n[c] + m.alpha_) / (totals[c] + m.alpha_ * vocabulary));
    m.names_.push_back(name);
    m.log_likelihood_.push_back(ll);
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
  std::array<double, kClasses> score{};
  std::vector<size_t> known;
  for (const auto& f : domainFeaturesOf(line)) {
    size_t i = find(f);
    if (i == names_.size()) continue;
    known.push_back(i);
    for (size_t c = 0; c < kClasses; ++c) score[c] += log_likelihood_[i][c];
  }
  g.known_features = known.size();
  if (known.empty()) return g;
  // The per-feature mean of the log likelihoods: a softmax over it (uniform prior) is the
  // confidence; the winner is the same as naive Bayes' own.
  double best = -INFINITY;
  size_t win = 0;
  for (size_t c = 0; c < kClasses; ++c) {
    score[c] /= static_cast<double>(known.size());
    if (score[c] > best) {
      best = score[c];
      win = c;
    }
  }
  double sum = 0;
  for (size_t c = 0; c < kClasses; ++c) sum += std::exp(score[c] - best);
  for (size_t c = 0; c < kClasses; ++c) g.posterior[c] = std::exp(score[c] - best) / sum;
  g.domain = kLeadDomains[win];
  g.probability = g.posterior[win];
  g.committable = commit_threshold_ && g.probability >= *commit_threshold_;

  // How far each known feature pulls toward the winner over the strongest other class.
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  std::vector<std::pair<double, size_t>> pull;
  for (size_t i : known) {
    double other = -INFINITY;
    for (size_t c = 0; c < kClasses; ++c)
      if (c != win) other = std::max(other, log_likelihood_[i][c]);
    double d = log_likelihood_[i][win] - other;
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
  out += fmt::format("\nalpha {}\nclasses", formatDouble(alpha_));
  for (auto d : kLeadDomains) out += fmt::format(" {}", subDomainName(d));
  out += "\nexamples";
  for (size_t n : examples_) out += fmt::format(" {}", n);
  out += fmt::format("\ncommit_threshold {}\nfeatures {}\n",
                     commit_threshold_ ? formatDouble(*commit_threshold_) : std::string("none"), names_.size());
  for (size_t i = 0; i < names_.size(); ++i) {
    out += names_[i];
    for (double v : log_likelihood_[i]) out += fmt::format("\t{}", formatDouble(v));
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
  if (lines.size() < 6 || lines[0] != kFormat) return fail(0, fmt::format("not '{}'", kFormat));
  DomainClassifier m;
  auto keyed = [&](size_t i, std::string_view key) -> std::optional<std::vector<std::string_view>> {
    auto parts = splitOn(lines[i], ' ');
    if (parts.empty() || parts[0] != key) return std::nullopt;
    parts.erase(parts.begin());
    return parts;
  };
  auto alpha = keyed(1, "alpha");
  if (!alpha || alpha->size() != 1 || !parseDouble((*alpha)[0], &m.alpha_)) return fail(1, "expected 'alpha X'");
  auto classes = keyed(2, "classes");
  if (!classes || classes->size() != kClasses) return fail(2, "expected the five classes");
  for (size_t c = 0; c < kClasses; ++c)
    if ((*classes)[c] != subDomainName(kLeadDomains[c])) return fail(2, "classes out of order");
  auto examples = keyed(3, "examples");
  if (!examples || examples->size() != kClasses) return fail(3, "expected five example counts");
  for (size_t c = 0; c < kClasses; ++c) {
    auto s = (*examples)[c];
    if (std::from_chars(s.data(), s.data() + s.size(), m.examples_[c]).ec != std::errc()) return fail(3, "bad count");
  }
  auto threshold = keyed(4, "commit_threshold");
  if (!threshold || threshold->size() != 1) return fail(4, "expected 'commit_threshold X|none'");
  if ((*threshold)[0] != "none") {
    double t = 0;
    if (!parseDouble((*threshold)[0], &t)) return fail(4, "bad threshold");
    m.commit_threshold_ = t;
  }
  auto features = keyed(5, "features");
  size_t n = 0;
  if (!features || features->size() != 1 ||
      std::from_chars((*features)[0].data(), (*features)[0].data() + (*features)[0].size(), n).ec != std::errc() ||
      n != lines.size() - 6)
    return fail(5, "feature count does not match the lines that follow");
  m.names_.reserve(n);
  m.log_likelihood_.reserve(n);
  for (size_t i = 6; i < lines.size(); ++i) {
    auto cols = splitOn(lines[i], '\t');
    if (cols.size() != kClasses + 1 || cols[0].empty()) return fail(i, "expected a feature and five numbers");
    if (!m.names_.empty() && !(m.names_.back() < cols[0])) return fail(i, "features not sorted");
    std::array<double, kClasses> ll{};
    for (size_t c = 0; c < kClasses; ++c)
      if (!parseDouble(cols[c + 1], &ll[c])) return fail(i, "bad number");
    m.names_.emplace_back(cols[0]);
    m.log_likelihood_.push_back(ll);
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

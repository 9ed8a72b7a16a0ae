// A domain lead for log lines no rule matched (issue 30, part 4): which sub_domain a line reads
// most like, learnt from the rules' own examples.
//
// Training data: every non-deprecated rule of role `root` whose sub_domain is one of the five
// fault domains gives its `examples.match` lines, labelled with that sub_domain. Left out: rules
// of sub_domain `none` (no fault), and cascade, teardown and context rules: their lines say that
// something else failed, or are no fault at all, and ../shared/TAXONOMY.md says such evidence
// decides no domain, so a lead must not learn to read them as the domain their text mentions.
//
// Features: the line is masked by token class (common/template_mask.h), so numbers, addresses,
// PCI ids, paths, UUIDs and host names are not features; the remaining words (runs of letters and
// digits, split at '_' and where lower case turns to upper, lower-cased, at least two characters
// and not all digits) and each pair of adjacent words ("permission denied") are, each present or
// not. Model: multinomial logistic
// regression (softmax over a bias plus one weight per feature and class), fitted by stochastic
// gradient descent (AdaGrad steps, L2 penalty, a fixed number of passes over the lines in an
// order shuffled by a fixed seed), with the classes weighted to equal total weight: a uniform
// prior, since the rules' domain mix says how many rules were written, not how often a domain
// fails. (Naive Bayes was tried first: the prefix most NVIDIA lines share, "NVRM: Xid (PCI…)",
// outvoted the words that tell their domains apart, even on its own training lines.) Confidence
// is the softmax's probability of the winning class; the threshold a lead may commit at is
// measured, not assumed (leaveOneFamilyOut, stored in the model as commit_threshold).
//
// Everything here is pure and deterministic: the same examples give the same model text, byte for
// byte. A DomainClassifier is immutable after construction and safe to share between threads.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/symptom.h"

namespace faultline::common {

struct RuleSet;

// The five domains a lead can name, in the model's class order.
inline constexpr std::array<SubDomain, 5> kLeadDomains{SubDomain::kHardware, SubDomain::kNetwork,
                                                      SubDomain::kSystemSoftware, SubDomain::kInfrastructure,
                                                      SubDomain::kApplication};

// One labelled line. `family` is the emitter family it is held out with (see domainExamplesOf).
struct DomainExample {
  std::string line;
  SubDomain domain = SubDomain::kNone;
  std::string family;
};

// How finely rule packs are grouped into emitter families for leave-one-family-out:
//  kFolder: the pack's folder under rules/ (nccl, kernel, nvidia, slurm, container, ...);
//  kFile:   folder/file, with sibling files that share the name before the first '_' taken as
//           one (nccl/nccl + nccl/nccl_net → nccl/nccl; nvidia/xid + nvidia/xid_misc → nvidia/xid).
enum class FamilyGrain { kFolder, kFile };

// The emitter family of a rule file path ("…/rules/nccl/nccl_net.yaml"): from its last two path
// components, so the directory the rules were read from does not matter.
std::string emitterFamily(std::string_view rule_file, FamilyGrain grain);

// The training lines of `rules` (see the top of this file), in rule load order, each wording
// once: lines whose features are the same (after masking) are one line, kept where it first
// occurs; when such lines carry different domains the wording does not tell them apart and none
// is kept (the generic examples of the Xid catalogue, "NVRM: Xid (PCI:…): 144, Ch 0000000a", whose
// domain lies in the masked number alone).
struct DomainExampleCounts {
  size_t lines = 0;       // match examples of the rules taken
  size_t repeated = 0;    // dropped: the same features as an earlier line of the same domain
  size_t ambiguous = 0;   // dropped: the same features as a line of another domain
};
std::vector<DomainExample> domainExamplesOf(const RuleSet& rules, FamilyGrain grain,
                                            DomainExampleCounts* counts = nullptr);

// The features of one line, in order of appearance (repeats kept; the model uses presence).
std::vector<std::string> domainFeaturesOf(std::string_view line);

struct DomainTrainOptions {
  double l2 = 1e-3;   // L2 penalty per step on the weights the step touches
  int epochs = 20;    // passes over the lines
};

struct DomainGuess {
  SubDomain domain = SubDomain::kNone;  // kNone: the line has no feature the model knows
  double probability = 0;               // confidence in `domain`, 0..1
  // Posterior per class, in kLeadDomains order (all equal when domain is kNone).
  std::array<double, kLeadDomains.size()> posterior{};
  size_t known_features = 0;             // features of the line the model has seen
  std::vector<std::string> top_features; // the features that pull most toward `domain`, strongest first
  bool committable = false;              // probability >= the model's commit threshold (if it has one)
};

// "reads most like system_software (p 0.87): 'mount', 'permission denied'"; for kNone "reads like
// no domain the rules know".
std::string describeDomainGuess(const DomainGuess& guess);

struct UnrecognizedLine;

// Issue 30 part 4's use: the sentence an unattributed verdict's explanation gains from its
// failure-indicating lines no rule matched (the first `lines` of them, most unusual first): the
// domain their summed posteriors favour, with the strongest line's words — "The error lines no
// rule matched read most like system_software (p 0.87): 'mount', 'permission denied'; a lead, not
// a verdict". "" when there are none, the model knows none of their words, or the lead's
// probability is below `min_probability` (below 0.5 the leave-one-family-out accuracy is near a
// coin's). It never changes the verdict: the model's measured leave-one-family-out precision has not reached 95 % at any
// confidence (docs/coverage/domain-classifier.md), and a lead that could commit would say so.
class DomainClassifier;
std::string unrecognizedDomainLead(const std::vector<UnrecognizedLine>& unrecognized, const DomainClassifier& model,
                                   size_t lines = 3, double min_probability = 0.5);

class DomainClassifier {
 public:
  // Trains on `examples`; lines whose domain is not one of kLeadDomains are ignored.
  static DomainClassifier train(const std::vector<DomainExample>& examples, const DomainTrainOptions& options = {});

  // Reads the text serialize() writes; nullopt with *error set when it is not such a text.
  static std::optional<DomainClassifier> parse(std::string_view text, std::string* error);

  // The model as text: a header (format, l2 and epochs, classes, per-class example counts, the
  // biases, the commit threshold) and one line per feature with its weight per class, features
  // sorted.
  std::string serialize() const;

  // The lead for one line. `top` caps top_features.
  DomainGuess classify(std::string_view line, size_t top = 3) const;

  // The lowest confidence at which a lead may commit a domain (measured by leaveOneFamilyOut),
  // or nullopt: never.
  std::optional<double> commitThreshold() const { return commit_threshold_; }
  void setCommitThreshold(std::optional<double> t) { commit_threshold_ = t; }

  size_t features() const { return names_.size(); }

 private:
  DomainClassifier() = default;
  size_t find(std::string_view feature) const;  // index into names_, or names_.size()

  double l2_ = 0;
  int epochs_ = 0;
  std::array<size_t, kLeadDomains.size()> examples_{};
  std::array<double, kLeadDomains.size()> bias_{};
  std::optional<double> commit_threshold_;
  std::vector<std::string> names_;                           // sorted
  std::vector<std::array<double, kLeadDomains.size()>> weights_;  // per feature, per class
};

// Leave-one-emitter-family-out: for each family F (in sorted order), a model trained on every
// other family's examples classifies F's examples. `thresholds` are the confidence bands measured.
struct LofoFamily {
  std::string family;
  size_t examples = 0;
  size_t correct = 0;     // top guess equals the label
  size_t unknown = 0;     // no known feature: no guess
};
struct LofoBand {
  double threshold = 0;
  size_t guesses = 0;     // guesses with probability >= threshold
  size_t correct = 0;
};
struct LofoReport {
  std::vector<LofoFamily> families;
  std::vector<LofoBand> bands;  // in the order of `thresholds`
  // confusion[label][guess], classes in kLeadDomains order; guess kNone is left out.
  std::array<std::array<size_t, kLeadDomains.size()>, kLeadDomains.size()> confusion{};
  // The lowest threshold whose band and every higher one measured precision >= min_precision on
  // at least min_support guesses (a band with fewer guesses does not vouch for itself); nullopt:
  // none does.
  std::optional<double> commit_threshold;
  double min_precision = 0;
  size_t min_support = 0;
};
struct LofoOptions {
  DomainTrainOptions train;
  std::vector<double> thresholds{0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 0.999};
  double min_precision = 0.95;
  size_t min_support = 30;
};
LofoReport leaveOneFamilyOut(const std::vector<DomainExample>& examples, const LofoOptions& options = {});

// The report as a plain-text table (per family, then per band, then the threshold).
std::string formatLofoReport(const LofoReport& report);

// The stricter of two measured thresholds (nullopt when either is nullopt).
std::optional<double> stricterThreshold(std::optional<double> a, std::optional<double> b);

}  // namespace faultline::common

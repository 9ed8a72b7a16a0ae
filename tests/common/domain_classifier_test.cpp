// The domain classifier (common/domain_classifier.h): features, training on a hand-made rule set,
// determinism of the model text, leave-one-family-out on a tiny set, and the model the build
// generated from the shipped rules (tools/domain_model/builtin.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <fmt/format.h>

#include "common/diagnosis.h"
#include "common/domain_classifier.h"
#include "tools/domain_model/builtin.h"
#include "common/rule_set.h"

using namespace faultline::common;

namespace {

struct TinyRule {
  std::string id;
  std::string domain;
  std::string role;
  std::vector<std::string> match;
};

// A pack of rules whose patterns never matter here (examples are not run by loadRuleSet).
RuleFile tinyPack(const std::string& path, const std::vector<TinyRule>& rules) {
  std::string y = fmt::format("pack: {}\nrules:\n", path);
  for (const auto& r : rules) {
    y += fmt::format(
        "  - id: {}\n    since: 0.1.0\n    symptom: s\n    sub_domain: {}\n    category: c\n    role: {}\n"
        "    severity: error\n    prefilter: 'zz'\n    pattern: 'zz'\n    summary: s\n    meaning: m\n    action: a\n"
        "    examples:\n      match:\n",
        r.id, r.domain, r.role);
    for (const auto& m : r.match) y += fmt::format("        - '{}'\n", m);
  }
  return {path, y};
}

std::shared_ptr<const RuleSet> tinyRules() {
  auto loaded = loadRuleSet(
      {tinyPack("rules/fabric/ib.yaml",
                {{"ib.down", "network", "root",
                  {"mlx5_core 0000:3b:00.0: port 1 link down", "ib0: link down, carrier lost",
                   "connection refused by peer 10.0.0.7:29500", "IB port 1 physical link state changed to down"}},
                 // A cascade's text names storage words: it must not teach the model anything.
                 {"ib.cascade", "infrastructure", "cascade", {"link down while writing checkpoint to disk quota"}}}),
       tinyPack("rules/storage/fs.yaml",
                {{"fs.full", "infrastructure", "root",
                  {"write /scratch/ckpt/step_100.pt failed: No space left on device",
                   "Disk quota exceeded while saving checkpoint to /lustre/u1",
                   "nfs: server storage01 not responding, still trying", "Read-only file system: /scratch"}},
                 {"fs.info", "none", "context", {"mounted filesystem on /scratch with ordered data mode"}}}),
       tinyPack("rules/storage/fs_extra.yaml",
                {{"fs.gone", "hardware", "root", {"ata3: COMRESET failed, drive failure on sda"}}})},
      "1.0.0");
  REQUIRE(loaded.errors.empty());
  return loaded.rules;
}

bool hasFeature(const std::vector<std::string>& f, const std::string& x) {
  return std::find(f.begin(), f.end(), x) != f.end();
}

}  // namespace

TEST_CASE("domain features are the masked line's words and adjacent pairs", "[domain]") {
  auto f = domainFeaturesOf("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.");
  CHECK(hasFeature(f, "xid"));
  CHECK(hasFeature(f, "nvrm xid"));
  CHECK(hasFeature(f, "fallen off"));
  CHECK(hasFeature(f, "python gpu"));
  for (const auto& x : f) {
    INFO(x);
    CHECK(x.find("79") == std::string::npos);
    CHECK(x.find("1234") == std::string::npos);
    CHECK(x.find("3b") == std::string::npos);
  }
  // A variable breaks the pair: no "pci pid" across the PCI id and the number.
  CHECK_FALSE(hasFeature(f, "pci pid"));

  // Identifiers give their words; paths and hosts give none.
  auto g = domainFeaturesOf("cudaErrorNoDevice on gpu-h01 reading /mnt/data/shard0 CUDA_ERROR_ECC_UNCORRECTABLE");
  CHECK(hasFeature(g, "cuda error"));
  CHECK(hasFeature(g, "no device"));
  CHECK(hasFeature(g, "ecc uncorrectable"));
  CHECK_FALSE(hasFeature(g, "mnt"));
  CHECK_FALSE(hasFeature(g, "h01"));
  CHECK(domainFeaturesOf("42 0x7f 10.0.0.1").empty());
}

TEST_CASE("emitter families come from the pack's folder and file name", "[domain]") {
  CHECK(emitterFamily("/src/rules/nccl/nccl_net.yaml", FamilyGrain::kFolder) == "nccl");
  CHECK(emitterFamily("/src/rules/nccl/nccl_net.yaml", FamilyGrain::kFile) == "nccl/nccl");
  CHECK(emitterFamily("rules/nvidia/xid.yaml", FamilyGrain::kFile) == "nvidia/xid");
  CHECK(emitterFamily("site.yaml", FamilyGrain::kFolder) == ".");
}

TEST_CASE("a model trained on a tiny rule set reads a held-out line's domain", "[domain]") {
  auto rules = tinyRules();
  auto examples = domainExamplesOf(*rules, FamilyGrain::kFolder);
  // Root rules of the five domains only: the cascade and the context rule give no line.
  REQUIRE(examples.size() == 9);
  for (const auto& ex : examples) {
    CHECK(ex.line.find("writing checkpoint to disk quota") == std::string::npos);  // the cascade's line
    CHECK(ex.line.find("ordered data mode") == std::string::npos);
  }
  CHECK(examples.front().family == "fabric");
  CHECK(examples.back().family == "storage");
  CHECK(domainExamplesOf(*rules, FamilyGrain::kFile).back().family == "storage/fs");

  auto model = DomainClassifier::train(examples);
  auto storage = model.classify("checkpoint save failed: No space left on device");
  CHECK(storage.domain == SubDomain::kInfrastructure);
  CHECK(storage.probability > 0.2);
  CHECK(storage.probability <= 1.0);
  REQUIRE_FALSE(storage.top_features.empty());
  CHECK(storage.top_features.size() <= 3);
  for (const auto& f : storage.top_features) CHECK(hasFeature(domainFeaturesOf("checkpoint save failed: No space left on device"), f));
  auto link = model.classify("mlx5_core 0000:af:00.1: port 2 link down");
  CHECK(link.domain == SubDomain::kNetwork);
  CHECK(link.probability > storage.posterior[1]);  // network's share is larger on the link line

  // Nothing known: no guess, uniform posterior.
  auto none = model.classify("zebra quokka");
  CHECK(none.domain == SubDomain::kNone);
  CHECK(none.known_features == 0);
  CHECK(none.posterior[0] == Approx(0.2));
  CHECK_FALSE(none.committable);

  // The commit threshold decides `committable`.
  CHECK_FALSE(storage.committable);
  model.setCommitThreshold(storage.probability);
  CHECK(model.classify("checkpoint save failed: No space left on device").committable);
  CHECK(describeDomainGuess(storage).find("reads most like infrastructure") == 0);
}

TEST_CASE("the same rules give the same model bytes, and the text reads back", "[domain]") {
  auto examples = domainExamplesOf(*tinyRules(), FamilyGrain::kFolder);
  auto a = DomainClassifier::train(examples);
  auto b = DomainClassifier::train(examples);
  auto reversed = examples;
  std::reverse(reversed.begin(), reversed.end());
  auto c = DomainClassifier::train(reversed);
  a.setCommitThreshold(0.9);
  b.setCommitThreshold(0.9);
  c.setCommitThreshold(0.9);
  CHECK(a.serialize() == b.serialize());
  CHECK(a.serialize() == c.serialize());

  std::string error;
  auto back = DomainClassifier::parse(a.serialize(), &error);
  REQUIRE(back);
  CHECK(back->serialize() == a.serialize());
  CHECK(back->commitThreshold() == 0.9);
  auto g1 = a.classify("Disk quota exceeded on /home");
  auto g2 = back->classify("Disk quota exceeded on /home");
  CHECK(g1.domain == g2.domain);
  CHECK(g1.probability == Approx(g2.probability).epsilon(1e-6));
  CHECK(g1.top_features == g2.top_features);

  CHECK_FALSE(DomainClassifier::parse("hello\n", &error));
  CHECK(error.find("line 1") != std::string::npos);
  std::string cut = a.serialize();
  cut.erase(cut.rfind('\n', cut.size() - 2) + 1);  // one feature line fewer than announced
  CHECK_FALSE(DomainClassifier::parse(cut, &error));
  CHECK(error.find("feature count") != std::string::npos);
}

TEST_CASE("each wording is one training line, and a wording two domains share is none", "[domain]") {
  auto loaded = loadRuleSet(
      {tinyPack("rules/gpu/a.yaml",
                {{"a.hw", "hardware", "root",
                  {"NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus", "NVRM: Xid (PCI:0000:3b:00): 144, Ch 0000000a",
                   "NVRM: Xid (PCI:0000:b7:00): 79, GPU has fallen off the bus"}},
                 {"a.sw", "system_software", "root", {"NVRM: Xid (PCI:0000:3b:00): 62, Ch 0000000a"}}})},
      "1.0.0");
  REQUIRE(loaded.errors.empty());
  DomainExampleCounts counts;
  auto ex = domainExamplesOf(*loaded.rules, FamilyGrain::kFolder, &counts);
  CHECK(counts.lines == 4);
  CHECK(counts.repeated == 1);   // the second "fallen off the bus": only its PCI id differs
  CHECK(counts.ambiguous == 2);  // "Ch 0000000a" with Xid 144 (hardware) and 62 (system_software)
  REQUIRE(ex.size() == 1);
  CHECK(ex[0].line == "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus");
}

TEST_CASE("leave-one-family-out trains without the family it tests", "[domain]") {
  // Two families say the same things about storage and links; a third says them in words no
  // other family uses, so only it is missed when held out.
  std::vector<DomainExample> ex = {
      {"link down on port", SubDomain::kNetwork, "a"},
      {"no space left on device", SubDomain::kInfrastructure, "a"},
      {"port link down again", SubDomain::kNetwork, "b"},
      {"device has no space left", SubDomain::kInfrastructure, "b"},
      {"segmentation fault in user code", SubDomain::kApplication, "c"},
  };
  LofoOptions opt;
  opt.min_support = 1;
  opt.thresholds = {0.2, 0.5};
  auto r = leaveOneFamilyOut(ex, opt);
  REQUIRE(r.families.size() == 3);
  CHECK(r.families[0].family == "a");
  CHECK(r.families[0].examples == 2);
  CHECK(r.families[0].correct == 2);
  CHECK(r.families[1].correct == 2);
  // Held out, c's words are unknown to a model of a and b: no guess at all.
  CHECK(r.families[2].examples == 1);
  CHECK(r.families[2].unknown == 1);
  CHECK(r.families[2].correct == 0);
  REQUIRE(r.bands.size() == 2);
  CHECK(r.bands[0].guesses == 4);
  CHECK(r.bands[0].correct == 4);
  CHECK(r.bands[1].guesses <= r.bands[0].guesses);
  REQUIRE(r.commit_threshold);
  CHECK(*r.commit_threshold == Approx(0.2));  // every band is all right: the lowest one
  CHECK(formatLofoReport(r).find("commit threshold") != std::string::npos);

  // A family that is confidently wrong when held out takes the threshold away.
  ex.push_back({"link down on disk port", SubDomain::kInfrastructure, "d"});
  ex.push_back({"link down port", SubDomain::kInfrastructure, "d"});
  opt.thresholds = {0.2};
  auto wrong = leaveOneFamilyOut(ex, opt);
  CHECK_FALSE(wrong.commit_threshold);
  CHECK(stricterThreshold(0.5, 0.9) == 0.9);
  CHECK_FALSE(stricterThreshold(std::nullopt, 0.9));
}

TEST_CASE("the model the build trained reads the shipped rules' lines", "[domain]") {
  std::string error;
  auto model = DomainClassifier::parse(builtinDomainModelText(), &error);
  INFO(error);
  REQUIRE(model);
  auto loaded = loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  auto examples = domainExamplesOf(*loaded.rules, FamilyGrain::kFolder);

  // It is the model of the current rules (a stale build would differ), and its threshold is the
  // one leave-one-family-out measures on them (the stricter of the two groupings).
  auto threshold = stricterThreshold(leaveOneFamilyOut(examples).commit_threshold,
                                     leaveOneFamilyOut(domainExamplesOf(*loaded.rules, FamilyGrain::kFile)).commit_threshold);
  CHECK(model->commitThreshold() == threshold);
  auto fresh = DomainClassifier::train(examples);
  fresh.setCommitThreshold(threshold);
  CHECK(fresh.serialize() == builtinDomainModelText());

  // Every domain's own lines are read as that domain (in-sample, so this is a sanity check; the
  // honest figures are leave-one-family-out, docs/coverage/domain-classifier.md).
  for (auto d : kLeadDomains) {
    size_t n = 0, right = 0;
    for (const auto& ex : examples)
      if (ex.domain == d) {
        ++n;
        right += model->classify(ex.line).domain == d ? 1 : 0;
      }
    INFO(subDomainName(d) << ": " << right << " of " << n);
    REQUIRE(n >= 20);
    CHECK(right >= n * 8 / 10);
  }
  CHECK(model->classify("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.").domain ==
        SubDomain::kHardware);
}

TEST_CASE("an unattributed verdict's unmatched lines get a domain lead in words, never a verdict", "[domain]") {
  auto model = DomainClassifier::train(domainExamplesOf(*tinyRules(), FamilyGrain::kFolder));
  std::vector<UnrecognizedLine> lines(4);
  lines[0].first_line = "zebra quokka";  // no word the model knows: passed over
  lines[1].first_line = "checkpoint save failed: No space left on device";
  lines[2].first_line = "rank 3: checkpoint write failed, disk quota";
  lines[3].first_line = "mlx5_core 0000:af:00.1: port 2 link down";  // past the first three
  const std::string lead = unrecognizedDomainLead(lines, model, 3, 0.0);
  CHECK(lead.find("The error lines no rule matched read most like infrastructure (p ") == 0);
  CHECK(lead.find("; a lead, not a verdict.") != std::string::npos);
  CHECK(unrecognizedDomainLead(lines, model, 1, 0.0).empty());  // the first line alone: nothing known
  CHECK(unrecognizedDomainLead(lines, model, 3, 1.01).empty());  // below the floor: nothing said
  CHECK(unrecognizedDomainLead({}, model).empty());
  // A threshold the lead reaches: said without the hedge (the verdict itself is not changed here).
  model.setCommitThreshold(0.0);
  CHECK(unrecognizedDomainLead(lines, model, 3, 0.0).find("; a lead") == std::string::npos);
}

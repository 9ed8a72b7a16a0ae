// Every bundled sample gets the verdict a careful operator reached by reading its logs
// (samples/*/expected.json, written by hand from the logs, never from this program's output).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "aggregator/offline/attribute.h"
#include "common/rule_set.h"
#include "common/wire.h"

using namespace faultline;
namespace fs = std::filesystem;

// Catch runs a test case once per SECTION: the shipped rules are loaded and compiled once for all
// of them, not once per sample (which made this test the suite's longest as the samples grew).
const common::RuleEngine& shippedRuleEngine() {
  static const common::RuleEngine engine = [] {
    auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
    if (!loaded.rules) throw std::runtime_error("the shipped rules do not load");
    return common::RuleEngine(loaded.rules);
  }();
  return engine;
}

TEST_CASE("every sample bundle gets its expected verdict", "[samples]") {
  const auto& engine = shippedRuleEngine();
  std::vector<fs::path> samples, real;
  for (const auto& e : fs::directory_iterator(FAULTLINE_SOURCE_DIR "/samples"))
    if (fs::exists(e.path() / "expected.json")) samples.push_back(e.path());
  // samples/real: whole excerpts of logs posted in public threads whose cause the thread
  // established; expected.json names the thread and quotes the sentence that decides it.
  for (const auto& e : fs::directory_iterator(FAULTLINE_SOURCE_DIR "/samples/real"))
    if (fs::exists(e.path() / "expected.json")) real.push_back(e.path());
  std::sort(samples.begin(), samples.end());
  std::sort(real.begin(), real.end());
  REQUIRE(samples.size() >= 30);
  REQUIRE(real.size() >= 25);
  samples.insert(samples.end(), real.begin(), real.end());
  std::set<std::string> states, domains;
  for (const auto& dir : samples) {
    SECTION(dir.parent_path().filename().string() + "/" + dir.filename().string()) {
      std::ifstream in(dir / "expected.json");
      auto exp = nlohmann::json::parse(in);
      if (dir.parent_path().filename() == "real") {
        CHECK(exp.value("source", "").rfind("https://", 0) == 0);
        CHECK(!exp.value("quote", "").empty());
        CHECK(fs::exists(dir / "README.md"));
      }
      std::string error;
      auto d = offline::attributeBundle(dir.string(), engine, &error);
      INFO(error);
      REQUIRE(d);
      INFO(common::renderReport(*d));
      CHECK(d->terminal_state == exp["terminal_state"].get<std::string>());
      CHECK(common::subDomainName(d->sub_domain) == exp["sub_domain"].get<std::string>());
      std::vector<std::string> got, want = exp["responsible_nodes"].get<std::vector<std::string>>();
      for (const auto& r : d->responsible) got.push_back(r.node);
      std::sort(got.begin(), got.end());
      std::sort(want.begin(), want.end());
      CHECK(got == want);
      if (d->sub_domain == common::SubDomain::kAmbiguous) {
        std::vector<std::string> ids;
        for (const auto& c : d->candidates) ids.push_back(c.rule_id);
        if (!exp["cause_rule"].is_null())
          CHECK(std::find(ids.begin(), ids.end(), exp["cause_rule"].get<std::string>()) != ids.end());
      } else if (exp["cause_rule"].is_null()) {
        CHECK(!d->cause);
      } else {
        REQUIRE(d->cause);
        CHECK(d->cause->rule_id == exp["cause_rule"].get<std::string>());
        if (exp.contains("device")) CHECK(d->cause->device == exp["device"].get<std::string>());
      }
      // The JSON document follows docs/output-schema.md and reads back.
      auto j = common::toJson(*d);
      for (const char* key : {"schema_version", "job_id", "terminal_state", "sub_domain", "responsible_nodes",
                              "cause", "recommended_action", "candidates", "chain", "coverage", "ruleset_version"})
        CHECK(j.contains(key));
      std::string err;
      auto back = common::diagnosisFromJson(j, &err);
      REQUIRE(back);
      CHECK(back->sub_domain == d->sub_domain);
      CHECK(back->chain.size() == d->chain.size());
    }
  }
}

// A node's console log as HPE Cray EX keeps it ("[<RFC 3339>][<uptime>][T<pid>] msg"): read as
// the kernel's (format "console"), so kernel-only rules see its stack frames. The bundle is in
// samples/real-pending until the ledger moves it to samples/real; either place is read.
TEST_CASE("a node's console log reaches the kernel rules: the Setonix amdgpu bundle", "[samples]") {
  const char* name = "sys-amdgpu-svm-evict-warn-kills-node-jax-setonix";
  fs::path dir;
  for (const char* root : {FAULTLINE_SOURCE_DIR "/samples/real", FAULTLINE_SOURCE_DIR "/samples/real-pending"})
    if (fs::exists(fs::path(root) / name / "expected.json")) dir = fs::path(root) / name;
  REQUIRE(!dir.empty());
  std::string error;
  auto d = offline::attributeBundle(dir.string(), shippedRuleEngine(), &error);
  INFO(error);
  REQUIRE(d);
  INFO(common::renderReport(*d));
  bool console = false;
  for (const auto& c : d->coverage)
    if (c.source.find("console.log") != std::string::npos) {
      console = true;
      CHECK(c.format == "console");
      CHECK(c.records == 8);
      CHECK(c.skipped == 0);
    }
  CHECK(console);
  CHECK(d->terminal_state == "node_fail");
  CHECK(d->sub_domain == common::SubDomain::kSystemSoftware);
  REQUIRE(d->responsible.size() == 1);
  CHECK(d->responsible[0].node == "nid002950");
  REQUIRE(d->cause);
  CHECK(d->cause->rule_id == "kernel.stack_in_amdgpu");
}

// The live verdict reads its symptoms as common::copyForCorrelation gives them (the evidence cut
// to its first line: the store's window read and decoded-symptom cache hold no more). correlate()
// must judge every sample the same from those copies, and a copy must carry every other member.
TEST_CASE("every sample bundle gets the same diagnosis from the symptoms cut for correlation", "[samples]") {
  auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
  REQUIRE(loaded.rules);
  common::RuleEngine engine(loaded.rules);
  std::vector<fs::path> samples;
  for (const char* root : {FAULTLINE_SOURCE_DIR "/samples", FAULTLINE_SOURCE_DIR "/samples/real"})
    for (const auto& e : fs::directory_iterator(root))
      if (fs::exists(e.path() / "expected.json")) samples.push_back(e.path());
  REQUIRE(samples.size() >= 55);
  size_t cut = 0;  // symptoms that had evidence to cut
  for (const auto& dir : samples) {
    INFO(dir.string());
    std::string error;
    auto bundle = offline::loadBundle(dir.string(), engine, &error);
    INFO(error);
    REQUIRE(bundle);
    std::vector<common::Symptom> copies;
    for (const auto& s : bundle->symptoms) {
      copies.push_back(common::copyForCorrelation(s));
      common::Symptom want = s;
      if (want.evidence.size() > 1) {
        want.evidence.resize(1);
        ++cut;
      }
      common::SymptomBatchData a, b;
      a.symptoms = {want};
      b.symptoms = {copies.back()};
      CHECK(common::encodeBatch(a) == common::encodeBatch(b));
    }
    auto full = common::correlate(bundle->job, bundle->symptoms, &engine.rules());
    auto from_copies = common::correlate(bundle->job, std::move(copies), &engine.rules());
    CHECK(common::toJson(from_copies).dump() == common::toJson(full).dump());
  }
  CHECK(cut > 100);  // the samples do exercise the cut
}

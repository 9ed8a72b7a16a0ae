// `faultline attribute` lists the error lines no rule matched (issue 30): bundles built at test
// time with three nodes' journals, one node printing an error no rule knows; a good run as
// --baseline; a rule's line is never listed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "aggregator/offline/attribute.h"
#include <re2/re2.h>

#include "common/rule_set.h"

using namespace faultline;
namespace fs = std::filesystem;

namespace {

struct Scratch {
  fs::path path;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "faultline-unrec-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~Scratch() { fs::remove_all(path); }
};

void put(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

const common::RuleEngine& rules() {
  static auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"}).rules;
  static common::RuleEngine e(loaded);
  return e;
}

// A failed three-node job; every node's journal holds start-up noise with an error word; `odd`
// also prints a storage-controller error no rule knows, ten minutes before the end.
void failedJob(const fs::path& dir, const std::string& odd, bool rule_line = false) {
  put(dir / "job.json", R"({"job_id": "31", "state": "FAILED", "exit_code": "1:0",
    "start_time": "2024-06-01T10:00:00Z", "end_time": "2024-06-01T11:00:00Z", "nodelist": "n[1-3]"})");
  for (const std::string node : {"n1", "n2", "n3"}) {
    std::string j;
    j += fmt::format("2024-06-01T10:00:05.000000+0000 {} systemd[1]: Started Session 4 of User alice.\n", node);
    j += fmt::format("2024-06-01T10:00:06.000000+0000 {} kernel: ACPI Error: AE_NOT_FOUND, while evaluating GPE method\n", node);
    if (node == odd)
      j += fmt::format("2024-06-01T10:58:00.000000+0000 {} kernel: megaraid_sas 0000:18:00.0: FW in FAULT state, "
                       "Fault code:0x10000 subcode:0x0\n", node);
    if (rule_line && node == odd)
      j += fmt::format("2024-06-01T10:59:00.000000+0000 {} kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, "
                       "name=python, GPU has fallen off the bus.\n", node);
    put(dir / "nodes" / node / "journal.txt", j);
  }
}

}  // namespace

TEST_CASE("attribute lists the error line only one node printed and names it as a lead", "[unrecognized][samples]") {
  Scratch t;
  failedJob(t.path, "n2");
  std::string error;
  auto d = offline::attributeBundle(t.path.string(), rules(), &error);
  INFO(error);
  REQUIRE(d);
  INFO(common::renderReport(*d));
  CHECK(d->sub_domain == common::SubDomain::kUnattributed);
  CHECK(d->responsible.empty());
  REQUIRE_FALSE(d->unrecognized.empty());
  const auto& top = d->unrecognized.front();
  CHECK(top.first_line.find("FW in FAULT state") != std::string::npos);
  CHECK(top.nodes == std::vector<std::string>{"n2"});
  CHECK(top.why.front().rfind("spatial", 0) == 0);
  // The ACPI line is on every node at the start: not unusual.
  for (const auto& u : d->unrecognized) CHECK(u.first_line.find("ACPI") == std::string::npos);
  REQUIRE(d->divergent_node);
  CHECK(d->divergent_node->node == "n2");
  CHECK(common::confidenceBand(d->divergent_node->confidence) == "lead");
  CHECK(d->explanation.find("A lead, not a verdict: the logs of n2 hold error lines no other node printed") !=
        std::string::npos);
  auto j = common::toJson(*d);
  CHECK(j["unrecognized"][0]["nodes"] == nlohmann::json::array({"n2"}));
  CHECK(j["divergent_node"]["node"] == "n2");
}

TEST_CASE("attribute --baseline: lines the good run printed too are not listed", "[unrecognized][samples]") {
  Scratch bad, good;
  failedJob(bad.path, "n2");
  failedJob(good.path, "n3");  // the same controller message, in a run that succeeded
  put(good.path / "job.json", R"({"job_id": "30", "state": "COMPLETED", "exit_code": "0:0",
    "start_time": "2024-05-31T10:00:00Z", "end_time": "2024-05-31T11:00:00Z", "nodelist": "n[1-3]"})");
  std::string error;
  auto d = offline::attributeBundle(bad.path.string(), rules(), &error, {}, {}, {good.path.string()});
  INFO(error);
  REQUIRE(d);
  INFO(common::renderReport(*d));
  CHECK(d->unrecognized.empty());
  CHECK_FALSE(d->divergent_node);
  // A baseline that cannot be read is an error, not a silent nothing.
  CHECK_FALSE(offline::attributeBundle(bad.path.string(), rules(), &error, {}, {}, {(bad.path / "nope").string()}));
  CHECK(error.find("baseline") == 0);
}

TEST_CASE("attribute: a line a rule matched is never unrecognized, and a rule's node takes no lead",
          "[unrecognized][samples]") {
  Scratch t;
  failedJob(t.path, "n2", /*rule_line=*/true);
  std::string error;
  auto d = offline::attributeBundle(t.path.string(), rules(), &error);
  INFO(error);
  REQUIRE(d);
  INFO(common::renderReport(*d));
  REQUIRE(d->cause);
  CHECK(d->cause->rule_id == "xid.79");
  for (const auto& u : d->unrecognized) CHECK(u.first_line.find("Xid") == std::string::npos);
  CHECK_FALSE(d->unrecognized.empty());  // the controller line is still listed
  CHECK_FALSE(d->divergent_node);         // the rules localized the root
}

TEST_CASE("attribute: the unrecognized lists of the samples are deterministic and bounded", "[unrecognized][samples]") {
  for (const char* s : {"samples/cascade64-xid79", "samples/ambiguous-dbe-nfs"}) {
    std::string error;
    auto a = offline::attributeBundle(std::string(FAULTLINE_SOURCE_DIR "/") + s, rules(), &error);
    auto b = offline::attributeBundle(std::string(FAULTLINE_SOURCE_DIR "/") + s, rules(), &error);
    REQUIRE(a);
    REQUIRE(b);
    CHECK(common::toJson(*a)["unrecognized"] == common::toJson(*b)["unrecognized"]);
    CHECK(a->unrecognized.size() <= 20);
  }
}

namespace {

// A skeleton with its TODOs decided the way a rule author would, loaded by the real rule loader.
common::RuleLoadResult loadSkeleton(std::string yaml) {
  auto decide = [&](const std::string& from, const std::string& to) {
    for (size_t at = yaml.find(from); at != std::string::npos; at = yaml.find(from, at + to.size()))
      yaml.replace(at, from.size(), to);
  };
  for (int n = 1; n <= 40; ++n) decide(fmt::format("id: TODO-{}\n", n), fmt::format("id: suggested.r{}\n", n));
  decide("pack: TODO", "pack: suggested");
  decide("sub_domain: TODO", "sub_domain: hardware");
  decide("role: TODO", "role: root");
  return common::loadRuleSet({{"suggested.yaml", yaml}}, "0.0.0");
}

}  // namespace

TEST_CASE("rules suggest: skeletons whose patterns match their own examples through the rule loader",
          "[unrecognized][suggest]") {
  Scratch t;
  failedJob(t.path, "n2");
  std::string error;
  auto yaml = offline::suggestRules({t.path.string()}, {}, rules(), &error);
  INFO(error);
  REQUIRE(yaml);
  INFO(*yaml);
  CHECK(yaml->find("# bundle: " + t.path.string()) != std::string::npos);
  CHECK(yaml->find("sub_domain: TODO") != std::string::npos);
  CHECK(yaml->find("role: TODO") != std::string::npos);
  CHECK(yaml->find("FW in FAULT state") != std::string::npos);
  auto loaded = loadSkeleton(*yaml);
  for (const auto& e : loaded.errors) INFO(e);
  REQUIRE(loaded.errors.empty());
  REQUIRE(loaded.rules);
  REQUIRE_FALSE(loaded.rules->rules.empty());
  for (const auto& r : loaded.rules->rules) {
    REQUIRE(r.regex);
    REQUIRE_FALSE(r.match_examples.empty());
    for (const auto& ex : r.match_examples) {
      INFO(r.id << ": " << r.pattern << " vs " << ex);
      CHECK(RE2::PartialMatch(ex, *r.regex));
      bool holds = false;
      for (const auto& p : r.prefilters) holds = holds || ex.find(p) != std::string::npos;
      CHECK(holds);
    }
  }
  // A baseline that printed every line leaves nothing to suggest.
  auto none = offline::suggestRules({t.path.string()}, {t.path.string()}, rules(), &error);
  REQUIRE(none);
  CHECK(none->find("no failure-indicating line was left unmatched") != std::string::npos);
}

TEST_CASE("rules suggest: on the real samples every skeleton loads and matches its examples", "[unrecognized][suggest]") {
  size_t rules_seen = 0;
  for (const auto& e : fs::directory_iterator(FAULTLINE_SOURCE_DIR "/samples/real")) {
    if (!fs::exists(e.path() / "expected.json")) continue;
    std::string error;
    auto yaml = offline::suggestRules({e.path().string()}, {}, rules(), &error);
    INFO(e.path().string() << ": " << error);
    REQUIRE(yaml);
    auto loaded = loadSkeleton(*yaml);
    INFO(*yaml);
    for (const auto& p : loaded.errors) INFO(p);
    REQUIRE(loaded.errors.empty());
    for (const auto& r : loaded.rules->rules) {
      ++rules_seen;
      for (const auto& ex : r.match_examples) {
        INFO(r.id << ": " << r.pattern << " vs " << ex);
        CHECK(RE2::PartialMatch(ex, *r.regex));
      }
    }
  }
  CHECK(rules_seen > 20);
}

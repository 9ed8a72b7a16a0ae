// Conformance with peers' test tables (issue 11): every line a peer's own tests feed to its log
// matchers (NVIDIA NVSentinel, leptonai/gpud, kubernetes/node-problem-detector, NVIDIA
// nvidia-resiliency-ext) runs through the real format detection, parsers and rule engine, and
// faultline's symptoms are compared with what the peer expects (its label mapped to a faultline
// expectation in tests/conformance/data/<peer>.yaml; docs/coverage/conformance.md).
//
// Fails when a peer's agreement on real lines is below 95 %, or when a root symptom appears on a
// real line a peer treats as benign. Cases marked `synthetic` (text no program prints) or
// `deliberate_difference` (the peer's verdict is not one faultline should share, with the reason)
// are reported but neither counted nor failed on.
//
// FAULTLINE_RULES_DIR / FAULTLINE_CONFORMANCE_DATA override the rule and data directories;
// FAULTLINE_CONFORMANCE_REPORT=1 prints every disagreement (=md: as Markdown tables).
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "aggregator/offline/bundle.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"

using namespace faultline;
namespace fs = std::filesystem;

namespace {

std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::vector<std::string> strings(const YAML::Node& n) {
  std::vector<std::string> out;
  if (!n) return out;
  if (n.IsSequence())
    for (const auto& x : n) out.push_back(x.as<std::string>());
  else
    out.push_back(n.as<std::string>());
  return out;
}

// What faultline should produce for a case. All given constraints hold for one symptom;
// `benign` means no symptom with role root.
struct Expect {
  std::vector<std::string> rules, rule_prefixes, sub_domains, categories, roles;
  bool benign = false;
  bool empty() const {
    return !benign && rules.empty() && rule_prefixes.empty() && sub_domains.empty() &&
           categories.empty() && roles.empty();
  }
};

std::string subst(std::string s, const std::string& n) {
  for (size_t p; (p = s.find("{n}")) != std::string::npos;) s.replace(p, 3, n);
  return s;
}

Expect parseExpect(const YAML::Node& n, const std::string& num = "") {
  Expect e;
  if (!n) return e;
  for (auto& s : strings(n["rule"])) e.rules.push_back(subst(s, num));
  for (auto& s : strings(n["rule_prefix"])) e.rule_prefixes.push_back(subst(s, num));
  e.sub_domains = strings(n["sub_domain"]);
  e.categories = strings(n["category"]);
  e.roles = strings(n["role"]);
  e.benign = n["benign"] && n["benign"].as<bool>();
  return e;
}

std::string describe(const Expect& e) {
  if (e.benign) return "benign (no root symptom)";
  std::string out;
  auto add = [&](const char* k, const std::vector<std::string>& v) {
    if (v.empty()) return;
    if (!out.empty()) out += ", ";
    out += k;
    out += "=";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? "|" : "") + v[i];
  };
  add("rule", e.rules);
  add("rule_prefix", e.rule_prefixes);
  add("sub_domain", e.sub_domains);
  add("category", e.categories);
  add("role", e.roles);
  return out.empty() ? "(none)" : out;
}

bool in(const std::vector<std::string>& v, std::string_view s) {
  return v.empty() || std::find(v.begin(), v.end(), s) != v.end();
}

bool satisfies(const common::Symptom& s, const Expect& e) {
  if (!e.rules.empty() && std::find(e.rules.begin(), e.rules.end(), s.rule_id) == e.rules.end())
    return false;
  if (!e.rule_prefixes.empty() &&
      std::none_of(e.rule_prefixes.begin(), e.rule_prefixes.end(),
                   [&](const std::string& p) { return s.rule_id.rfind(p, 0) == 0; }))
    return false;
  return in(e.sub_domains, common::subDomainName(s.sub_domain)) && in(e.categories, s.category) &&
         in(e.roles, common::roleName(s.role));
}

struct Mapping {
  std::string label;
  std::regex re;  // the label; {n} stands for a number (captured), {*} for any text
  YAML::Node expect;
};

struct Case {
  std::string peer, id, path, test, label, source, synthetic, deliberate, input;
  std::vector<std::string> lines;  // several records; empty: `input` is one record
  Expect expect;
  bool mapped = false;
};

struct Outcome {
  bool agree = false;
  bool benign_violation = false;
  std::string produced;  // rule(role,sub_domain) list
  std::string format;
};

std::string regexEscape(const std::string& s) {
  static const std::string special = R"(\^$.|?*+()[]{}/)";
  std::string out;
  for (char c : s) {
    if (special.find(c) != std::string::npos) out += '\\';
    out += c;
  }
  return out;
}

std::vector<Case> loadPeer(const fs::path& file, std::vector<std::string>* errors) {
  YAML::Node doc = YAML::LoadFile(file.string());
  std::string peer = doc["peer"].as<std::string>();
  std::vector<Mapping> maps;
  for (const auto& m : doc["mappings"]) {
    Mapping mp;
    mp.label = m["label"].as<std::string>();
    std::string pat = regexEscape(mp.label);
    for (size_t p; (p = pat.find("\\{n\\}")) != std::string::npos;) pat.replace(p, 5, "([0-9]+)");
    for (size_t p; (p = pat.find("\\{\\*\\}")) != std::string::npos;) pat.replace(p, 6, ".*");
    mp.re = std::regex(pat);
    mp.expect = m["expect"];
    maps.push_back(std::move(mp));
  }
  std::vector<Case> out;
  std::set<std::string> ids;
  for (const auto& c : doc["cases"]) {
    Case k;
    k.peer = peer;
    k.id = c["id"].as<std::string>();
    if (!ids.insert(k.id).second) errors->push_back(file.string() + ": duplicate id " + k.id);
    k.path = c["path"] ? c["path"].as<std::string>() : "";
    k.test = c["test"] ? c["test"].as<std::string>() : "";
    k.label = c["label"].as<std::string>();
    k.source = c["source"] ? c["source"].as<std::string>() : "application";
    if (c["synthetic"]) k.synthetic = c["synthetic"].as<std::string>();
    if (c["deliberate_difference"]) k.deliberate = c["deliberate_difference"].as<std::string>();
    if (c["lines"])
      k.lines = strings(c["lines"]);
    else
      k.input = c["text"].as<std::string>();
    if (c["expect"]) {
      k.expect = parseExpect(c["expect"]);
      k.mapped = true;
    } else {
      for (const auto& m : maps) {
        std::smatch sm;
        if (std::regex_match(k.label, sm, m.re)) {
          k.expect = parseExpect(m.expect, sm.size() > 1 ? sm[1].str() : "");
          k.mapped = true;
          break;
        }
      }
    }
    if (!k.mapped || k.expect.empty())
      errors->push_back(file.string() + ": " + k.id + ": no expectation for label '" + k.label +
                        "'");
    out.push_back(std::move(k));
  }
  return out;
}

common::SourceKind kindOf(const std::string& s) {
  if (s == "kernel") return common::SourceKind::kKernel;
  if (s == "journal") return common::SourceKind::kJournal;
  if (s == "fabricmanager") return common::SourceKind::kFabricManager;
  return common::SourceKind::kApplication;
}

// The case's lines as a log file through format detection and the parsers. A bare message
// (no log prefix, detected as application text) of a kernel / journal / fabric manager source
// is what that source's reader hands the engine: one record per line, or the whole text as one
// record (the peer fed its matcher that one string), with the source's kind.
std::vector<common::Symptom> run(const Case& c, const common::RuleEngine& engine,
                                 const fs::path& dir, std::string* format) {
  fs::path f = dir / (c.id + ".log");
  {
    std::ofstream out(f, std::ios::binary | std::ios::trunc);
    if (c.lines.empty())
      out << c.input << "\n";
    else
      for (const auto& l : c.lines) out << l << "\n";
  }
  auto r = offline::scanFile(f.string(), "conformance", engine, nullptr, false);
  fs::remove(f);
  *format = r.coverage.format;
  if (r.coverage.format != "application" || c.source == "application") return r.symptoms;
  *format += " -> " + c.source + " records";
  common::MatchContext ctx{"conformance", c.source, kindOf(c.source), {}};
  std::vector<common::Symptom> out;
  std::vector<std::string> records = c.lines.empty() ? std::vector<std::string>{c.input} : c.lines;
  uint64_t n = 0;
  for (const auto& text : records) {
    common::LogRecord rec;
    rec.text = text;
    rec.line = ++n;
    if (auto s = engine.extract(rec, ctx)) out.push_back(std::move(*s));
  }
  return out;
}

Outcome judge(const Case& c, const std::vector<common::Symptom>& got) {
  Outcome o;
  std::set<std::string> seen;
  for (const auto& s : got) {
    std::string d = s.rule_id + "(" + std::string(common::roleName(s.role)) + "," +
                    std::string(common::subDomainName(s.sub_domain)) + ")";
    if (seen.insert(d).second) o.produced += (o.produced.empty() ? "" : " ") + d;
  }
  if (o.produced.empty()) o.produced = "-";
  bool any_root = std::any_of(got.begin(), got.end(), [](const common::Symptom& s) {
    return s.role == common::Role::kRoot;
  });
  if (c.expect.benign) {
    o.agree = !any_root;
    o.benign_violation = any_root;
  } else {
    o.agree = std::any_of(got.begin(), got.end(),
                          [&](const common::Symptom& s) { return satisfies(s, c.expect); });
  }
  return o;
}

std::string firstLine(const Case& c, size_t max = 160) {
  std::string t =
      c.lines.empty()
          ? c.input
          : c.lines.front() +
                (c.lines.size() > 1 ? " [+" + std::to_string(c.lines.size() - 1) + " lines]" : "");
  for (auto& ch : t)
    if (ch == '\n') ch = ' ';
  if (t.size() > max) t = t.substr(0, max) + "...";
  return t;
}

std::string mdCell(std::string s) {
  std::string out;
  for (char ch : s) {
    if (ch == '|')
      out += "\\|";
    else if (ch == '`')
      out += "'";
    else
      out += ch;
  }
  return out;
}

}  // namespace

TEST_CASE("peers' test tables agree with faultline's rules", "[conformance]") {
  std::string rules_dir = envOr("FAULTLINE_RULES_DIR", FAULTLINE_SOURCE_DIR "/rules");
  std::string data_dir =
      envOr("FAULTLINE_CONFORMANCE_DATA", FAULTLINE_SOURCE_DIR "/tests/conformance/data");
  std::string report = envOr("FAULTLINE_CONFORMANCE_REPORT", "");
  auto loaded = common::loadRuleDirs({rules_dir});
  for (const auto& e : loaded.errors) UNSCOPED_INFO(e);
  REQUIRE(loaded.rules);
  common::RuleEngine engine(loaded.rules);

  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(data_dir))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() >= 4);

  std::vector<std::string> errors;
  std::vector<Case> cases;
  for (const auto& f : files) {
    auto c = loadPeer(f, &errors);
    cases.insert(cases.end(), c.begin(), c.end());
  }
  for (const auto& e : errors) UNSCOPED_INFO(e);
  CHECK(errors.empty());

  fs::path tmp =
      fs::temp_directory_path() / ("faultline-conformance-" + std::to_string(::getpid()));
  fs::create_directories(tmp);

  struct Tally {
    int cases = 0, real = 0, agree = 0, synthetic = 0, synthetic_agree = 0, deliberate = 0,
        deliberate_agree = 0;
  };
  std::map<std::string, Tally> tally;
  std::vector<std::pair<const Case*, Outcome>> misses, deliberate, synthetic_misses;
  std::vector<std::string> benign_violations;
  for (const auto& c : cases) {
    std::string format;
    auto got = run(c, engine, tmp, &format);
    Outcome o = judge(c, got);
    o.format = format;
    auto& t = tally[c.peer];
    ++t.cases;
    if (!c.deliberate.empty()) {
      ++t.deliberate;
      t.deliberate_agree += o.agree;
      deliberate.emplace_back(&c, o);
      continue;
    }
    if (!c.synthetic.empty()) {
      ++t.synthetic;
      t.synthetic_agree += o.agree;
      if (!o.agree) synthetic_misses.emplace_back(&c, o);
      continue;
    }
    if (o.benign_violation)
      benign_violations.push_back(c.peer + " " + c.id + ": '" + firstLine(c) + "' (" + c.label +
                                  ") -> " + o.produced);
    ++t.real;
    t.agree += o.agree;
    if (!o.agree) misses.emplace_back(&c, o);
  }
  fs::remove_all(tmp);

  Tally all;
  std::printf("\nconformance with peers' test tables (rules: %s)\n", rules_dir.c_str());
  std::printf("%-36s %6s %6s %6s %8s %10s %11s\n", "peer", "cases", "real", "agree", "agree%",
              "synthetic", "deliberate");
  for (const auto& [peer, t] : tally) {
    std::printf("%-36s %6d %6d %6d %7.1f%% %6d/%-3d %11d\n", peer.c_str(), t.cases, t.real, t.agree,
                t.real ? 100.0 * t.agree / t.real : 100.0, t.synthetic_agree, t.synthetic,
                t.deliberate);
    all.cases += t.cases, all.real += t.real, all.agree += t.agree, all.synthetic += t.synthetic;
    all.synthetic_agree += t.synthetic_agree, all.deliberate += t.deliberate;
  }
  std::printf("%-36s %6d %6d %6d %7.1f%% %6d/%-3d %11d\n", "all", all.cases, all.real, all.agree,
              all.real ? 100.0 * all.agree / all.real : 100.0, all.synthetic_agree, all.synthetic,
              all.deliberate);

  if (!report.empty()) {
    bool md = report == "md";
    auto list = [&](const char* title, const std::vector<std::pair<const Case*, Outcome>>& v,
                    bool show_reason) {
      std::printf("\n%s%s (%zu)\n", md ? "### " : "== ", title, v.size());
      if (md)
        std::printf(
            "\n| peer | id | line | peer label | expected | faultline produced "
            "|\n|---|---|---|---|---|---|\n");
      for (const auto& [c, o] : v) {
        std::string exp = describe(c->expect);
        if (show_reason) exp += "; " + (c->deliberate.empty() ? c->synthetic : c->deliberate);
        if (md)
          std::printf("| %s | %s | `%s` | %s | %s | %s |\n", mdCell(c->peer).c_str(), c->id.c_str(),
                      mdCell(firstLine(*c, 140)).c_str(), mdCell(c->label).c_str(),
                      mdCell(exp).c_str(), mdCell(o.produced).c_str());
        else
          std::printf(
              "%s %s [%s]\n  line:     %s\n  peer:     %s\n  expected: %s\n  produced: %s\n",
              c->peer.c_str(), c->id.c_str(), o.format.c_str(), firstLine(*c).c_str(),
              c->label.c_str(), exp.c_str(), o.produced.c_str());
      }
    };
    list("disagreements on real lines", misses, false);
    list("synthetic lines faultline does not treat as the peer does", synthetic_misses, true);
    list("deliberate differences", deliberate, true);
  }

  for (const auto& b : benign_violations)
    UNSCOPED_INFO("root symptom on a line the peer treats as benign: " << b);
  CHECK(benign_violations.empty());
  for (const auto& [peer, t] : tally) {
    INFO(peer << ": " << t.agree << "/" << t.real << " real lines agree; " << misses.size()
              << " disagreements in all (FAULTLINE_CONFORMANCE_REPORT=1 lists them)");
    CHECK(t.agree * 100 >= t.real * 95);
  }
}

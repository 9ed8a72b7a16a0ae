// The rule cache (common/rule_cache.h): a hit gives the same rules, relations and symptoms as
// loading the YAML; a changed rule file makes the cache stale and it is rebuilt; a cache file that
// is truncated, garbage, altered or not a file is named in the note and the YAML rules are loaded
// (never a crash), and the next load finds a good cache again.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error_lexicon.h"
#include "common/parse/literal_scan.h"
#include "common/parse/stream_parser.h"
#include "common/rule_cache.h"
#include "common/rule_engine.h"

using namespace faultline::common;
namespace fs = std::filesystem;
using Cache = CachedRuleLoad::Cache;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    static int n = 0;
    path = fs::temp_directory_path() / ("faultline-rule-cache-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void writeAll(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

const std::string kShipped = std::string(FAULTLINE_SOURCE_DIR) + "/rules";

// Every field a rule and a relation carry, as text (compiled regexes aside).
std::string describe(const RuleSet& set) {
  std::ostringstream o;
  o << "version " << set.version << "\n";
  for (const auto& r : set.rules) {
    o << r.id << "|" << r.since << "|" << r.deprecated << "|" << r.pack << "|" << r.file << ":" << r.line << "|"
      << r.symptom << "|" << static_cast<int>(r.sub_domain) << "|" << r.category << "|" << static_cast<int>(r.role)
      << "|" << static_cast<int>(r.severity) << "|" << r.priority << "|" << r.fallback_root << "|" << r.boot_settle_ns
      << "|" << r.pattern << "|" << r.device_template << "|" << r.node_template << "|" << r.summary_template << "|"
      << r.meaning << "|" << r.action;
    for (const auto& p : r.prefilters) o << "|pre=" << p;
    for (auto k : r.sources) o << "|src=" << static_cast<int>(k);
    for (const auto& [k, v] : r.fields) o << "|f." << k << "=" << v;
    for (const auto& [k, v] : r.nvidia) o << "|n." << k << "=" << v;
    for (const auto& e : r.match_examples) o << "|m=" << e;
    for (const auto& e : r.no_match_examples) o << "|nm=" << e;
    o << "\n";
  }
  auto matcher = [&](const SymptomMatcher& m) {
    for (const auto& x : m.rules) o << " r=" << x;
    for (const auto& x : m.not_rules) o << " !r=" << x;
    for (const auto& x : m.categories) o << " c=" << x;
    for (auto x : m.sub_domains) o << " d=" << static_cast<int>(x);
    for (auto x : m.not_sub_domains) o << " !d=" << static_cast<int>(x);
    for (auto x : m.roles) o << " role=" << static_cast<int>(x);
    for (auto x : m.sources) o << " s=" << static_cast<int>(x);
    if (m.min_severity) o << " sev>=" << static_cast<int>(*m.min_severity);
    for (const auto& [k, v] : m.fields) o << " f." << k << "=" << v;
    for (const auto& [k, v] : m.node_facts) o << " nf." << k << "=" << v;
    o << " fb=" << m.fallback_only;
  };
  for (const auto& r : set.relations) {
    o << "relation " << r.id << "|" << r.since << "|" << r.file << ":" << r.line << "|" << r.reason << "|"
      << static_cast<int>(r.effect) << "|" << static_cast<int>(r.scope) << "|" << r.cause_domain << "|"
      << r.before_ns << "|" << r.after_ns << "|" << r.peer_field << " symptom:";
    matcher(r.symptom);
    if (r.cause) o << " cause:", matcher(*r.cause);
    if (r.until) o << " until:", matcher(*r.until);
    for (const auto& [a, b] : r.same_fields) o << " same " << a << "=" << b;
    for (auto d : r.plausible) o << " plausible " << static_cast<int>(d);
    for (const auto& ex : r.examples) {
      o << " example@" << ex.line << " start " << ex.job_start_offset_ns;
      for (const auto& n : ex.job_nodes) o << " node " << n;
      for (const auto& [k, v] : ex.expect) o << " expect " << k << "=" << v;
      for (const auto& en : ex.symptoms) {
        const Symptom& s = en.symptom;
        o << " [" << en.name << " " << s.rule_id << " " << s.symptom << " " << static_cast<int>(s.sub_domain) << " "
          << s.category << " " << static_cast<int>(s.role) << " " << static_cast<int>(s.severity) << " "
          << s.fallback_root << " " << s.node << " " << s.device << " " << s.source << " "
          << static_cast<int>(s.source_kind) << " " << s.first_ns << " " << s.last_ns << " " << s.time_known << " "
          << s.count << " " << s.summary << " " << s.boot_id;
        for (const auto& e : s.evidence) o << " ev=" << e;
        for (const auto& [k, v] : s.fields) o << " " << k << "=" << v;
        o << "]";
      }
    }
    o << "\n";
  }
  return o.str();
}

// The symptoms of every sample file (text formats), searched with the engine's own literal
// scanner (the cache's deserialized one on a hit).
std::vector<std::string> sampleSymptoms(const RuleEngine& engine) {
  std::vector<std::string> out;
  for (auto it = fs::recursive_directory_iterator(fs::path(FAULTLINE_SOURCE_DIR) / "samples");
       it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file() || it->path().extension() == ".json" || it->path().filename() == "README.md") continue;
    const std::string data = readAll(it->path());
    if (data.compare(0, 8, "LPKSHHRH") == 0) continue;  // binary journal
    const LogFormat format = detectFormat(std::string_view(data).substr(0, 64 << 10));
    ParseOptions o;
    o.literals = engine.literalScanner();
    MatchContext ctx;
    ctx.node = "n1";
    ctx.source = it->path().filename().string();
    ctx.kind = sourceKindOf(format);
    auto p = makeStreamParser(format, o, [&](LogRecord&& rec) {
      if (auto s = engine.extract(rec, ctx)) {
        std::ostringstream line;
        line << ctx.source << " " << s->rule_id << " " << s->node << " " << s->device << " " << s->first_ns << " "
             << static_cast<int>(s->role) << " " << s->summary;
        for (const auto& [k, v] : s->fields) line << " " << k << "=" << v;
        out.push_back(line.str());
      }
    });
    p->feed(data);
    p->finish();
  }
  return out;
}

// A small rule tree of our own, to change and break.
void writeRules(const fs::path& dir, const std::string& pattern, const std::string& name = "test") {
  fs::create_directories(dir / "kernel");
  writeAll(dir / "VERSION", "9.9.9\n");
  writeAll(dir / "kernel" / (name + ".yaml"),
           "pack: " + name + "\n"
           "rules:\n"
           "  - id: " + name + ".xid\n"
           "    since: 9.9.9\n"
           "    symptom: gpu_xid\n"
           "    sub_domain: hardware\n"
           "    category: gpu\n"
           "    role: root\n"
           "    severity: critical\n"
           "    prefilter: 'NVRM: Xid'\n"
           "    pattern: '" + pattern + "'\n"
           "    summary: 'Xid {xid}'\n"
           "    meaning: m\n"
           "    action: a\n"
           "    fields: {kind: xid}\n"
           "    examples:\n"
           "      match: ['NVRM: Xid (PCI:0000:3b:00): 79, pid=1']\n");
}

}  // namespace

TEST_CASE("rule cache: a hit gives the rules and symptoms of a YAML load", "[rulecache]") {
  TempDir tmp;
  const std::string cache = (tmp.path / "cache").string();
  auto first = loadRuleDirsCached({kShipped}, cache);
  REQUIRE(first.result.errors.empty());
  CHECK(first.cache == Cache::kMiss);
  CHECK(first.note.empty());
  CHECK(fs::is_regular_file(first.path));
  auto second = loadRuleDirsCached({kShipped}, cache);
  REQUIRE(second.result.rules);
  CHECK(second.cache == Cache::kHit);
  CHECK(second.note.empty());
  REQUIRE(second.result.rules->literal_scanner);
  // The error words' database too (issue 30: the agent's template miner), read back, not compiled:
  // it finds what the process's own compile finds.
  REQUIRE(second.result.rules->error_words);
  CHECK(second.result.rules->error_words != errorWordScanner());
  CHECK(second.result.rules->error_words->literals() == errorWordScanner()->literals());
  for (std::string_view line : {"orbitald: cannot reconcile ledger: quorum failure", "RuntimeError: boom",
                                "all quiet on node 7"}) {
    std::vector<int> cached, compiled;
    REQUIRE(second.result.rules->error_words->literalsIn(line, &cached));
    REQUIRE(errorWordScanner()->literalsIn(line, &compiled));
    CHECK(cached == compiled);
  }

  auto fresh = loadRuleDirs({kShipped});
  REQUIRE(fresh.rules);
  CHECK(describe(*second.result.rules) == describe(*fresh.rules));
  CHECK(second.result.rules->version == fresh.rules->version);
  CHECK(second.result.rules->rules.size() == fresh.rules->rules.size());
  CHECK(second.result.rules->relations.size() == fresh.rules->relations.size());

  RuleEngine fresh_engine(fresh.rules), cached_engine(second.result.rules);
  // The engine takes the cache's Vectorscan databases instead of compiling.
  CHECK(cached_engine.literalScanner() == second.result.rules->literal_scanner);
  REQUIRE(fresh_engine.literalScanner());
  CHECK(cached_engine.literalScanner()->literals() == fresh_engine.literalScanner()->literals());
  const auto fresh_symptoms = sampleSymptoms(fresh_engine);
  CHECK(fresh_symptoms.size() > 100);
  CHECK(sampleSymptoms(cached_engine) == fresh_symptoms);
  // Every rule's own examples, through both engines.
  for (const auto& r : fresh.rules->rules)
    for (const auto& ex : r.match_examples) {
      SourceKind kind = r.sources.empty() ? SourceKind::kApplication : r.sources.front();
      const Rule* a = fresh_engine.match(ex, kind);
      const Rule* b = cached_engine.match(ex, kind);
      CHECK((a ? a->id : "-") == (b ? b->id : "-"));
    }
}

TEST_CASE("rule cache: a changed rule file makes it stale and it is rebuilt", "[rulecache]") {
  TempDir tmp;
  const fs::path rules = tmp.path / "rules";
  const std::string cache = (tmp.path / "cache").string();
  writeRules(rules, R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+))");
  CHECK(loadRuleDirsCached({rules.string()}, cache).cache == Cache::kMiss);
  auto hit = loadRuleDirsCached({rules.string()}, cache);
  CHECK(hit.cache == Cache::kHit);
  REQUIRE(hit.result.rules);
  CHECK(hit.result.rules->rules.at(0).pattern == R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+))");

  writeRules(rules, R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+), pid=)");
  auto stale = loadRuleDirsCached({rules.string()}, cache);
  CHECK(stale.cache == Cache::kStale);
  CHECK(stale.note.empty());
  REQUIRE(stale.result.rules);
  CHECK(stale.result.rules->rules.at(0).pattern == R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+), pid=)");
  auto again = loadRuleDirsCached({rules.string()}, cache);
  CHECK(again.cache == Cache::kHit);
  REQUIRE(again.result.rules);
  CHECK(again.result.rules->rules.at(0).pattern == R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+), pid=)");
  CHECK(again.result.rules->version == stale.result.rules->version);
  CHECK(again.result.rules->version != hit.result.rules->version);

  // A new rule file is a change too.
  writeRules(rules, R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+), pid=)", "more");
  auto added = loadRuleDirsCached({rules.string()}, cache);
  CHECK(added.cache == Cache::kStale);
  REQUIRE(added.result.rules);
  CHECK(added.result.rules->rules.size() == 2);

  // Rules with errors: the errors, no rules, and the cache is left alone.
  const std::string before = readAll(added.path);
  writeAll(rules / "kernel" / "more.yaml", "pack: [broken\n");
  auto broken = loadRuleDirsCached({rules.string()}, cache);
  CHECK(broken.result.rules == nullptr);
  CHECK_FALSE(broken.result.errors.empty());
  CHECK(readAll(added.path) == before);
}

TEST_CASE("rule cache: an unreadable cache file is reported and the YAML rules are loaded", "[rulecache]") {
  TempDir tmp;
  const fs::path rules = tmp.path / "rules";
  const std::string cache = (tmp.path / "cache").string();
  writeRules(rules, R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+))");
  auto first = loadRuleDirsCached({rules.string()}, cache);
  REQUIRE(first.result.rules);
  const std::string good = readAll(first.path);
  REQUIRE(good.size() > 64);
  const std::string expected = describe(*first.result.rules);

  std::string flipped = good;
  flipped[good.size() - 20] ^= 0x5a;
  std::string bad_length = good;
  bad_length[24] ^= 1;  // payload length field
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"truncated", good.substr(0, good.size() / 2)},
      {"truncated", good + "x"},
      {"bytes, not a rule cache", ""},
      {"not a rule cache (bad magic)", std::string(4096, '\x7f')},
      {"not a rule cache (bad magic)", "garbage garbage garbage garbage garbage garbage garbage garbage"},
      {"checksum mismatch", flipped},
      {"truncated", bad_length},
  };
  for (const auto& [why, bytes] : cases) {
    INFO(why << " (" << bytes.size() << " bytes)");
    writeAll(first.path, bytes);
    auto load = loadRuleDirsCached({rules.string()}, cache);
    CHECK(load.cache == Cache::kUnreadable);
    CHECK(load.note.find("rule cache " + first.path + " unreadable") != std::string::npos);
    CHECK(load.note.find(why) != std::string::npos);
    REQUIRE(load.result.rules);
    CHECK(describe(*load.result.rules) == expected);
    // Rewritten whole: the next start hits.
    auto next = loadRuleDirsCached({rules.string()}, cache);
    CHECK(next.cache == Cache::kHit);
    CHECK(readAll(first.path) == good);
  }

  // A directory where the file should be: reported, not written, rules loaded.
  fs::remove(first.path);
  fs::create_directories(first.path);
  auto dir = loadRuleDirsCached({rules.string()}, cache);
  CHECK(dir.cache == Cache::kUnreadable);
  CHECK(dir.note.find("unreadable") != std::string::npos);
  CHECK(dir.note.find("rule cache not written") != std::string::npos);
  REQUIRE(dir.result.rules);
  CHECK(describe(*dir.result.rules) == expected);
  fs::remove_all(first.path);

  // A cache directory that cannot be made (a file is in the way): rules loaded, the note says so.
  writeAll(tmp.path / "blocked", "x");
  auto blocked = loadRuleDirsCached({rules.string()}, (tmp.path / "blocked").string());
  CHECK(blocked.cache == Cache::kMiss);
  CHECK(blocked.note.find("rule cache not written") != std::string::npos);
  REQUIRE(blocked.result.rules);
  CHECK(describe(*blocked.result.rules) == expected);

  // No cache directory: plain loadRuleDirs.
  auto off = loadRuleDirsCached({rules.string()}, "");
  CHECK(off.cache == Cache::kOff);
  CHECK(off.path.empty());
  REQUIRE(off.result.rules);
  CHECK(describe(*off.result.rules) == expected);
}

TEST_CASE("rule cache: the payload reads back only with its own key", "[rulecache]") {
  TempDir tmp;
  const fs::path rules = tmp.path / "rules";
  writeRules(rules, R"(NVRM: Xid \(PCI:[^)]*\): (?P<xid>\d+))");
  auto read = readRuleFiles({rules.string()});
  auto loaded = loadRuleSet(read.files, read.base_version);
  REQUIRE(loaded.rules);
  const uint64_t key = ruleCacheKey(read);
  const std::string bytes = serializeRuleSet(*loaded.rules, key);
  std::string error;
  auto back = deserializeRuleSet(bytes, key, &error);
  REQUIRE(back);
  CHECK(describe(*back) == describe(*loaded.rules));
  CHECK(back->literal_scanner == nullptr);  // none given, none made up
  CHECK_FALSE(deserializeRuleSet(bytes, key + 1, &error));
  CHECK(error == "stale");
  read.files[0].content += "\n";
  CHECK(ruleCacheKey(read) != key);
}

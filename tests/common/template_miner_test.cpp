// The streaming template miner (common/template_miner.h) on the sample logs (samples/*/nodes/*/*
// and every log of samples/real/*), on generated lines for determinism, the memory bound and the
// eviction policy, and the property that lines differing only in their variables share a
// template.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "common/error_lexicon.h"
#include "common/parse/stream_parser.h"
#include "common/rule_skeleton.h"
#include "common/template_miner.h"

#include <re2/re2.h>

using namespace faultline::common;
namespace fs = std::filesystem;

namespace {

std::string tplSlurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A bundle's metadata and notes, not logs.
bool tplIsLogFile(const fs::path& p) {
  static const std::vector<std::string> kMeta{"job.json",  "expected.json", "first_run.json", "node.json",
                                              "sacct.json", "seen-before-ledger.json"};
  std::string name = p.filename().string();
  if (std::find(kMeta.begin(), kMeta.end(), name) != kMeta.end()) return false;
  return p.extension() != ".md";
}

struct TplSample {
  std::string name;
  std::vector<fs::path> files;
};

// samples/<s>/nodes/<n>/<file> for the synthetic samples, every log below samples/real/<s>/.
std::vector<TplSample> tplSamples() {
  std::vector<TplSample> out;
  fs::path root = fs::path(FAULTLINE_SOURCE_DIR) / "samples";
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_directory()) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    std::string name = d.filename().string();
    if (name == "real" || name == "real-pending") continue;
    TplSample s{name, {}};
    if (fs::is_directory(d / "nodes"))
      for (const auto& f : fs::recursive_directory_iterator(d / "nodes"))
        if (f.is_regular_file() && tplIsLogFile(f.path())) s.files.push_back(f.path());
    std::sort(s.files.begin(), s.files.end());
    if (!s.files.empty()) out.push_back(std::move(s));
  }
  std::vector<fs::path> real;
  for (const auto& e : fs::directory_iterator(root / "real"))
    if (e.is_directory()) real.push_back(e.path());
  std::sort(real.begin(), real.end());
  for (const auto& d : real) {
    TplSample s{"real/" + d.filename().string(), {}};
    for (const auto& f : fs::recursive_directory_iterator(d))
      if (f.is_regular_file() && tplIsLogFile(f.path())) s.files.push_back(f.path());
    std::sort(s.files.begin(), s.files.end());
    if (!s.files.empty()) out.push_back(std::move(s));
  }
  return out;
}

// Every record of a file, as the parsers give them (no literal filter: every record).
std::vector<std::string> tplMessages(const fs::path& file) {
  std::string data = tplSlurp(file);
  std::vector<std::string> out;
  auto parser = makeStreamParser(detectFormat(std::string_view(data).substr(0, 64 << 10)), ParseOptions{},
                                 [&](LogRecord&& r) { out.push_back(std::move(r.text)); });
  parser->feed(data);
  parser->finish();
  return out;
}

struct TplRow {
  TemplateId id;
  std::string text;
  uint64_t count;
  std::string example;
  bool operator==(const TplRow&) const = default;
};

std::vector<TplRow> tplRows(const TemplateMiner& m) {
  std::vector<TplRow> rows;
  for (TemplateId id : m.ids()) {
    const Template& t = m.get(id);
    rows.push_back({t.id, t.text, t.count, t.example});
  }
  return rows;
}

// Letters from a number: distinct numbers give distinct words, and no word holds a digit (which
// the masker would take for a variable).
std::string tplWord(uint64_t n) {
  std::string w = "w";
  do {
    w.push_back(static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n);
  return w;
}

}  // namespace

TEST_CASE("every sample line gets a template, and a sample has few", "[templates][samples]") {
  auto samples = tplSamples();
  REQUIRE(samples.size() > 200);
  uint64_t total_records = 0, total_templates = 0, total_bytes = 0;
  size_t error_templates = 0;
  std::ostringstream table;
  for (const auto& s : samples) {
    TemplateMiner miner;
    uint64_t records = 0;
    for (const auto& f : s.files) {
      total_bytes += fs::file_size(f);
      for (const auto& msg : tplMessages(f)) {
        TemplateId id = miner.add(msg);
        ++records;
        REQUIRE(id != kNoTemplate);
        REQUIRE(miner.find(id) != nullptr);
      }
    }
    CHECK(miner.records() == records);
    CHECK(miner.evictedTemplates() == 0);
    uint64_t sum = 0;
    for (TemplateId id : miner.ids()) sum += miner.get(id).count;
    CHECK(sum == records);
    // Few: a sample's templates are a small share of its lines once it has more than a handful.
    if (records >= 200) CHECK(miner.size() * 3 <= records);
    total_records += records;
    total_templates += miner.size();
    table << s.name << ": " << records << " records, " << miner.size() << " templates\n";
    if (s.name.rfind("real/", 0) != 0) {  // the synthetic samples' templates in full
      for (TemplateId id : miner.ids()) {
        const Template& t = miner.get(id);
        bool err = carriesErrorLexicon(t.text);
        error_templates += err;
        table << "  " << (err ? "E " : "  ") << t.count << "  " << t.text.substr(0, 160) << "\n";
      }
    }
  }
  WARN("templates per sample (E: carries the error lexicon)\n"
       << table.str() << "total: " << total_records << " records, " << total_templates << " templates in "
       << samples.size() << " samples, " << total_bytes << " bytes of logs ("
       << static_cast<double>(total_templates) / (static_cast<double>(total_bytes) / (1 << 20))
       << " templates per MiB, each sample mined on its own)");
  CHECK(total_templates * 4 <= total_records);
}

TEST_CASE("the shortcut joins a number-only variant without masking, and keeps a lone zero apart", "[templates][shortcut]") {
  TemplateMiner miner;
  TemplateId a = miner.add("task 3 exited with exit code 1 after 12ms at 0x7f3a");
  CHECK(miner.shortcutHits() == 0);
  CHECK(miner.add("task 7 exited with exit code 2 after 45ms at 0x9c1b") == a);
  CHECK(miner.shortcutHits() == 1);
  // Another length: the full path, the same template.
  CHECK(miner.add("task 12 exited with exit code 2 after 45ms at 0x9c1b") == a);
  CHECK(miner.shortcutHits() == 1);
  // "exit code 0" is another message: the masker keeps its zero, and so does the shortcut.
  TemplateId z = miner.add("task 7 exited with exit code 0 after 45ms at 0x9c1b");
  CHECK(z != a);
  CHECK(miner.get(z).text == "task <NUM> exited with exit code 0 after <NUM> at <HEX>");
  CHECK(miner.add("task 8 exited with exit code 0 after 46ms at 0x9c1c") == z);
  CHECK(miner.add("task 8 exited with exit code 5 after 46ms at 0x9c1c") == a);
  CHECK(miner.get(a).count == 4);
  CHECK(miner.get(z).count == 2);
}

TEST_CASE("the shortcut changes few templates on the samples", "[templates][shortcut][samples]") {
  TemplateMinerOptions off;
  off.shortcut = false;
  uint64_t with = 0, without = 0;
  for (const auto& s : tplSamples()) {
    TemplateMiner a, b(off);
    for (const auto& f : s.files)
      for (const auto& m : tplMessages(f)) {
        a.add(m);
        b.add(m);
      }
    with += a.size();
    without += b.size();
  }
  WARN("templates on the samples: " << with << " with the shortcut, " << without << " without");
  CHECK(with <= without);
  CHECK(with * 100 >= without * 95);
}

TEST_CASE("the same lines in the same order give the same templates and ids", "[templates][determinism]") {
  std::vector<std::string> lines;
  for (const auto& s : tplSamples())
    for (const auto& f : s.files)
      for (auto& m : tplMessages(f)) lines.push_back(std::move(m));
  REQUIRE(lines.size() > 10000);
  TemplateMinerOptions small;
  small.max_templates = 300;  // with evictions too
  TemplateMinerOptions full;
  full.shortcut = false;
  for (const auto& opts : {TemplateMinerOptions{}, small, full}) {
    TemplateMiner a(opts), b(opts);
    std::vector<TemplateId> ids_a, ids_b;
    for (const auto& l : lines) ids_a.push_back(a.add(l));
    for (const auto& l : lines) ids_b.push_back(b.add(l));
    CHECK(ids_a == ids_b);
    CHECK(tplRows(a) == tplRows(b));
    CHECK(a.evictedTemplates() == b.evictedTemplates());
    CHECK(a.memoryBytes() == b.memoryBytes());
  }
}

TEST_CASE("lines differing only in a number, address, path or id share a template", "[templates][property]") {
  // Each shape's holes take random values of their class; every variant must land in the first
  // variant's template, whose text keeps the placeholders.
  struct Shape {
    std::string text;      // {} marks the hole
    std::string expected;  // the template
    std::function<std::string(std::mt19937_64&)> value;
  };
  auto num = [](std::mt19937_64& r) { return std::to_string(r() % 100000); };
  auto ip = [](std::mt19937_64& r) {
    return std::to_string(r() % 256) + "." + std::to_string(r() % 256) + "." + std::to_string(r() % 256) + "." +
           std::to_string(r() % 256) + ":" + std::to_string(1024 + r() % 60000);
  };
  auto path = [](std::mt19937_64& r) { return "/scratch/run" + std::to_string(r() % 1000) + "/ckpt/step_" + std::to_string(r() % 9999); };
  auto hex = [](std::mt19937_64& r) {
    std::ostringstream o;
    o << "0x" << std::hex << (r() | 1);
    return o.str();
  };
  auto host = [](std::mt19937_64& r) {
    char b[16];
    std::snprintf(b, sizeof(b), "gpu-h%03u", static_cast<unsigned>(r() % 1000));
    return std::string(b);
  };
  std::vector<Shape> shapes{
      {"NCCL WARN NET/IB : Got completion from peer {} with error 12, opcode 0, len 0, vendor err 129", "", ip},
      {"Xid (PCI:0000:3b:00): 79, pid={}, name=python, GPU has fallen off the bus.", "", num},
      {"torch.save failed: cannot write {}: No space left on device", "", path},
      {"CUDA error at address {} in kernel launch", "", hex},
      {"slurmstepd: error: *** STEP 4242.0 ON {} CANCELLED AT 2024-06-01T10:00:00 DUE TO TIME LIMIT ***", "", host},
  };
  std::mt19937_64 rng(30);
  TemplateMiner miner;
  for (const auto& sh : shapes) {
    size_t at = sh.text.find("{}");
    auto line = [&] { return sh.text.substr(0, at) + sh.value(rng) + sh.text.substr(at + 2); };
    std::string first = line();
    TemplateId id = miner.add(first);
    for (int i = 0; i < 200; ++i) {
      std::string l = line();
      INFO(l);
      REQUIRE(miner.add(l) == id);
    }
    CHECK(miner.get(id).text == maskMessage(first));
    CHECK(miner.get(id).text.find("<*>") == std::string::npos);
    CHECK(miner.get(id).count == 201);
    CHECK(miner.get(id).example == first);
  }
  CHECK(miner.size() == shapes.size());
}

TEST_CASE("a word that differs becomes <*> when enough of the line agrees", "[templates][similarity]") {
  TemplateMiner miner;
  TemplateId a = miner.add("Started Session of user alice on seat zero");
  // Below the threshold (3 of 8 equal): a new template at the same leaf.
  TemplateId c = miner.add("Started Session of many other words than that");
  CHECK(c != a);
  TemplateId b = miner.add("Started Session of user bob on seat zero");
  CHECK(a == b);
  CHECK(miner.get(a).text == "Started Session of user <*> on seat zero");
  CHECK(miner.size() == 2);
  // Different lengths never share.
  CHECK(miner.add("Started Session of user carol") != a);
  // Stricter similarity keeps them apart.
  TemplateMinerOptions strict;
  strict.similarity = 1.0;
  TemplateMiner exact(strict);
  CHECK(exact.add("Started Session of user alice") != exact.add("Started Session of user bob"));
}

TEST_CASE("the bound on templates holds with 100k distinct lines, and counts stay honest", "[templates][memory]") {
  TemplateMinerOptions o;
  o.max_templates = 500;
  TemplateMiner miner(o);
  size_t bytes_at_10k = 0;
  for (uint64_t i = 0; i < 100000; ++i) {
    std::string line = tplWord(i) + " " + tplWord(i * 7 + 3) + " " + tplWord(i * 13 + 5) + " " + tplWord(i * 31 + 1);
    TemplateId id = miner.add(line);
    REQUIRE(miner.find(id) != nullptr);
    REQUIRE(miner.size() <= 500);
    if (i == 9999) bytes_at_10k = miner.memoryBytes();
  }
  CHECK(miner.size() == 500);
  CHECK(miner.records() == 100000);
  CHECK(miner.evictedTemplates() == 100000 - 500);
  uint64_t live = 0;
  for (TemplateId id : miner.ids()) live += miner.get(id).count;
  CHECK(live + miner.evictedRecords() == miner.records());
  // The ids are the last 500 created: all singletons, evicted oldest first.
  CHECK(miner.ids().front() == 100000 - 500 + 1);
  // Memory does not grow with the lines once the bound is reached.
  CHECK(miner.memoryBytes() <= bytes_at_10k * 5 / 4);
  WARN("memory with 500 templates after 10k lines: " << bytes_at_10k << " B, after 100k: " << miner.memoryBytes()
                                                     << " B");
}

TEST_CASE("eviction takes the least recently seen singleton first, then the least recently seen", "[templates][memory]") {
  TemplateMinerOptions o;
  o.max_templates = 3;
  TemplateMiner miner(o);
  TemplateId a = miner.add("alpha one two three");
  miner.add("alpha one two three");                     // a: count 2
  TemplateId b = miner.add("bravo four five six");      // singleton
  TemplateId c = miner.add("charlie seven eight nine"); // singleton
  miner.add("bravo four five six");                     // b: count 2; c is the only singleton
  TemplateId d = miner.add("delta ten eleven twelve");  // evicts c
  CHECK(miner.find(c) == nullptr);
  CHECK(miner.find(a) != nullptr);
  CHECK(miner.find(b) != nullptr);
  CHECK(miner.find(d) != nullptr);
  miner.add("delta ten eleven twelve");                 // no singletons left
  TemplateId e = miner.add("echo thirteen fourteen fifteen");  // evicts a: least recently seen
  CHECK(miner.find(a) == nullptr);
  CHECK(miner.find(e) != nullptr);
  CHECK(miner.evictedTemplates() == 2);
  CHECK(miner.evictedRecords() == 3);  // c's one and a's two
  // An evicted template's lines start a new one with a new id.
  TemplateId c2 = miner.add("charlie seven eight nine");
  CHECK(c2 != c);
  CHECK(c2 > e);
}

TEST_CASE("long messages are cut to max_tokens and empty ones have the empty template", "[templates]") {
  TemplateMinerOptions o;
  o.max_tokens = 8;
  TemplateMiner miner(o);
  std::string long_a = "Traceback (most recent call last): one two three four five six seven";
  std::string long_b = "Traceback (most recent call last): one two three four eight nine ten eleven";
  TemplateId a = miner.add(long_a);
  CHECK(miner.add(long_b) == a);
  CHECK(miner.get(a).text == "Traceback (most recent call last): one two <...>");
  TemplateId e = miner.add("");
  CHECK(miner.add("   \t ") == e);
  CHECK(miner.get(e).text.empty());
}

// `rules suggest` (common/rule_skeleton.h): a skeleton's pattern matches the lines it was made
// from, also a version-like number ("pmixp_client_v2.c" masks to <NUM>) and a message longer than
// the miner's 512-byte example but shorter than its 64 tokens (the example is cut mid-template).
TEST_CASE("a rule skeleton's pattern matches its own examples", "[templates][skeleton]") {
  TemplateMiner miner;
  const std::string pmix =
      "error:  mpi/pmix_v5: _errhandler: holy8a27110 [0]: pmixp_client_v2.c:226: Error handler invoked: "
      "status = -61, source = [slurm.pmix.12570656.0:20]";
  std::string longer = "./train.sh: line 34: 12024 Aborted (core dumped) python3 -m t5x.train";
  for (int i = 0; i < 30; ++i) longer += " --gin.option_" + std::to_string(i) + "=\"'value_number_" + std::to_string(i) + "'\"";
  REQUIRE(longer.size() > 600);
  for (const std::string& line : {pmix, longer}) {
    const Template& t = miner.get(miner.add(line));
    RuleSkeletonInput in;
    in.template_text = t.text;
    in.examples = {t.example};
    in.source = "bundle";
    const std::string yaml = ruleSkeletonsYaml({in}, {});
    const size_t at = yaml.find("    pattern: '");
    REQUIRE(at != std::string::npos);
    std::string pattern;
    for (size_t i = at + 14; i < yaml.size() && !(yaml[i] == '\'' && (i + 1 == yaml.size() || yaml[i + 1] != '\'')); ++i) {
      pattern += yaml[i];
      if (yaml[i] == '\'') ++i;  // '' is one quote in YAML
    }
    INFO(t.text << "\n" << pattern << "\nvs " << t.example);
    RE2 re(pattern);
    REQUIRE(re.ok());
    CHECK(RE2::PartialMatch(t.example, re));
    CHECK(RE2::PartialMatch(line, re));
    // The prefilter literal comes from the same kept tokens: the cut example holds it.
    const size_t pre = yaml.find("    prefilter: '");
    REQUIRE(pre != std::string::npos);
    const std::string literal = yaml.substr(pre + 16, yaml.find('\'', pre + 16) - (pre + 16));
    CHECK(t.example.find(literal) != std::string::npos);
  }
}

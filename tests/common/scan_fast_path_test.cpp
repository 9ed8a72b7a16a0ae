// The search-the-buffer-first path (ParseOptions::literals: the rules' literals searched over the
// raw bytes, only records holding one handed on) against the straightforward path that lives
// only here: every record parsed, handed on and run through the rule engine. On every sample file
// (samples/ and samples/real/), on the bench's mixed log (bench/gen_mixed_log.py, generated at
// test time) and on inputs built to hit the edges (a literal split between two feeds, ANSI colour
// codes inside a literal, kmsg escapes, a multi-line record whose hit is on a continuation line),
// both give the same symptoms, the same coverage counters and the same boot-time evidence. The
// fast side also uses a rule set without compiled regexes, as the agent does.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"

using namespace faultline::common;
namespace fs = std::filesystem;

namespace {

std::shared_ptr<const RuleSet> shippedRules() {
  static auto rules = [] {
    auto r = loadRuleDirs({std::string(FAULTLINE_SOURCE_DIR) + "/rules"});
    REQUIRE(r.errors.empty());
    return r.rules;
  }();
  return rules;
}

const RuleEngine& engine() {
  static RuleEngine e(shippedRules());
  return e;
}

// The agent's kind of rule set: patterns only, no compiled regexes (the engine compiles a rule,
// and a shared literal's pattern set, when a record first holds its literal).
const RuleEngine& leanEngine() {
  static RuleEngine e([] {
    auto lean = std::make_shared<RuleSet>(*shippedRules());
    for (auto& r : lean->rules) r.regex.reset();
    return std::shared_ptr<const RuleSet>(lean);
  }());
  return e;
}

std::string readAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string render(const Symptom& s) {
  std::ostringstream o;
  o << s.rule_id << " node=" << s.node << " dev=" << s.device << " t=" << s.first_ns << "/" << s.time_known
    << " boot=" << s.boot_id << " role=" << static_cast<int>(s.role) << " sum=" << s.summary;
  for (const auto& [k, v] : s.fields) o << " " << k << "=" << v;
  for (const auto& e : s.evidence) o << " ev=" << e;
  return o.str();
}

struct Outcome {
  std::vector<std::string> symptoms;
  ParseReport report;
  std::optional<int64_t> boot_estimate;  // what the offline scan takes from the first record with both clocks
  size_t with_ids = 0;  // records handed on with the literal ids of their line (the engine skips its own search)
};

// chunk 0: the whole input in one feed; otherwise feeds of 1..chunk bytes (deterministic).
Outcome run(LogFormat format, std::string_view data, bool fast, size_t chunk) {
  Outcome out;
  ParseOptions o;
  // The fast side searches with its engine's own literal database, as the agent does, so the
  // records' literal ids are in the engine's numbering and it takes them instead of searching.
  if (fast) {
    o.literals = leanEngine().literalScanner();
    REQUIRE(o.literals);
  }
  MatchContext ctx;
  ctx.node = "n1";
  ctx.source = "f";
  ctx.kind = sourceKindOf(format);
  // The fast side runs the lean engine: compiling on demand must not change a symptom either.
  const RuleEngine& eng = fast ? leanEngine() : engine();
  auto p = makeStreamParser(format, o, [&](LogRecord&& rec) {
    if (rec.time_known && rec.monotonic_ns >= 0 && !out.boot_estimate) out.boot_estimate = rec.time_ns - rec.monotonic_ns;
    out.with_ids += rec.literals_of != 0;
    if (auto s = eng.extract(rec, ctx)) out.symptoms.push_back(render(*s));
  });
  if (chunk == 0) {
    p->feed(data);
  } else {
    uint64_t x = 88172645463325252ull;
    for (size_t pos = 0; pos < data.size();) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      const size_t n = std::min(data.size() - pos, 1 + static_cast<size_t>(x % chunk));
      p->feed(data.substr(pos, n));
      pos += n;
    }
  }
  p->finish();
  out.report = p->report();
  return out;
}

void compare(LogFormat format, std::string_view data, const std::string& what, size_t chunk = 0) {
  INFO(what << " (" << formatName(format) << ", chunk " << chunk << ")");
  const Outcome full = run(format, data, false, 0);
  const Outcome fast = run(format, data, true, chunk);
  CHECK(fast.symptoms == full.symptoms);
  CHECK(fast.boot_estimate == full.boot_estimate);
  for (auto counter : {&ParseReport::lines, &ParseReport::records, &ParseReport::skipped, &ParseReport::malformed,
                       &ParseReport::binary, &ParseReport::oversized, &ParseReport::local_stamps})
    CHECK(fast.report.*counter == full.report.*counter);
  CHECK(fast.report.notes == full.report.notes);
  CHECK(full.report.delivered == full.report.records);
  CHECK(fast.report.delivered <= fast.report.records);
}

bool isBinaryJournal(const std::string& head) { return head.size() >= 8 && head.compare(0, 8, "LPKSHHRH") == 0; }

}  // namespace

TEST_CASE("fast path = full parse on every sample file", "[fastpath]") {
  size_t files = 0, symptoms = 0;
  for (const char* root : {"samples", "samples/real"}) {
    const fs::path dir = fs::path(FAULTLINE_SOURCE_DIR) / root;
    for (auto it = fs::recursive_directory_iterator(dir); it != fs::recursive_directory_iterator(); ++it) {
      if (!it->is_regular_file()) continue;
      const auto name = it->path().filename().string();
      if (name == "README.md" || it->path().extension() == ".json") continue;
      if (std::string(root) == "samples" && it->path().string().find("/samples/real/") != std::string::npos) continue;
      const std::string data = readAll(it->path());
      if (isBinaryJournal(data)) continue;  // read with sd-journal, not a byte stream
      const LogFormat format = detectFormat(std::string_view(data).substr(0, 64 << 10));
      compare(format, data, it->path().string());
      compare(format, data, it->path().string(), 7);
      ++files;
      symptoms += run(format, data, false, 0).symptoms.size();
    }
  }
  CHECK(files > 50);
  CHECK(symptoms > 100);  // the samples do match rules: the comparison is not of empty lists
}

TEST_CASE("fast path = full parse on the bench's mixed log", "[fastpath]") {
  const fs::path dir = fs::temp_directory_path() / ("faultline-fastpath-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path log = dir / "mixed.log";
  const std::string cmd = "python3 " + std::string(FAULTLINE_SOURCE_DIR) + "/bench/gen_mixed_log.py " +
                          log.string() + " 12000000 > /dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  const std::string data = readAll(log);
  fs::remove_all(dir);
  REQUIRE(data.size() == 12000000);
  const LogFormat format = detectFormat(std::string_view(data).substr(0, 64 << 10));
  CHECK(format == LogFormat::kJournalShortIso);
  compare(format, data, "mixed log");
  compare(format, data, "mixed log", 4096);
  const Outcome fast = run(format, data, true, 0);
  CHECK(fast.symptoms.size() > 1000);
  // One-line journal records: nearly all carry their line's literal ids to the engine.
  CHECK(fast.with_ids * 10 > fast.report.delivered * 9);
  // Most records hold no literal: they are parsed and counted, never handed on.
  CHECK(fast.report.delivered * 3 < fast.report.records);
}

TEST_CASE("fast path edges: split literals, colour codes, escapes, hits on continuation lines", "[fastpath]") {
  struct Case {
    LogFormat format;
    std::string text;
    const char* what;
  };
  const std::vector<Case> cases = {
      {LogFormat::kDmesgRaw,
       "[  100.000000] usb 1-1: new device\n"
       "[  101.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n"
       "[  102.000000] something else\n",
       "dmesg, literal in the middle"},
      {LogFormat::kDmesgRaw,
       "[  101.000000] NVRM: X\x1b[31mid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\x1b[0m\n",
       "colour codes inside the literal"},
      {LogFormat::kKmsg,
       "6,100,101000000,-;NVRM: X\\x69d (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n",
       "kmsg escape inside the literal"},
      {LogFormat::kJournalShortIso,
       "2024-06-01T10:00:01+00:00 gpu-a01 python[12]: Traceback (most recent call last):\n"
       "                                             File \"train.py\", line 3, in <module>\n"
       "                                             torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
       "2024-06-01T10:00:02+00:00 gpu-a01 systemd[1]: Started Session 3 of User alice.\n",
       "journal multi-line record, hit on a continuation line"},
      {LogFormat::kApplication,
       "[rank3]: Traceback (most recent call last):\n"
       "[rank1]: iteration 10 loss 1.0\n"
       "[rank3]:   File \"train.py\", line 3, in <module>\n"
       "[rank1]: iteration 11 loss 1.0\n"
       "[rank3]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
       "[rank1]: iteration 12 loss 1.0\n",
       "interleaved rank traceback"},
      {LogFormat::kJournalShortIso,
       "2024-06-01T10:00:01+00:00 gpu-a01 kernel: [ 5.000000] usb 1-1: new device\n"
       "2024-06-01T10:00:09+00:00 gpu-a01 kernel: [ 13.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n",
       "boot-time evidence from a record without a hit"},
      {LogFormat::kSyslog,
       "Jun  1 10:00:01 gpu-a01 kernel: usb 1-1: new device\n"
       "Jun  1 10:00:01 gpu-a01 kernel:  NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
       "Jun  1 10:00:02 gpu-a01 systemd[1]: Started Session 3 of User alice.\n",
       "syslog kernel continuation (same host and ident) holding the hit, its first line none"},
  };
  for (const auto& c : cases) {
    const Outcome full = run(c.format, c.text, false, 0);
    INFO(c.what);
    CHECK(!full.symptoms.empty());
    compare(c.format, c.text, c.what);
    for (size_t chunk : {1, 2, 3, 5, 11}) compare(c.format, c.text, c.what, chunk);
    // Rewritten bytes (colour codes, escapes) and multi-line records: the engine searches itself.
    const Outcome fast = run(c.format, c.text, true, 0);
    if (c.text.find('\x1b') != std::string::npos || c.text.find('\\') != std::string::npos)
      CHECK(fast.with_ids == 0);
  }
}

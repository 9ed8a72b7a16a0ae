// template_bench: the template miner's cost per record next to the rule engine's, and the
// templates per MB it finds, on the bench logs (bench/extract.sh generates them).
//
// Per file, in process, each pass the best (least CPU) of --repeat runs:
//   engine  offline::scanFile: what `faultline scan -q FILE` does (format detection, the rules'
//           literals searched over the raw bytes, every line parsed, the records holding a
//           literal matched, symptoms aggregated);
//   parse   the same file's parser handing on every record (no literal filter) to a sink that
//           only counts: what a pass that sees every record pays before any miner;
//   mine    TemplateMiner::add on every record's text: the parse pass collects the texts in
//           batches of 4096 and only the add() calls over each batch are timed (two clock
//           reads a batch), so the miner's own CPU is measured, not a difference of two passes.
// Printed as ratios to the engine's CPU (the same records, so per-record ratios): noisy machines
// move absolute times, not much the ratios. Also the templates per MiB, the templates evicted
// (the default bound of 4096), the miner's memory and the share of records that took its
// shortcut.
//
//   cmake --build build -j2 --target template_bench
//   build/bench/template_bench bench/out/mixed-journal-300000000.log
//   build/bench/template_bench --no-shortcut ...   (every message masked and routed)
//   (bash bench/extract.sh runs it on its three logs when it is built)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

#include "aggregator/offline/bundle.h"
#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "common/template_miner.h"
#include "common/unrecognized.h"

namespace {

using faultline::common::LogRecord;

double cpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Reads the file in 256 KiB chunks (as scanFile does) into a parser whose sink is `sink`.
template <typename Sink>
uint64_t parseAll(const std::string& path, Sink&& sink) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  std::string head(64 << 10, '\0');
  ssize_t got = ::pread(fd, head.data(), head.size(), 0);
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  uint64_t records = 0;
  auto parser = faultline::common::makeStreamParser(faultline::common::detectFormat(head),
                                                    faultline::common::ParseOptions{}, [&](LogRecord&& r) {
                                                      ++records;
                                                      sink(std::move(r));
                                                    });
  std::vector<char> buf(256 << 10);
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    parser->feed(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  parser->finish();
  ::close(fd);
  return records;
}

}  // namespace

int main(int argc, char** argv) {
  std::string rules_dir = std::string(FAULTLINE_SOURCE_DIR) + "/rules";
  int repeat = 2;
  faultline::common::TemplateMinerOptions miner_options;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rules" && i + 1 < argc) rules_dir = argv[++i];
    else if (a == "--repeat" && i + 1 < argc) repeat = std::max(1, std::atoi(argv[++i]));
    else if (a == "--no-shortcut") miner_options.shortcut = false;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: template_bench [--rules DIR] [--repeat N] [--no-shortcut] FILE...\n");
      return 0;
    } else files.push_back(a);
  }
  if (files.empty()) {
    std::fprintf(stderr, "template_bench: no files (usage: template_bench [--rules DIR] [--repeat N] FILE...)\n");
    return 2;
  }
  auto loaded = faultline::common::loadRuleDirs({rules_dir});
  if (!loaded.errors.empty()) {
    for (const auto& e : loaded.errors) std::fprintf(stderr, "%s\n", e.c_str());
    return 1;
  }
  faultline::common::RuleEngine engine(loaded.rules);

  std::printf("%-28s %10s %8s %10s %9s %9s %11s %9s %12s %12s %12s %9s\n", "file", "records", "MiB", "templates",
              "tpl/MiB", "evicted", "miner KiB", "shortcut", "miner/engine", "parse/engine", "wired/engine", "unmatched");
  for (const auto& f : files) {
    double engine_cpu = 1e300, parse_cpu = 1e300, mine_cpu = 1e300, wired_cpu = 1e300;
    uint64_t unmatched_lines = 0;
    uint64_t records = 0, bytes = 0;
    size_t templates = 0, memory = 0;
    uint64_t evicted = 0, hits = 0;
    for (int r = 0; r < repeat; ++r) {
      double t0 = cpuSeconds();
      auto scan = faultline::offline::scanFile(f, "", engine, nullptr, true);
      engine_cpu = std::min(engine_cpu, cpuSeconds() - t0);
      records = scan.coverage.records;

      // The path `faultline attribute` takes: the error words searched too, the records holding
      // one that no rule matched mined (common/unrecognized.h).
      faultline::common::UnmatchedLines unmatched;
      t0 = cpuSeconds();
      faultline::offline::scanFile(f, "", engine, nullptr, true, &unmatched);
      wired_cpu = std::min(wired_cpu, cpuSeconds() - t0);
      unmatched_lines = unmatched.lines();

      t0 = cpuSeconds();
      uint64_t sink_bytes = 0;
      parseAll(f, [&](LogRecord&& rec) { sink_bytes += rec.text.size(); });
      parse_cpu = std::min(parse_cpu, cpuSeconds() - t0);

      faultline::common::TemplateMiner miner(miner_options);
      std::vector<std::string> batch;
      batch.reserve(4096);
      double mined = 0;
      auto mineBatch = [&] {
        double b0 = cpuSeconds();
        for (const auto& text : batch) miner.add(text);
        mined += cpuSeconds() - b0;
        batch.clear();
      };
      parseAll(f, [&](LogRecord&& rec) {
        batch.push_back(std::move(rec.text));
        if (batch.size() == 4096) mineBatch();
      });
      mineBatch();
      mine_cpu = std::min(mine_cpu, mined);
      templates = miner.size();
      evicted = miner.evictedTemplates();
      hits = miner.shortcutHits();
      memory = miner.memoryBytes();
    }
    int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
      bytes = static_cast<uint64_t>(::lseek(fd, 0, SEEK_END));
      ::close(fd);
    }
    double mib = static_cast<double>(bytes) / (1 << 20);
    std::string name = f.substr(f.rfind('/') + 1);
    std::printf("%-28s %10llu %8.1f %10zu %9.2f %9llu %11.0f %8.1f%% %12.3f %12.3f %12.3f %9llu\n", name.c_str(),
                static_cast<unsigned long long>(records), mib, templates, static_cast<double>(templates) / mib,
                static_cast<unsigned long long>(evicted), static_cast<double>(memory) / 1024,
                100.0 * static_cast<double>(hits) / static_cast<double>(std::max<uint64_t>(records, 1)),
                mine_cpu / engine_cpu, parse_cpu / engine_cpu, wired_cpu / engine_cpu,
                static_cast<unsigned long long>(unmatched_lines));
  }
  std::printf("\nminer/engine = CPU of TemplateMiner::add on every record / CPU of `faultline scan -q` (in process), same\n"
              "records: the miner's cost per record as a share of the engine's. parse/engine = a parse handing on every\n"
              "record (no literal filter) / engine: what a pass that sees every record pays before any miner.\n"
              "shortcut: records that joined a template by their signature (TemplateMiner::shortcutHits).\n"
              "wired/engine = the engine's pass as `faultline attribute` runs it (error words searched next to the\n"
              "rules' literals, the records holding one that no rule matched mined: common/unrecognized.h) / engine;\n"
              "wired/engine - 1 is what the template layer adds per record (issue 30's budget: <= 0.25).\n"
              "unmatched: lines that reached the miner on that path.\n"
              "Best of %d runs each; templates under the default bound (4096), evicted: templates dropped for it.\n",
              repeat);
  return 0;
}

// libFuzzer target for the log parsers (common/parse). Built once per format with
// -DFUZZ_FORMAT=kDmesgRaw, kKmsg, ... (fuzz_parse_<format>), and once without it (fuzz_detect):
// then detectFormat picks the parser, as loadBundle and `faultline scan` do.
//
// Properties, on any bytes:
//   - no crash, hang, leak or sanitizer report;
//   - the same records and counts whether the stream comes in one piece or in small chunks
//     (the agent's sources feed whatever read() returned);
//   - the counting contract of ParseReport (line_parser.h): every emitted record counted, every
//     line either part of a record or skipped, each skip counted in at most one reason;
//   - the search-first path (ParseOptions::literals, what the agent and offline scans run), fed
//     in other chunks, counts the same and hands on every record a rule extracts a symptom from;
//   - what the real rules extract from those records, aggregated as the agent does, makes a batch
//     the aggregator's decoder accepts (a refused batch would lose its good symptoms too).
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/log_record.h"
#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"
#include "common/symptom_aggregator.h"
#include "common/wire.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

using namespace faultline::common;
using faultline::fuzz::fail;

struct Parsed {
  std::vector<LogRecord> records;
  ParseReport report;
};

Parsed parse(LogFormat format, std::string_view in, size_t chunk, const ParseOptions& options) {
  Parsed out;
  auto parser = makeStreamParser(format, options, [&](LogRecord&& r) { out.records.push_back(std::move(r)); });
  if (chunk == 0) {
    parser->feed(in);
  } else {
    for (size_t i = 0; i < in.size(); i += chunk) parser->feed(in.substr(i, chunk));
  }
  parser->finish();
  out.report = parser->report();
  return out;
}

bool sameRecord(const LogRecord& a, const LogRecord& b) {
  return a.time_ns == b.time_ns && a.time_known == b.time_known && a.monotonic_ns == b.monotonic_ns &&
         a.boot_id == b.boot_id && a.host == b.host && a.ident == b.ident && a.rank == b.rank &&
         a.priority == b.priority && a.text == b.text && a.line == b.line;
}

void checkReport(const Parsed& p) {
  const auto& r = p.report;
  if (r.records != p.records.size())
    fail("report.records %llu but %zu records emitted", (unsigned long long)r.records, p.records.size());
  if (r.malformed + r.binary + r.oversized > r.skipped)
    fail("skip reasons (%llu malformed, %llu binary, %llu oversized) exceed skipped %llu",
         (unsigned long long)r.malformed, (unsigned long long)r.binary, (unsigned long long)r.oversized,
         (unsigned long long)r.skipped);
  if (r.records + r.skipped > r.lines)
    fail("%llu records + %llu skipped > %llu lines", (unsigned long long)r.records, (unsigned long long)r.skipped,
         (unsigned long long)r.lines);
}

// Built once, before the first input (LLVMFuzzerInitialize), so no input pays for loading the rules.
const RuleEngine* engine_ = nullptr;
std::shared_ptr<const HostSet> hosts_;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static const RuleEngine engine(faultline::fuzz::realRules());
  engine_ = &engine;
  hosts_ = std::make_shared<const HostSet>(HostSet{"gpu-a01", "gpu-a02", "node1"});
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const RuleEngine& engine = *engine_;
  const std::string_view in = faultline::fuzz::bytes(data, size);
  const uint64_t h = faultline::fuzz::hashOf(in);

#ifdef FUZZ_FORMAT
  const LogFormat format = LogFormat::FUZZ_FORMAT;
#else
  const LogFormat format = detectFormat(in.substr(0, 64 << 10));
#endif
  ParseOptions options;
  if (h & 1) options.boot_time_ns = int64_t{1717236000} * 1'000'000'000;  // 2024-06-01
  options.boot_id = "0b5e0d6a-1111-4222-8333-444455556666";
  options.default_year = 2024;
  options.utc_offset_sec = (h & 2) ? 7200 : -18000;
  options.known_hosts = hosts_;
  // Small bounds, so over-long lines and records are reached by small inputs.
  options.max_line_bytes = 4096;
  options.max_record_bytes = 2048;
  options.max_record_lines = 16;

  Parsed whole = parse(format, in, 0, options);
  checkReport(whole);
  Parsed chunked = parse(format, in, 1 + (h >> 8) % 61, options);
  const auto& a = whole.report;
  const auto& b = chunked.report;
  if (a.lines != b.lines || a.records != b.records || a.skipped != b.skipped || a.malformed != b.malformed ||
      a.binary != b.binary || a.oversized != b.oversized || a.truncated != b.truncated)
    fail("chunked feed counts differ: lines %llu/%llu records %llu/%llu skipped %llu/%llu",
         (unsigned long long)a.lines, (unsigned long long)b.lines, (unsigned long long)a.records,
         (unsigned long long)b.records, (unsigned long long)a.skipped, (unsigned long long)b.skipped);
  for (size_t i = 0; i < whole.records.size(); ++i)
    if (!sameRecord(whole.records[i], chunked.records[i]))
      fail("record %zu differs when fed in chunks: '%s' vs '%s'", i, whole.records[i].text.c_str(),
           chunked.records[i].text.c_str());

  // The agent's path from here: rules, aggregation, a batch on the wire.
  MatchContext ctx;
  ctx.node = "gpu-a01";
  ctx.source = "fuzz";
  ctx.kind = sourceKindOf(format);
  ctx.node_of_rank = [](int rank) { return rank % 2 ? std::string("gpu-a02") : std::string("gpu-a01"); };
  SymptomAggregator aggregator;
  std::vector<std::pair<uint64_t, std::string>> found;  // (line, rule) of every extracted symptom
  for (const auto& record : whole.records)
    if (auto s = engine.extract(record, ctx)) {
      found.emplace_back(record.line, s->rule_id);
      aggregator.add(std::move(*s));
    }
  if (auto scanner = engine.literalScanner()) {
    ParseOptions fast_options = options;
    fast_options.literals = scanner;
    Parsed fast = parse(format, in, 1 + (h >> 16) % 97, fast_options);
    const auto& f = fast.report;
    if (f.lines != a.lines || f.records != a.records || f.skipped != a.skipped || f.delivered != fast.records.size())
      fail("search-first path counts differ: lines %llu/%llu records %llu/%llu skipped %llu/%llu delivered %llu/%zu",
           (unsigned long long)f.lines, (unsigned long long)a.lines, (unsigned long long)f.records,
           (unsigned long long)a.records, (unsigned long long)f.skipped, (unsigned long long)a.skipped,
           (unsigned long long)f.delivered, fast.records.size());
    std::vector<std::pair<uint64_t, std::string>> fast_found;
    for (const auto& record : fast.records)
      if (auto s = engine.extract(record, ctx)) fast_found.emplace_back(record.line, s->rule_id);
    if (fast_found != found) {
      size_t i = 0;
      while (i < found.size() && i < fast_found.size() && found[i] == fast_found[i]) ++i;
      const auto at = [](const std::vector<std::pair<uint64_t, std::string>>& v, size_t k) {
        return k < v.size() ? "line " + std::to_string(v[k].first) + " " + v[k].second : std::string("nothing");
      };
      fail("search-first path finds %zu symptoms, the full parse %zu; the first difference: %s against %s",
           fast_found.size(), found.size(), at(fast_found, i).c_str(), at(found, i).c_str());
    }
  }
  SymptomBatchData batch;
  batch.header = {"agent-fuzz", "gpu-a01", options.boot_id, 1, "fuzz", engine.rules().version, 1717236000000000000};
  batch.symptoms = aggregator.drainAll();
  if (batch.symptoms.empty()) return 0;
  std::string wire = encodeBatch(batch);
  std::string reason;
  auto decoded = decodeBatch(wire.data(), wire.size(), &reason);
  if (!decoded) fail("the aggregator refuses the batch of this input's symptoms: %s", reason.c_str());
  if (decoded->symptoms.size() != batch.symptoms.size()) fail("symptoms lost on the wire");
  return 0;
}

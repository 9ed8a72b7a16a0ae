#include "bench/cascade_sample.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "common/parse/stream_parser.h"
#include "common/symptom_aggregator.h"

namespace faultline::bench {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<std::string> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void replaceAll(std::string& s, const std::string& from, const std::string& to) {
  if (from.empty() || from == to) return;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
}

struct NodeFacts {
  std::optional<int64_t> boot_time_ns;
  common::NodeInventory inventory;
};

NodeFacts parseNodeJson(const std::string& text) {
  NodeFacts f;
  auto j = json::parse(text, nullptr, false);
  if (!j.is_object()) return f;
  if (j.contains("boot_time") && j["boot_time"].is_string())
    f.boot_time_ns = common::parseTimestampNs(j["boot_time"].get<std::string>());
  if (j.contains("gpus") && j["gpus"].is_array())
    for (const auto& g : j["gpus"]) {
      common::GpuInfo gi;
      gi.index = g.value("index", 0u);
      gi.pci_bus_id = common::normalizePciId(g.value("pci_bus_id", std::string()));
      gi.uuid = g.value("uuid", std::string());
      gi.serial = g.value("serial", std::string());
      f.inventory.gpus.push_back(std::move(gi));
    }
  if (j.contains("hcas") && j["hcas"].is_array())
    for (const auto& h : j["hcas"]) {
      common::HcaPortInfo hi;
      hi.name = h.value("name", std::string());
      hi.pci_address = h.value("pci", std::string());
      hi.port = h.value("port", 1u);
      hi.state = "ACTIVE";
      hi.link_layer = "InfiniBand";
      f.inventory.hcas.push_back(std::move(hi));
    }
  return f;
}

// Parses one log file with the format it is detected as and feeds each symptom to `agg`.
void scanLog(const fs::path& path, const common::ParseOptions& popts, const common::RuleEngine& engine,
             common::MatchContext ctx, common::SymptomAggregator& agg) {
  auto text = slurp(path);
  if (!text) return;
  auto format = common::detectFormat(std::string_view(*text).substr(0, 64 << 10));
  ctx.source = path.string();
  ctx.kind = common::sourceKindOf(format);
  auto parser = common::makeStreamParser(format, popts, [&](common::LogRecord&& rec) {
    if (auto s = engine.extract(rec, ctx)) agg.add(std::move(*s));
  });
  parser->feed(*text);
  parser->finish();
}

}  // namespace

std::optional<CascadeSample> loadCascadeSample(const std::string& dir, const common::RuleEngine& engine,
                                               std::string* error) {
  CascadeSample out;
  fs::path root(dir);
  auto job_text = slurp(root / "job.json");
  if (!job_text) {
    *error = dir + ": no job.json";
    return std::nullopt;
  }
  auto job = common::parseJobJson(*job_text, error);
  if (!job) return std::nullopt;
  out.job = std::move(*job);
  if (auto exp = slurp(root / "expected.json")) {
    auto j = json::parse(*exp, nullptr, false);
    if (j.is_object()) {
      if (j.contains("responsible_nodes") && j["responsible_nodes"].is_array() && !j["responsible_nodes"].empty())
        out.expected_node = j["responsible_nodes"][0].get<std::string>();
      out.expected_rule = j.value("cause_rule", std::string());
      out.expected_sub_domain = j.value("sub_domain", std::string());
    }
  }
  int default_year = 1970;
  if (out.job.start_ns) default_year = std::stoi(common::formatTimeNs(out.job.start_ns).substr(0, 4));

  common::SymptomAggregator agg;
  std::error_code ec;
  std::vector<fs::path> node_dirs;
  for (const auto& e : fs::directory_iterator(root / "nodes", ec))
    if (e.is_directory()) node_dirs.push_back(e.path());
  std::sort(node_dirs.begin(), node_dirs.end());
  for (const auto& nd : node_dirs) {
    std::string host = nd.filename().string();
    NodeFacts facts;
    if (auto t = slurp(nd / "node.json")) facts = parseNodeJson(*t);
    out.inventory[host] = facts.inventory;
    std::vector<fs::path> files;
    for (const auto& f : fs::directory_iterator(nd, ec))
      if (f.is_regular_file() && f.path().filename() != "node.json") files.push_back(f.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      common::ParseOptions popts;
      popts.boot_time_ns = facts.boot_time_ns;
      popts.default_year = default_year;
      scanLog(f, popts, engine, {host, "", common::SourceKind::kApplication, {}}, agg);
    }
  }
  // The job's rank output: each line goes to the node running its rank, as an agent on that node
  // following the job's output file would see it.
  const std::set<std::string> kSkip = {"job.json", "sacct.json", "expected.json", "README.md"};
  std::vector<fs::path> top;
  for (const auto& f : fs::directory_iterator(root, ec))
    if (f.is_regular_file() && !kSkip.count(f.path().filename().string())) top.push_back(f.path());
  std::sort(top.begin(), top.end());
  for (const auto& f : top) {
    common::ParseOptions popts;
    popts.default_year = default_year;
    const common::JobInfo& j = out.job;
    scanLog(f, popts, engine, {"", "", common::SourceKind::kApplication, [&j](int r) { return j.nodeOfRank(r); }},
            agg);
  }
  for (auto& s : agg.drainAll()) {
    if (s.node.empty()) continue;  // no node to ship it from
    out.by_node[s.node].push_back(std::move(s));
  }
  for (auto& [host, list] : out.by_node)
    std::stable_sort(list.begin(), list.end(), [](const auto& a, const auto& b) { return a.first_ns < b.first_ns; });
  if (out.by_node.empty()) {
    *error = dir + ": no symptom on any node";
    return std::nullopt;
  }
  return out;
}

common::Symptom moveSymptom(const common::Symptom& s, const std::string& sample_host, const std::string& host,
                            int64_t shift_ns) {
  common::Symptom m = s;
  m.node = host;
  for (auto& e : m.evidence) replaceAll(e, sample_host, host);
  replaceAll(m.summary, sample_host, host);
  for (auto& [k, v] : m.fields) replaceAll(v, sample_host, host);
  if (m.time_known) {
    m.first_ns += shift_ns;
    m.last_ns += shift_ns;
  }
  return m;
}

std::optional<CascadeSample> loadCascadeSampleWithRules(const std::string& dir, const std::string& rules_dir,
                                                        std::shared_ptr<const common::RuleSet>* rules,
                                                        std::string* error) {
  auto loaded = common::loadRuleDirs({rules_dir});
  if (!loaded.rules) {
    error->clear();
    for (const auto& e : loaded.errors) *error += (error->empty() ? "" : "\n") + e;
    return std::nullopt;
  }
  *rules = loaded.rules;
  common::RuleEngine engine(loaded.rules);
  return loadCascadeSample(dir, engine, error);
}

}  // namespace faultline::bench

#include "aggregator/offline/attribute.h"

#include <map>

#include "common/rule_skeleton.h"
#include "common/wire.h"

namespace faultline::offline {

std::optional<std::vector<common::UnrecognizedLine>> failureIndicatingLines(
    const Bundle& bundle, const common::RuleEngine& engine, const std::vector<std::string>& baselines,
    std::string* error, common::UnusualContext* context_out) {
  common::UnusualContext ctx;
  ctx.covered = bundle.covered_by_kind;
  ctx.start_ns = bundle.job.start_ns;
  ctx.end_ns = bundle.job.end_ns;
  ctx.last_line_ns = bundle.last_record_ns;
  for (const auto& dir : baselines) {
    std::string why;
    auto good = loadBundle(dir, engine, &why);
    if (!good) {
      *error = "baseline " + why;
      return std::nullopt;
    }
    ctx.has_baseline = true;
    for (const auto& t : good->unmatched) ctx.baseline.push_back(t.text);
  }
  auto lines = common::findFailureIndicating(bundle.unmatched, ctx);
  if (context_out) *context_out = std::move(ctx);
  return lines;
}

std::optional<common::Diagnosis> attributeBundle(const std::string& dir, const common::RuleEngine& engine,
                                                 std::string* error, const common::CorrelatorOptions& options,
                                                 const EvidenceSource& more,
                                                 const std::vector<std::string>& baselines) {
  auto bundle = loadBundle(dir, engine, error);
  if (!bundle) return std::nullopt;
  if (more) more(bundle->job, &bundle->symptoms, &bundle->coverage);
  common::UnusualContext unusual;
  auto unrecognized = failureIndicatingLines(*bundle, engine, baselines, error, &unusual);
  if (!unrecognized) return std::nullopt;
  // Symptoms cross the same Cap'n Proto encoding the agents use, so offline and online verdicts
  // see identical data.
  std::map<std::string, common::SymptomBatchData> batches;
  for (auto& s : bundle->symptoms) {
    auto& b = batches[s.node];
    b.header.hostname = s.node;
    b.header.ruleset_version = engine.rules().version;
    b.header.agent_version = FAULTLINE_VERSION;
    b.symptoms.push_back(std::move(s));
  }
  std::vector<common::Symptom> symptoms;
  uint64_t seq = 0;
  for (auto& [node, batch] : batches) {
    batch.header.sequence = ++seq;
    std::string bytes = common::encodeBatch(batch);
    std::string reason;
    auto decoded = common::decodeBatch(bytes.data(), bytes.size(), &reason);
    if (!decoded) {
      *error = "internal: batch for node '" + node + "' failed to round-trip: " + reason;
      return std::nullopt;
    }
    for (auto& s : decoded->symptoms) symptoms.push_back(std::move(s));
  }
  common::CorrelatorOptions with_facts = options;
  for (const auto& [node, info] : bundle->nodes) {
    if (info.nvswitch) with_facts.node_facts[node].nvswitch = info.nvswitch;
    if (!info.addresses.empty()) with_facts.node_facts[node].addresses = info.addresses;
    if (info.gpu_count) with_facts.node_facts[node].gpu_count = info.gpu_count;
  }
  // A node's logs were read when a file of its folder gave records.
  with_facts.covered_nodes.emplace();
  for (const auto& c : bundle->coverage)
    if (!c.node.empty() && c.records > 0 && (c.status == "ok" || c.status == "partial"))
      with_facts.covered_nodes->insert(c.node);
  auto d = common::correlate(bundle->job, std::move(symptoms), &engine.rules(), with_facts);
  d.coverage = std::move(bundle->coverage);
  common::attachUnrecognized(&d, std::move(*unrecognized), bundle->job.nodes, unusual);
  return d;
}

std::optional<std::string> suggestRules(const std::vector<std::string>& bundles,
                                        const std::vector<std::string>& baselines,
                                        const common::RuleEngine& engine, std::string* error) {
  std::vector<common::RuleSkeletonInput> skeletons;
  for (const auto& dir : bundles) {
    auto bundle = loadBundle(dir, engine, error);
    if (!bundle) return std::nullopt;
    auto lines = failureIndicatingLines(*bundle, engine, baselines, error);
    if (!lines) return std::nullopt;
    for (const auto& u : *lines) {
      common::RuleSkeletonInput r;
      r.template_text = u.template_text;
      r.nodes = u.nodes;
      r.count = u.count;
      r.why = u.why;
      r.source = dir;
      r.examples = {u.first_line};
      for (const auto& t : bundle->unmatched) {
        if (t.text != u.template_text) continue;
        r.examples = t.examples;
        for (auto k : t.kinds) r.sources += (r.sources.empty() ? "" : ", ") + std::string(common::sourceKindName(k));
        break;
      }
      skeletons.push_back(std::move(r));
    }
  }
  std::vector<std::string> header = {
      "faultline rules suggest: the error lines no rule matched, as rule skeletons (docs/rules.md).",
      "A starting point, not a rule: decide every TODO (docs/taxonomy.md for sub_domain and role),",
      "tighten the pattern, add no_match lines, then add the rule to a pack under rules/ yourself.",
  };
  for (const auto& b : bundles) header.push_back("bundle: " + b);
  for (const auto& b : baselines) header.push_back("baseline (lines it printed are left out): " + b);
  if (skeletons.empty()) header.push_back("no failure-indicating line was left unmatched");
  return common::ruleSkeletonsYaml(skeletons, header);
}

}  // namespace faultline::offline

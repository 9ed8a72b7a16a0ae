#include "aggregator/ingest/batch_check.h"

namespace faultline::aggregator {

namespace {

bool hasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

}  // namespace

std::optional<std::string> checkBatchFields(const common::SymptomBatchData& batch) {
  const auto& h = batch.header;
  for (const auto* s : {&h.agent_id, &h.hostname, &h.boot_id, &h.agent_version, &h.ruleset_version})
    if (hasNul(*s)) return "NUL in text";
  for (const auto& sym : batch.symptoms) {
    for (const auto* s : {&sym.rule_id, &sym.symptom, &sym.category, &sym.node, &sym.device, &sym.source,
                          &sym.summary, &sym.boot_id})
      if (hasNul(*s)) return "NUL in text";
    for (const auto& e : sym.evidence)
      if (hasNul(e)) return "NUL in text";
    for (const auto& [k, v] : sym.fields)
      if (hasNul(k) || hasNul(v)) return "NUL in text";
  }
  for (const auto& c : batch.sources)
    for (const auto* s : {&c.node, &c.source, &c.format, &c.status, &c.reason})
      if (hasNul(*s)) return "NUL in text";
  return std::nullopt;
}

}  // namespace faultline::aggregator

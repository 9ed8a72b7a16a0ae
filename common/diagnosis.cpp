#include "common/diagnosis.h"

#include <fmt/format.h>

#include "common/job.h"

namespace faultline::common {

using nlohmann::json;

namespace {

json timeJson(int64_t ns, bool known) { return known ? json(formatTimeNs(ns)) : json(nullptr); }

json causeJson(const Cause& c) {
  return json{{"rule_id", c.rule_id},   {"symptom", c.symptom}, {"category", c.category},
              {"summary", c.summary},   {"node", c.node},       {"device", c.device},
              {"time", timeJson(c.time_ns, c.time_known)},      {"evidence", c.evidence},
              {"sub_domain", subDomainName(c.sub_domain)},      {"action", c.action},
              {"fields", c.fields}};
}

Cause causeFrom(const json& j) {
  Cause c;
  c.rule_id = j.value("rule_id", "");
  c.symptom = j.value("symptom", "");
  c.category = j.value("category", "");
  c.summary = j.value("summary", "");
  c.node = j.value("node", "");
  c.device = j.value("device", "");
  if (j.contains("time") && j["time"].is_string()) {
    if (auto t = parseTimestampNs(j["time"].get<std::string>())) {
      c.time_ns = *t;
      c.time_known = true;
    }
  }
  c.evidence = j.value("evidence", "");
  c.sub_domain = parseSubDomain(j.value("sub_domain", "none")).value_or(SubDomain::kNone);
  c.action = j.value("action", "");
  if (j.contains("fields") && j["fields"].is_object())
    for (const auto& [k, v] : j["fields"].items())
      if (v.is_string()) c.fields[k] = v.get<std::string>();
  return c;
}

json unrecognizedJson(const UnrecognizedLine& u) {
  return json{{"template", u.template_text}, {"count", u.count},          {"nodes", u.nodes},
              {"first_line", u.first_line},  {"first_node", u.first_node},
              {"first_time", timeJson(u.first_ns, u.time_known)},        {"why", u.why}};
}

UnrecognizedLine unrecognizedFrom(const json& j) {
  UnrecognizedLine u;
  u.template_text = j.value("template", "");
  u.count = j.value("count", uint64_t{0});
  u.nodes = j.value("nodes", std::vector<std::string>{});
  u.first_line = j.value("first_line", "");
  u.first_node = j.value("first_node", "");
  if (j.contains("first_time") && j["first_time"].is_string())
    if (auto t = parseTimestampNs(j["first_time"].get<std::string>())) {
      u.first_ns = *t;
      u.time_known = true;
    }
  u.why = j.value("why", std::vector<std::string>{});
  return u;
}

}  // namespace

json toJson(const CoverageEntry& c) {
  json j = {{"node", c.node},       {"source", c.source}, {"format", c.format}, {"records", c.records},
            {"skipped", c.skipped}, {"status", c.status}, {"reason", c.reason}};
  if (!c.clock.empty()) j["clock"] = c.clock;
  return j;
}

CoverageEntry coverageFromJson(const json& j) {
  CoverageEntry c;
  c.node = j.value("node", "");
  c.source = j.value("source", "");
  c.format = j.value("format", "");
  c.records = j.value("records", uint64_t{0});
  c.skipped = j.value("skipped", uint64_t{0});
  c.status = j.value("status", c.status);
  c.reason = j.value("reason", "");
  c.clock = j.value("clock", "");
  return c;
}

std::string_view confidenceBand(double confidence) {
  if (confidence >= 0.8) return "strong";
  if (confidence >= 0.5) return "likely";
  return "lead";
}

std::string_view nodeAdvice(double confidence, SubDomain verdict) {
  const bool nodes_own = verdict == SubDomain::kHardware || verdict == SubDomain::kSystemSoftware ||
                         verdict == SubDomain::kNetwork;
  if (!nodes_own && verdict != SubDomain::kInfrastructure) return "none";
  if (confidence >= 0.8 && nodes_own) return "drain";
  if (confidence >= 0.5) return "inspect";
  return "none";
}

json toJson(const Diagnosis& d) {
  json j;
  j["schema_version"] = d.schema_version;
  j["job_id"] = d.job_id;
  j["terminal_state"] = d.terminal_state;
  j["sub_domain"] = subDomainName(d.sub_domain);
  j["systemic"] = d.systemic;
  j["responsible_nodes"] = json::array();
  for (const auto& r : d.responsible)
    j["responsible_nodes"].push_back({{"node", r.node},
                                      {"device", r.device},
                                      {"confidence", r.confidence},
                                      {"confidence_band", confidenceBand(r.confidence)},
                                      {"advice", nodeAdvice(r.confidence, d.sub_domain)}});
  j["cause"] = d.cause ? causeJson(*d.cause) : json(nullptr);
  j["confidence"] = d.confidence;
  j["confidence_band"] = d.confidence > 0 ? json(confidenceBand(d.confidence)) : json(nullptr);
  j["recommended_action"] = d.recommended_action;
  j["candidates"] = json::array();
  for (const auto& c : d.candidates) j["candidates"].push_back(causeJson(c));
  j["chain"] = json::array();
  for (const auto& e : d.chain) {
    j["chain"].push_back({{"time", timeJson(e.time_ns, e.time_known)},
                          {"node", e.node},
                          {"device", e.device},
                          {"symptom", e.symptom},
                          {"rule_id", e.rule_id},
                          {"role", roleName(e.role)},
                          {"sub_domain", subDomainName(e.sub_domain)},
                          {"count", e.count},
                          {"nodes", e.nodes},
                          {"first", timeJson(e.first_ns, e.time_known)},
                          {"last", timeJson(e.last_ns, e.time_known)},
                          {"summary", e.summary},
                          {"evidence", e.evidence},
                          {"because", e.because}});
  }
  j["coverage"] = json::array();
  for (const auto& c : d.coverage) j["coverage"].push_back(toJson(c));
  j["ruleset_version"] = d.ruleset_version;
  j["explanation"] = d.explanation;
  j["unrecognized"] = json::array();
  for (const auto& u : d.unrecognized) j["unrecognized"].push_back(unrecognizedJson(u));
  j["divergent_node"] = d.divergent_node ? json{{"node", d.divergent_node->node},
                                                {"confidence", d.divergent_node->confidence},
                                                {"confidence_band", confidenceBand(d.divergent_node->confidence)},
                                                {"why", d.divergent_node->why}}
                                         : json(nullptr);
  return j;
}

std::optional<Diagnosis> diagnosisFromJson(const json& j, std::string* error) {
  try {
    Diagnosis d;
    d.schema_version = j.at("schema_version").get<int>();
    d.job_id = j.value("job_id", "");
    d.terminal_state = j.at("terminal_state").get<std::string>();
    auto sd = parseSubDomain(j.at("sub_domain").get<std::string>());
    if (!sd) {
      *error = "bad sub_domain";
      return std::nullopt;
    }
    d.sub_domain = *sd;
    d.systemic = j.value("systemic", false);
    for (const auto& r : j.at("responsible_nodes"))
      d.responsible.push_back({r.value("node", ""), r.value("device", ""), r.value("confidence", 0.0)});
    if (j.contains("cause") && j["cause"].is_object()) d.cause = causeFrom(j["cause"]);
    d.confidence = j.value("confidence", 0.0);
    d.recommended_action = j.value("recommended_action", "");
    if (j.contains("candidates"))
      for (const auto& c : j["candidates"]) d.candidates.push_back(causeFrom(c));
    if (j.contains("chain"))
      for (const auto& e : j["chain"]) {
        ChainEntry c;
        if (e.contains("first") && e["first"].is_string()) {
          c.time_known = true;
          c.first_ns = c.time_ns = parseTimestampNs(e["first"].get<std::string>()).value_or(0);
          c.last_ns = parseTimestampNs(e.value("last", "")).value_or(c.first_ns);
        }
        c.node = e.value("node", "");
        c.device = e.value("device", "");
        c.symptom = e.value("symptom", "");
        c.rule_id = e.value("rule_id", "");
        c.role = parseRole(e.value("role", "root")).value_or(Role::kRoot);
        c.sub_domain = parseSubDomain(e.value("sub_domain", "none")).value_or(SubDomain::kNone);
        c.count = e.value("count", 0ull);
        c.nodes = e.value("nodes", std::vector<std::string>{});
        c.summary = e.value("summary", "");
        c.evidence = e.value("evidence", "");
        c.because = e.value("because", "");
        d.chain.push_back(std::move(c));
      }
    if (j.contains("coverage"))
      for (const auto& c : j["coverage"]) d.coverage.push_back(coverageFromJson(c));
    d.ruleset_version = j.value("ruleset_version", "");
    d.explanation = j.value("explanation", "");
    // Documents written before issue 30 have neither key.
    if (j.contains("unrecognized") && j["unrecognized"].is_array())
      for (const auto& u : j["unrecognized"])
        if (u.is_object()) d.unrecognized.push_back(unrecognizedFrom(u));
    if (j.contains("divergent_node") && j["divergent_node"].is_object()) {
      const auto& v = j["divergent_node"];
      d.divergent_node = DivergentNode{v.value("node", ""), v.value("confidence", 0.0), v.value("why", "")};
    }
    return d;
  } catch (const json::exception& e) {
    *error = e.what();
    return std::nullopt;
  }
}

std::string renderReport(const Diagnosis& d) {
  std::string out;
  auto add = [&](const std::string& s) { out += s; out += '\n'; };
  add(fmt::format("job {}: {} / {}{}", d.job_id.empty() ? "?" : d.job_id, d.terminal_state,
                  subDomainName(d.sub_domain), d.systemic ? " (systemic)" : ""));
  if (!d.responsible.empty()) {
    std::string nodes;
    for (const auto& r : d.responsible)
      nodes += fmt::format("{}{}{} ({:.0f}%, {})", nodes.empty() ? "" : ", ", r.node,
                           r.device.empty() ? "" : " " + r.device, r.confidence * 100, confidenceBand(r.confidence));
    add("responsible: " + nodes);
    std::string drain, inspect;
    for (const auto& r : d.responsible) {
      auto advice = nodeAdvice(r.confidence, d.sub_domain);
      std::string& to = advice == "drain" ? drain : inspect;
      if (advice != "none") to += (to.empty() ? "" : ",") + r.node;
    }
    if (!drain.empty()) add("advice:      drain " + drain);
    if (!inspect.empty()) add("advice:      inspect " + inspect + " before acting (the evidence is likely, not strong)");
  }
  if (d.confidence > 0) add(fmt::format("confidence:  {} ({:.0f}%)", confidenceBand(d.confidence), d.confidence * 100));
  if (d.cause) {
    const auto& c = *d.cause;
    add(fmt::format("cause:       {} [{}]", c.summary.empty() ? c.symptom : c.summary, c.rule_id));
    add(fmt::format("             at {} on {}", c.time_known ? formatTimeNs(c.time_ns) : "unknown time",
                    c.node.empty() ? "?" : c.node));
    auto f = [&](const char* k) {
      auto it = c.fields.find(k);
      return it == c.fields.end() ? std::string() : it->second;
    };
    if (!f("gpu_index").empty())
      add(fmt::format("gpu:         index {}{}{}", f("gpu_index"), f("gpu_uuid").empty() ? "" : " " + f("gpu_uuid"),
                      f("local_ranks").empty() ? "" : ", local ranks " + f("local_ranks")));
    add(fmt::format("evidence:    {}", c.evidence.substr(0, c.evidence.find('\n'))));
  }
  for (const auto& c : d.candidates)
    add(fmt::format("candidate:   {} on {} [{}] ({})", c.summary.empty() ? c.symptom : c.summary, c.node,
                    c.rule_id, subDomainName(c.sub_domain)));
  if (!d.recommended_action.empty()) add("action:      " + d.recommended_action);
  if (!d.explanation.empty()) add("why:         " + d.explanation);
  if (d.divergent_node)
    add(fmt::format("lead:        {} ({:.0f}%, {}): {}", d.divergent_node->node, d.divergent_node->confidence * 100,
                    confidenceBand(d.divergent_node->confidence), d.divergent_node->why));
  if (!d.chain.empty()) {
    add("");
    add("chain:");
    for (const auto& e : d.chain) {
      std::string where = e.node;
      if (e.nodes.size() > 1) where = fmt::format("{} (+{} nodes)", e.node, e.nodes.size() - 1);
      add(fmt::format("  {:24} {:9} {:28} x{:<5} {:22} {}", e.time_known ? formatTimeNs(e.time_ns) : "-",
                      roleName(e.role), e.symptom, e.count, where, e.rule_id));
      if (!e.because.empty()) add(fmt::format("  {:24} {}", "", e.because));
    }
  }
  if (!d.unrecognized.empty()) {
    add("");
    add("unrecognized (error lines no rule matched, most unusual first):");
    for (const auto& u : d.unrecognized) {
      std::string where = u.nodes.empty() ? "(job)" : u.nodes.front();
      if (u.nodes.size() > 1) where += fmt::format(" (+{} nodes)", u.nodes.size() - 1);
      add(fmt::format("  {:24} x{:<5} {:22} {}", u.time_known ? formatTimeNs(u.first_ns) : "-", u.count, where,
                      u.first_line.substr(0, u.first_line.find('\n'))));
      std::string why;
      for (const auto& w : u.why) why += (why.empty() ? "" : "; ") + w;
      add(fmt::format("  {:24} {}", "", why));
    }
  }
  if (!d.coverage.empty()) {
    add("");
    add("coverage:");
    for (const auto& c : d.coverage)
      add(fmt::format("  {:14} {:40} {:18} {:>8} rec {:>6} skipped  {}{}{}", c.node.empty() ? "(job)" : c.node,
                      c.source, c.format, c.records, c.skipped, c.status,
                      c.reason.empty() ? "" : ": " + c.reason,
                      c.clock.empty() ? "" : "; local time read as " + c.clock));
  }
  if (!d.ruleset_version.empty()) add("ruleset " + d.ruleset_version);
  return out;
}

}  // namespace faultline::common

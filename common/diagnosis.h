// The verdict for one job, as produced by the correlator and printed by `faultline attribute`.
// Plain values; JSON rendering follows docs/output-schema.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/symptom.h"

namespace faultline::common {

inline constexpr int kDiagnosisSchemaVersion = 1;

struct ResponsibleNode {
  std::string node;
  std::string device;
  double confidence = 0;
};

struct Cause {
  std::string rule_id;
  std::string symptom;
  std::string category;
  std::string summary;
  std::string node;
  std::string device;
  int64_t time_ns = 0;
  bool time_known = false;
  std::string evidence;
  SubDomain sub_domain = SubDomain::kNone;
  std::string action;
  // Named captures and inventory facts of the cause's symptom (xid, pci, gpu_index, gpu_uuid,
  // local_ranks, rank, status ...).
  std::map<std::string, std::string> fields;
};

struct ChainEntry {
  int64_t time_ns = 0;
  bool time_known = false;
  std::string node;
  std::string device;
  std::string symptom;
  std::string rule_id;
  Role role = Role::kRoot;
  SubDomain sub_domain = SubDomain::kNone;
  uint64_t count = 0;
  std::vector<std::string> nodes;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  std::string evidence;
  std::string summary;
  // Which piece of reasoning gave the entry its role: "[causality: ID]" for a relation of
  // rules/causality, "[phase: NAME]" for the correlator's own steps, "[rule: ID]" when the
  // extraction rule's role stood (docs/output-schema.md).
  std::string because;
};

struct CoverageEntry {
  std::string node;
  std::string source;
  std::string format;
  uint64_t records = 0;
  uint64_t skipped = 0;
  std::string status = "ok";  // ok | partial | error | missing
  std::string reason;
  // How the file's local wall-clock stamps (no zone written) were placed on UTC, e.g.
  // "Europe/Berlin (node.json timezone)"; empty when the file had none.
  std::string clock = {};
};

// What a confidence means to an operator (docs/taxonomy.md, calibration table): "strong" (>= 0.8:
// act on it, drain when the domain is the node's), "likely" (0.5-0.8: inspect before acting),
// "lead" (< 0.5: a place to look, not a verdict).
std::string_view confidenceBand(double confidence);

// What an operator should do with a responsible node, keyed on the band and on whose fault the
// verdict says it is: "drain" (strong, and the fault is the node's own: hardware,
// system_software or network), "inspect" (likely, or an infrastructure service failing on the
// node), "none" (a lead, or the job's own fault: application).
std::string_view nodeAdvice(double confidence, SubDomain verdict);

// A failure-indicating line no rule matched (issue 30; common/unrecognized.h decides which): a
// log template whose text carries the error lexicon and that is unusual for this job.
struct UnrecognizedLine {
  std::string template_text;        // the masked template ("<NUM>", "<*>" where lines differ)
  uint64_t count = 0;               // lines of this template in the job's logs
  std::vector<std::string> nodes;   // nodes that printed it, sorted ("" never: job-wide lines
                                    // whose node is unknown are left out)
  std::string first_line;           // the first line of the template as read
  std::string first_node;           // ... and its node ("" when unknown)
  int64_t first_ns = 0;             // the earliest timed line of the template
  bool time_known = false;
  // Why it is unusual, most telling first: "spatial: ...", "cross-job: ...", "temporal: ...".
  std::vector<std::string> why;
};

// Issue 30 part 3: the node whose logs hold failure-indicating lines the job's other nodes (all
// with logs of the same kind) did not print. Only when the rules decided nothing; always a
// lead (confidence < 0.5), never in `responsible`, never changing the sub_domain.
struct DivergentNode {
  std::string node;
  double confidence = 0;
  std::string why;
};

struct Diagnosis {
  int schema_version = kDiagnosisSchemaVersion;
  std::string job_id;
  std::string terminal_state;
  SubDomain sub_domain = SubDomain::kNone;
  bool systemic = false;
  std::vector<ResponsibleNode> responsible;
  std::optional<Cause> cause;
  // How sure the verdict is of its cause (and node, when it names one); 0 when it claims no cause
  // (success, none, unattributed).
  double confidence = 0;
  std::string recommended_action;
  std::vector<Cause> candidates;
  std::vector<ChainEntry> chain;
  std::vector<CoverageEntry> coverage;
  std::string ruleset_version;
  std::string explanation;  // one or two sentences: why this verdict
  // Failure-indicating lines no rule matched, most unusual first (bounded); empty from the live
  // aggregator until agents ship templates.
  std::vector<UnrecognizedLine> unrecognized;
  std::optional<DivergentNode> divergent_node;
};

nlohmann::json toJson(const Diagnosis& d);
nlohmann::json toJson(const CoverageEntry& c);
// Missing keys take CoverageEntry's defaults (status "ok").
CoverageEntry coverageFromJson(const nlohmann::json& j);
std::optional<Diagnosis> diagnosisFromJson(const nlohmann::json& j, std::string* error);
// Human report: verdict first, then the chain, then coverage.
std::string renderReport(const Diagnosis& d);

}  // namespace faultline::common

// Rules as data: the loaded, validated, compiled form of rules/**/*.yaml.
//
// loadRuleSet() is pure: it takes file names and contents (read them with readRuleFiles) and
// returns either a RuleSet or every problem found as "file:line: why". An immutable RuleSet is
// shared (shared_ptr<const RuleSet>) by every RuleEngine that uses it; a reload builds a new one.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/causality.h"
#include "common/log_record.h"
#include "common/metric_rule.h"
#include "common/symptom.h"

namespace re2 {
class RE2;
}

namespace faultline::common {

class LiteralScanner;

struct Rule {
  std::string id;
  std::string since;
  bool deprecated = false;
  std::string pack;
  std::string file;
  int line = 0;  // 1-based line of the rule in its file
  std::string symptom;
  SubDomain sub_domain = SubDomain::kNone;
  std::string category;
  Role role = Role::kRoot;
  Severity severity = Severity::kError;
  int priority = 0;
  bool fallback_root = false;
  // Records this soon after boot (by their own uptime stamp) are start-up noise for this rule
  // (a port reporting "Link down" before its link trains): context, not a fault. 0: off.
  int64_t boot_settle_ns = 0;
  // How long after the condition began its emitter prints it (a detector that reports after a
  // timeout: hung task, soft lockup, NFS "not responding"): the symptom's onset is its stamp
  // minus this, or minus the seconds in the capture `detection_delay_field` when the line has
  // it. The correlator orders roots by onset. 0 / "": printed as it happens.
  int64_t detection_delay_ns = 0;
  std::string detection_delay_field;
  std::vector<std::string> prefilters;  // any of these literals must occur
  std::string pattern;                  // after {{DEFINE}} expansion
  std::vector<SourceKind> sources;      // empty: every source
  std::string device_template;
  std::string node_template;
  std::string summary_template;
  std::string meaning;
  std::string action;
  std::map<std::string, std::string> fields;  // constants added to every symptom
  std::map<std::string, std::string> nvidia;  // facts from NVIDIA's catalog (Xid/SXid rules)
  std::vector<std::string> match_examples;
  std::vector<std::string> no_match_examples;
  std::shared_ptr<const re2::RE2> regex;

  bool appliesTo(SourceKind kind) const;
};

struct RuleSet {
  std::vector<Rule> rules;  // in load order (sorted file path, then position in file)
  // The causal knowledge of rules/causality (files whose top-level key is `relations`), in load
  // order: the correlator applies them in this order.
  std::vector<Relation> relations;
  // Metric rules (files whose top-level key is `metric_rules`, common/metric_rule.h).
  std::vector<MetricRule> metric_rules;
  std::string version;      // "<rules/VERSION>+<hash of contents>"
  // The compiled search over the rules' prefilter literals, when the loader already has it (the
  // rule cache: common/rule_cache.h). A RuleEngine uses it when it was built from exactly the
  // literals the engine derives from `rules` (RuleEngine::literalsOf), else compiles its own.
  std::shared_ptr<const LiteralScanner> literal_scanner;
  // The error lexicon's words compiled (common/error_lexicon.h errorWordScanner()), when the
  // loader already has them (the rule cache keeps them, so the agent's start compiles nothing:
  // a Vectorscan compile maps ~4 MB of the library's compiler into the process). Null: compile.
  std::shared_ptr<const LiteralScanner> error_words;
  const Rule* find(const std::string& id) const;
};

struct RuleFile {
  std::string path;     // as reported in errors
  std::string content;
};

struct RuleLoadResult {
  std::shared_ptr<const RuleSet> rules;  // null when errors is non-empty
  std::vector<std::string> errors;       // "file:line: why"
};

// Parses, validates and compiles rule packs. `base_version` is the content of rules/VERSION.
// Checks: YAML syntax, required keys, unknown keys, enum values, duplicate ids (across files),
// undefined {{DEFINE}}s, patterns RE2 rejects, templates naming captures that do not exist.
// Examples are NOT run here (see checkRuleExamples), so startup stays cheap.
RuleLoadResult loadRuleSet(const std::vector<RuleFile>& files, const std::string& base_version);

// Runs every rule's examples through a RuleEngine over the whole set: each `match` example must
// be won by its own rule, each `no_match` example must not be matched by it; and every causality
// relation's examples through the correlator's phases. Returns problems as
// "file:line: rule ID: why" / "file:line: relation ID: why".
std::vector<std::string> checkRuleExamples(const std::shared_ptr<const RuleSet>& rules);

// The boundaries of docs/taxonomy.md that a rule's own fields show (a container-runtime rule
// outside system_software, a version mismatch outside system_software, an NVLink rule outside
// network ...), and relations whose effect does not fit their rules' domain: problems as
// "file:line: rule ID: why". `faultline rules check` reports them with the examples' problems.
std::vector<std::string> checkTaxonomy(const RuleSet& rules);

// Reads rules/VERSION and every *.yaml/*.yml below the given directories (sorted by path).
// I/O failures are reported in `errors` as "path: why".
struct RuleFilesRead {
  std::vector<RuleFile> files;
  std::string base_version = "0.0.0";
  std::vector<std::string> errors;
};
RuleFilesRead readRuleFiles(const std::vector<std::string>& dirs);

// readRuleFiles + loadRuleSet.
RuleLoadResult loadRuleDirs(const std::vector<std::string>& dirs);

}  // namespace faultline::common

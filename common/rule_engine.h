// Matches log records against a RuleSet and turns a match into a Symptom.
//
// Pure and deterministic: the same rules and records give the same symptoms. A RuleEngine is
// immutable after construction and may be shared by threads (const methods only). At most one
// symptom per record: of the rules whose prefilter literal occurs and whose pattern matches, the
// highest `priority` wins, ties go to the rule loaded first.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/log_record.h"
#include "common/parse/literal_scan.h"
#include "common/rule_engine_capture.h"
#include "common/rule_set.h"
#include "common/symptom.h"


namespace faultline::common {

// Where a record came from; used to fill the symptom's node and source.
struct MatchContext {
  std::string node;    // the node whose logs these are ("" for job-wide logs)
  std::string source;  // file path or source name
  SourceKind kind = SourceKind::kApplication;
  // Maps a global rank to a node for job-wide logs; may be empty.
  std::function<std::string(int rank)> node_of_rank;
};

class RuleEngine {
 public:
  explicit RuleEngine(std::shared_ptr<const RuleSet> rules);
  ~RuleEngine();
  RuleEngine(const RuleEngine&) = delete;
  RuleEngine& operator=(const RuleEngine&) = delete;

  // The winning rule for this text, or nullptr. `captures` receives the named captures.
  const Rule* match(std::string_view text, SourceKind kind,
                    std::map<std::string, std::string>* captures = nullptr) const;

  // match() when the literals that occur in `text` are already known (ids as literalScanner()
  // numbers them; ids of literals that do not occur only cost a look).
  const Rule* matchLiterals(std::string_view text, const std::vector<int>& literal_ids, SourceKind kind,
                            std::map<std::string, std::string>* captures = nullptr) const;

  // Full path: match + build the symptom (node/device/summary templates, fields, evidence).
  std::optional<Symptom> extract(const LogRecord& record, const MatchContext& ctx) const;

  // Every prefilter literal of the rules in one Vectorscan database, for parsers to search raw
  // buffers with (ParseOptions::literals). Null when it could not be built (then parsers hand
  // on every record and nothing is lost).
  std::shared_ptr<const LiteralScanner> literalScanner() const { return literal_scanner_; }

  // The distinct prefilter literals of a rule set's live rules, in the order the engine numbers
  // them (what its literalScanner is built from).
  static std::vector<std::string> literalsOf(const RuleSet& rules);

  // How many tables findTables built (see Table below); for tests.
  size_t tableCount() const { return tables_.size(); }

  const RuleSet& rules() const { return *rules_; }
  std::shared_ptr<const RuleSet> rulesPtr() const { return rules_; }

 private:
  // The winning match's regex (its group names) and groups, in this thread's scratch buffers.
  struct Groups;
  const Rule* matchText(std::string_view text, SourceKind kind, Groups* groups) const;
  const Rule* matchGroups(std::string_view text, const std::vector<int>& literal_ids, SourceKind kind,
                          Groups* groups) const;
  static void putCaptures(const Groups& g, std::map<std::string, std::string>* captures);

  std::shared_ptr<const RuleSet> rules_;
  struct Prefilter;                                 // RE2::Set, one alternative per literal
  std::unique_ptr<Prefilter> prefilter_;
  std::vector<std::vector<size_t>> by_literal_;    // literal index -> rule indices (sorted)
  std::vector<size_t> order_rank_;                 // rule index -> evaluation rank
  std::shared_ptr<const LiteralScanner> literal_scanner_;
  std::vector<std::string> literals_;              // literal index -> literal
  // Rules of one literal whose patterns are the same but for the digits in one named group (the
  // Xid pack: one rule per Xid code, `HEAD(?P<xid>79)TAIL`): one regex with the codes as
  // alternatives, `HEAD(?P<xid>1|2|...)TAIL`, and the captured code looked up in a table. A match
  // of that regex at a position is a match of the code's own rule there with the same captures,
  // so a record costs one search and the pack one small program instead of one per code.
  struct Table;
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<std::vector<size_t>> tables_of_literal_;  // literal index -> table indices
  std::vector<std::vector<size_t>> rest_of_literal_;    // literal index -> owners in no table
  std::vector<int> table_of_rule_;                      // rule index -> table index or -1
  // A literal many rules share, beyond its tables: those rules' patterns in one RE2::Set, so one
  // pass tells which of them match instead of one regex search per rule.
  struct PatternSet;
  std::vector<std::unique_ptr<PatternSet>> literal_sets_;  // literal index -> set or null
  // Compiled on first use (a node's agent meets few of the rules): rules given without a
  // compiled regex (RuleSet copies that keep only `pattern`), the tables' regexes and the
  // PatternSets.
  struct Lazy;
  std::unique_ptr<Lazy> lazy_;
  const re2::RE2* regexOf(size_t rule) const;
  const PatternSet* setOf(size_t literal) const;
  const re2::RE2* tableRegexOf(size_t table) const;
  const SpanCapture* spanCaptureOf(size_t rule) const;  // compiled on first use; null: RE2's groups
  struct Templates;
  const Templates& templatesOf(size_t rule) const;  // split on first use
  void findTables();
};

// Renders "{name}" placeholders from `values`; unknown names become "".
std::string renderTemplate(std::string_view tmpl, const std::map<std::string, std::string>& values);

}  // namespace faultline::common

// The rule cache: the loaded rule set, and the compiled Vectorscan databases of its literals,
// kept in one binary file so `faultline scan` and the agent start without parsing YAML or
// compiling (issue 15). The rules stay YAML in the repo; the cache is derived data.
//
// The file (DIR/rules-<hash of the rule directories' names>.cache) is keyed by a hash of every
// rule file's path and bytes, rules/VERSION, the faultline version, the cache format and the
// Vectorscan version. A load reads the rule files (bytes only), and when the cache holds that key
// and reads back whole (length and checksum), takes the rules from it: no YAML, no RE2 (the engine
// compiles a rule's regex when a record first holds its literal), no Vectorscan compile. Else it
// loads the YAML as loadRuleDirs does and writes a new cache file (temp file + rename: readers
// never see half of one). A cache file that cannot be read is named in `note` and ignored, never
// fatal; a cache that cannot be written only costs the next start its speed (also in `note`).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/rule_set.h"

namespace faultline::common {

struct CachedRuleLoad {
  RuleLoadResult result;
  enum class Cache { kOff, kHit, kMiss, kStale, kUnreadable } cache = Cache::kOff;
  std::string path;  // the cache file ("" when off)
  // Why the cache was not used or not written ("" when nothing to say): an unreadable cache
  // file ("rule cache PATH unreadable (why); loaded the YAML rules") or a failed write.
  std::string note;
};

// readRuleFiles + (cache or loadRuleSet). cache_dir "" = no cache (plain loadRuleDirs). The
// directory is created when missing. Rule files with errors give the errors, never a cache.
// build_on_miss false: a cache that does not hold these rules gives no rules and no errors (and
// the cache state), so a caller can build them elsewhere (the agent: on a helper thread).
CachedRuleLoad loadRuleDirsCached(const std::vector<std::string>& dirs, const std::string& cache_dir,
                                  bool build_on_miss = true);

// $XDG_CACHE_HOME/faultline, else $HOME/.cache/faultline; "" when neither is set.
std::string defaultRuleCacheDir();

// The file format (exposed for tests). serializeRuleSet writes every field of rules and relations
// (compiled regexes are not kept: a RuleEngine compiles them on first use) plus the literal
// scanner's databases when the set has one, and the error words' (RuleSet::error_words) when it has
// them; deserializeRuleSet gives nullopt with *error set on
// anything that is not exactly such a payload.
std::string serializeRuleSet(const RuleSet& rules, uint64_t key);
std::optional<RuleSet> deserializeRuleSet(std::string_view bytes, uint64_t key, std::string* error);

// The key of a set of rule files (see above).
uint64_t ruleCacheKey(const RuleFilesRead& read);

}  // namespace faultline::common

// A streaming log-template miner: groups messages that differ only in their variable parts.
//
// Each message is masked by token class first (common/template_mask.h), then routed through a
// fixed-depth parse tree in the manner of Drain (He et al., ICWS 2017): the first level is the
// token count, the next `depth` levels the message's first `depth` tokens that hold no
// placeholder, and a leaf holds clusters. A message joins the most similar cluster of its leaf
// when the share of positions where the cluster's template equals the message's token (a
// position already "<*>" counts as equal) is at least `similarity`; the positions that differ
// become "<*>". A kept zero ("exit code 0", see template_mask.h) never becomes "<*>": a cluster
// that differs from the message there is not a candidate. Otherwise the message starts a new
// cluster. A cluster's id never changes; its template only gets more general.
//
// A shortcut keeps the cost per message low (most messages repeat an earlier one's shape): a
// message equal to an earlier one of the same length but for its number-like bytes (digits, an
// 'x' after a '0', hex letters next to digits; a lone '0' is kept apart from other digits, as
// the masker keeps "exit code 0") joins the template that earlier message joined, without
// being masked or compared again. Its table holds up to 2 * max_templates signatures (at least
// 512) and is emptied when full; entries of evicted templates are ignored. Options::shortcut =
// false turns it off (every message masked and routed).
//
// Bounded: at most `max_templates` clusters. A new cluster beyond that evicts one first: the
// least recently seen cluster that saw a single message (a singleton), or when there is none the
// least recently seen cluster of all. Evicted clusters and the messages they counted are kept in
// evictedTemplates() / evictedRecords(), so records() == sum of live counts + evictedRecords().
// An evicted id is never reused; find() returns null for it.
//
// Deterministic: the same messages in the same order give the same templates, counts and ids
// (ids count up from 1 in order of creation). Reads no clock, file or environment. Not
// thread-safe: one miner per thread or a lock around it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/template_mask.h"

namespace faultline::common {

using TemplateId = uint32_t;
inline constexpr TemplateId kNoTemplate = 0;

struct Template {
  TemplateId id = kNoTemplate;
  std::string text;      // masked tokens joined by one space; "<*>" where members differ
  uint64_t count = 0;    // messages that joined (including the first)
  std::string example;   // the first message, cut at TemplateMinerOptions::max_example_bytes
  uint64_t first_seen = 0;  // 1-based number of the add() call that created it
  uint64_t last_seen = 0;   // ... and of the last one that joined it
};

struct TemplateMinerOptions {
  size_t depth = 3;            // leading non-variable tokens used as tree levels
  double similarity = 0.5;     // share of equal positions needed to join a cluster
  size_t max_templates = 4096; // live clusters at most (>= 1)
  size_t max_children = 64;    // children of a tree node at most; the rest share a "<*>" child
  size_t max_tokens = 64;      // longer messages: the first max_tokens - 1 tokens and "<...>"
  size_t max_example_bytes = 512;
  bool shortcut = true;        // see above
};

class TemplateMiner {
 public:
  using Options = TemplateMinerOptions;
  explicit TemplateMiner(Options options = {});
  ~TemplateMiner();
  TemplateMiner(const TemplateMiner&) = delete;
  TemplateMiner& operator=(const TemplateMiner&) = delete;

  // The cluster this message joined or started. Never kNoTemplate: every message gets one (an
  // empty message has the empty template).
  TemplateId add(std::string_view message);
  // The same for a template another miner made (its text, maskTemplateText): the aggregator
  // merges the templates of a job's agents this way. No shortcut; counts as one message.
  TemplateId addTemplate(std::string_view template_text);

  // A live cluster; `id` must be live (asserts). find() returns null for evicted or unknown ids.
  const Template& get(TemplateId id) const;
  const Template* find(TemplateId id) const;

  // Live clusters, and their ids in ascending order.
  size_t size() const { return live_; }
  std::vector<TemplateId> ids() const;

  uint64_t records() const { return records_; }
  uint64_t evictedTemplates() const { return evicted_templates_; }
  uint64_t evictedRecords() const { return evicted_records_; }
  // Messages that took the shortcut (see above): for the benchmark and tests.
  uint64_t shortcutHits() const { return shortcut_hits_; }

  // Approximate heap bytes held (clusters, tree, index): what the bound on templates bounds.
  size_t memoryBytes() const;

  const Options& options() const { return options_; }

 private:
  struct Node;
  struct Cluster;
  // The full path: mask (or read a template's text), route, compare.
  TemplateId addMasked(std::string_view message, bool is_template = false);
  Node* route(const MaskedMessage& m, bool create);
  void join(Cluster& c, const MaskedMessage& m);
  TemplateId create(const MaskedMessage& m, std::string_view message);
  void evictOne();
  void prune(Node* node);
  void linkFront(uint32_t slot);
  void unlink(uint32_t slot);
  void touch(uint32_t slot);
  // The shortcut: message signature -> the slot and id of the template it joined.
  struct Shortcut {
    uint64_t signature = 0;  // 0: empty
    uint32_t slot = 0;
    TemplateId id = kNoTemplate;
  };
  const Shortcut* findShortcut(uint64_t signature) const;
  void putShortcut(uint64_t signature, uint32_t slot, TemplateId id);
  std::vector<Shortcut> shortcuts_;  // open addressing, size a power of two
  size_t shortcut_count_ = 0;

  Options options_;
  std::unique_ptr<Node> root_;
  std::vector<Cluster> slots_;      // cluster storage; freed slots are reused
  std::vector<uint32_t> free_slots_;
  std::unordered_map<TemplateId, uint32_t> slot_of_;  // live id -> slot
  // Two recency lists through the slots (most recent first): singletons and the others.
  static constexpr uint32_t kNil = UINT32_MAX;
  uint32_t head_[2] = {kNil, kNil}, tail_[2] = {kNil, kNil};
  size_t live_ = 0;
  TemplateId next_id_ = 1;
  uint64_t records_ = 0;
  uint64_t evicted_templates_ = 0;
  uint64_t evicted_records_ = 0;
  uint64_t shortcut_hits_ = 0;
  MaskedMessage scratch_;
};

}  // namespace faultline::common

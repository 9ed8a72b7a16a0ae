#include "common/template_miner.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cstring>
#include <functional>

namespace faultline::common {

namespace {

struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

// Key of the child that takes the tokens of a node whose max_children are taken. A token equal
// to it (it starts with a control byte) would only share that child: a routing choice.
constexpr std::string_view kOverflowKey = "\x01<*>";
// Key of a level for a message with fewer non-variable tokens than levels.
constexpr std::string_view kNoTokenKey = "";
constexpr std::string_view kWildcard = "<*>";
constexpr std::string_view kTruncated = "<...>";

size_t heapBytes(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

// Sixteen bytes as one vector (GCC vector extensions: SSE2 on x86-64, NEON on aarch64). A
// comparison gives 0xFF in the lanes where it holds.
using Bytes16 = unsigned char __attribute__((vector_size(16)));

// Lane i takes lane i - 1 (laneUp) or i + 1 (laneDown); the lane left over gets 0. GCC spells
// the shuffle __builtin_shuffle, clang (the fuzz build) __builtin_shufflevector.
Bytes16 laneUp(Bytes16 v) {
#if defined(__clang__)
  return __builtin_shufflevector(Bytes16{}, v, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
#else
  return __builtin_shuffle(Bytes16{}, v, Bytes16{0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30});
#endif
}
Bytes16 laneDown(Bytes16 v) {
#if defined(__clang__)
  return __builtin_shufflevector(v, Bytes16{}, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16);
#else
  return __builtin_shuffle(v, Bytes16{}, Bytes16{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
#endif
}

// Sixteen bytes with their number-like bytes replaced by 0x01: digits, an 'x' after a '0', and
// hex letters up to three bytes from a digit (0x7f3a, 9f86d0, 3b). A '0' with no such byte
// beside it ("exit code 0") stays '0', as the masker keeps it. Neighbours are looked for within
// the sixteen bytes only: a number cut by the edge only costs the shortcut a miss.
Bytes16 normalize16(Bytes16 b) {
  const Bytes16 lower = b | 0x20;
  const Bytes16 digits = reinterpret_cast<Bytes16>((b >= '0') & (b <= '9'));
  const Bytes16 zeros = reinterpret_cast<Bytes16>(b == '0');
  const Bytes16 letters = reinterpret_cast<Bytes16>((lower >= 'a') & (lower <= 'f'));
  const Bytes16 exes = reinterpret_cast<Bytes16>(lower == 'x');
  Bytes16 run = digits | (exes & laneUp(zeros));
  run |= letters & (laneUp(run) | laneDown(run));
  run |= letters & (laneUp(run) | laneDown(run));
  run |= letters & (laneUp(run) | laneDown(run));
  const Bytes16 alone = zeros & ~(laneUp(run) | laneDown(run));
  const Bytes16 replace = run & ~alone;
  return (b & ~replace) | (replace & 1);
}

uint64_t mix16(uint64_t h, Bytes16 v) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t w[2];
  std::memcpy(w, &v, 16);
  h = (h ^ w[0]) * kMul;
  h = (h ^ (h >> 29) ^ w[1]) * kMul;
  return h ^ (h >> 32);
}

// The message's signature for the shortcut: a hash of its length and its bytes after
// normalize16, sixteen at a time (the last sixteen overlap the ones before when the length is
// not a multiple of 16).
uint64_t signatureOf(std::string_view message) {
  const char* p = message.data();
  const size_t n = message.size();
  uint64_t h = 0x243F6A8885A308D3ull ^ n;
  Bytes16 v;
  if (n < 16) {
    unsigned char buf[16] = {};
    for (size_t i = 0; i < n; ++i) buf[i] = static_cast<unsigned char>(p[i]);
    std::memcpy(&v, buf, 16);
    h = mix16(h, normalize16(v));
  } else {
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
      std::memcpy(&v, p + i, 16);
      h = mix16(h, normalize16(v));
    }
    if (i < n) {
      std::memcpy(&v, p + n - 16, 16);
      h = mix16(h, normalize16(v));
    }
  }
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h ? h : 1;
}

}  // namespace

struct TemplateMiner::Node {
  Node* parent = nullptr;
  std::string key;  // this node's key in its parent
  std::unordered_map<std::string, std::unique_ptr<Node>, KeyHash, std::equal_to<>> children;
  std::vector<uint32_t> clusters;  // slots, in order of creation (ties go to the oldest)

  size_t bytes() const {
    size_t b = sizeof(Node) + heapBytes(key) + clusters.capacity() * sizeof(uint32_t) +
               children.bucket_count() * sizeof(void*);
    for (const auto& [k, child] : children)
      b += sizeof(std::pair<const std::string, std::unique_ptr<Node>>) + 2 * sizeof(void*) + child->bytes();
    return b;
  }
};

struct TemplateMiner::Cluster {
  Template t;
  std::vector<uint32_t> begin, end;  // token i is t.text[begin[i], end[i])
  std::vector<uint8_t> pinned;       // token i holds a kept zero
  Node* leaf = nullptr;
  uint32_t prev = kNil, next = kNil;
  uint8_t list = 0;  // 0: singletons, 1: the others
  bool live = false;

  size_t tokens() const { return begin.size(); }
  std::string_view token(size_t i) const {
    return std::string_view(t.text).substr(begin[i], end[i] - begin[i]);
  }
};

TemplateMiner::TemplateMiner(Options options) : options_(options), root_(std::make_unique<Node>()) {
  if (options_.max_templates < 1) options_.max_templates = 1;
  if (options_.max_children < 1) options_.max_children = 1;
  if (options_.max_tokens < 2) options_.max_tokens = 2;
}

TemplateMiner::~TemplateMiner() = default;

TemplateMiner::Node* TemplateMiner::route(const MaskedMessage& m, bool create) {
  auto step = [&](Node* node, std::string_view key) -> Node* {
    if (auto it = node->children.find(key); it != node->children.end()) return it->second.get();
    if (!create) {
      auto it = node->children.find(kOverflowKey);
      return it == node->children.end() ? nullptr : it->second.get();
    }
    size_t taken = node->children.size() - node->children.count(kOverflowKey);
    if (taken >= options_.max_children) {
      key = kOverflowKey;
      if (auto it = node->children.find(key); it != node->children.end()) return it->second.get();
    }
    auto child = std::make_unique<Node>();
    child->parent = node;
    child->key = std::string(key);
    Node* raw = child.get();
    node->children.emplace(child->key, std::move(child));
    return raw;
  };
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), m.size());
  Node* node = step(root_.get(), std::string_view(buf, end - buf));
  size_t next = 0;
  for (size_t level = 0; node && level < options_.depth; ++level) {
    while (next < m.size() && m.variable[next]) ++next;
    std::string_view key = next < m.size() ? m.token(next) : kNoTokenKey;
    ++next;
    node = step(node, key);
  }
  return node;
}

TemplateId TemplateMiner::add(std::string_view message) {
  ++records_;
  if (!options_.shortcut) return addMasked(message);
  const uint64_t signature = signatureOf(message);
  if (const Shortcut* s = findShortcut(signature)) {
    const Cluster& c = slots_[s->slot];
    if (c.live && c.t.id == s->id) {
      ++shortcut_hits_;
      touch(s->slot);
      return s->id;
    }
  }
  TemplateId id = addMasked(message);
  putShortcut(signature, slot_of_.at(id), id);
  return id;
}

TemplateId TemplateMiner::addTemplate(std::string_view template_text) {
  ++records_;
  return addMasked(template_text, true);
}

TemplateId TemplateMiner::addMasked(std::string_view message, bool is_template) {
  MaskedMessage& m = scratch_;
  if (is_template) maskTemplateText(message, &m);
  else maskMessage(message, &m);
  if (m.size() > options_.max_tokens) {
    size_t keep = options_.max_tokens - 1;
    m.text.resize(m.begin[keep]);
    m.text.append(kTruncated);
    m.begin.resize(keep + 1);
    m.end.resize(keep + 1);
    m.variable.resize(keep + 1);
    m.pinned.resize(keep + 1);
    m.end[keep] = static_cast<uint32_t>(m.text.size());
    m.variable[keep] = 1;
    m.pinned[keep] = 0;
  }
  if (Node* leaf = route(m, false)) {
    const size_t n = m.size();
    uint32_t best = kNil;
    size_t best_equal = 0;
    for (uint32_t slot : leaf->clusters) {
      const Cluster& c = slots_[slot];
      if (c.tokens() != n) continue;  // only when lengths overflowed into one child
      size_t equal = 0;
      bool candidate = true;
      for (size_t i = 0; i < n && candidate; ++i) {
        std::string_view t = c.token(i);
        if (t == m.token(i)) ++equal;
        else if (c.pinned[i] || m.pinned[i]) candidate = false;  // zero vs non-zero
        else equal += t == kWildcard;
      }
      if (!candidate) continue;
      if (best == kNil || equal > best_equal) {
        best = slot;
        best_equal = equal;
      }
    }
    // equal >= similarity * n rather than equal / n >= similarity: no division rounds a tie away.
    if (best != kNil && (n == 0 || static_cast<double>(best_equal) >= options_.similarity * static_cast<double>(n))) {
      join(slots_[best], m);
      return slots_[best].t.id;
    }
  }
  return create(m, message);
}

void TemplateMiner::touch(uint32_t slot) {
  Cluster& c = slots_[slot];
  unlink(slot);
  ++c.t.count;
  c.t.last_seen = records_;
  c.list = c.t.count > 1 ? 1 : 0;
  linkFront(slot);
}

const TemplateMiner::Shortcut* TemplateMiner::findShortcut(uint64_t signature) const {
  if (shortcuts_.empty()) return nullptr;
  const size_t mask = shortcuts_.size() - 1;
  for (size_t i = signature & mask;; i = (i + 1) & mask) {
    const Shortcut& s = shortcuts_[i];
    if (s.signature == signature) return &s;
    if (s.signature == 0) return nullptr;
  }
}

void TemplateMiner::putShortcut(uint64_t signature, uint32_t slot, TemplateId id) {
  if (shortcuts_.empty()) {
    size_t size = 1024;
    while (size < 4 * options_.max_templates) size *= 2;
    shortcuts_.resize(size);
  }
  if (shortcut_count_ * 2 >= shortcuts_.size()) {  // at most half full: short probes
    std::fill(shortcuts_.begin(), shortcuts_.end(), Shortcut{});
    shortcut_count_ = 0;
  }
  const size_t mask = shortcuts_.size() - 1;
  for (size_t i = signature & mask;; i = (i + 1) & mask) {
    Shortcut& s = shortcuts_[i];
    if (s.signature == signature || s.signature == 0) {
      shortcut_count_ += s.signature == 0;
      s = {signature, slot, id};
      return;
    }
  }
}

void TemplateMiner::join(Cluster& c, const MaskedMessage& m) {
  touch(static_cast<uint32_t>(&c - slots_.data()));

  bool differs = false;
  for (size_t i = 0; i < c.tokens() && !differs; ++i) {
    std::string_view t = c.token(i);
    differs = t != kWildcard && t != m.token(i);
  }
  if (!differs) return;
  std::string text;
  text.reserve(c.t.text.size());
  std::vector<uint32_t> begin(c.tokens()), end(c.tokens());
  for (size_t i = 0; i < c.tokens(); ++i) {
    std::string_view t = c.token(i);
    if (i > 0) text.push_back(' ');
    begin[i] = static_cast<uint32_t>(text.size());
    text.append(t == m.token(i) ? t : kWildcard);
    end[i] = static_cast<uint32_t>(text.size());
  }
  c.t.text = std::move(text);
  c.begin = std::move(begin);
  c.end = std::move(end);
}

TemplateId TemplateMiner::create(const MaskedMessage& m, std::string_view message) {
  if (live_ >= options_.max_templates) evictOne();
  Node* leaf = route(m, true);
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Cluster& c = slots_[slot];
  c.t.id = next_id_++;
  c.t.text = m.text;
  c.t.count = 1;
  c.t.example = std::string(message.substr(0, options_.max_example_bytes));
  c.t.first_seen = c.t.last_seen = records_;
  c.begin = m.begin;
  c.end = m.end;
  c.pinned = m.pinned;
  c.leaf = leaf;
  c.list = 0;
  c.live = true;
  leaf->clusters.push_back(slot);
  slot_of_.emplace(c.t.id, slot);
  ++live_;
  linkFront(slot);
  return c.t.id;
}

void TemplateMiner::evictOne() {
  uint32_t victim = tail_[0] != kNil ? tail_[0] : tail_[1];
  assert(victim != kNil);
  unlink(victim);
  Cluster& c = slots_[victim];
  ++evicted_templates_;
  evicted_records_ += c.t.count;
  --live_;
  slot_of_.erase(c.t.id);
  Node* leaf = c.leaf;
  leaf->clusters.erase(std::find(leaf->clusters.begin(), leaf->clusters.end(), victim));
  c = Cluster{};
  free_slots_.push_back(victim);
  prune(leaf);
}

// Removes nodes left without clusters or children, bottom-up, so the tree stays as small as the
// clusters it holds.
void TemplateMiner::prune(Node* node) {
  while (node != root_.get() && node->children.empty() && node->clusters.empty()) {
    Node* parent = node->parent;
    parent->children.erase(parent->children.find(node->key));
    node = parent;
  }
}

void TemplateMiner::linkFront(uint32_t slot) {
  Cluster& c = slots_[slot];
  c.prev = kNil;
  c.next = head_[c.list];
  if (c.next != kNil) slots_[c.next].prev = slot;
  head_[c.list] = slot;
  if (tail_[c.list] == kNil) tail_[c.list] = slot;
}

void TemplateMiner::unlink(uint32_t slot) {
  Cluster& c = slots_[slot];
  if (c.prev != kNil) slots_[c.prev].next = c.next;
  else head_[c.list] = c.next;
  if (c.next != kNil) slots_[c.next].prev = c.prev;
  else tail_[c.list] = c.prev;
  c.prev = c.next = kNil;
}

const Template* TemplateMiner::find(TemplateId id) const {
  auto it = slot_of_.find(id);
  return it == slot_of_.end() ? nullptr : &slots_[it->second].t;
}

const Template& TemplateMiner::get(TemplateId id) const {
  const Template* t = find(id);
  assert(t && "TemplateMiner::get: id evicted or never given");
  return *t;
}

std::vector<TemplateId> TemplateMiner::ids() const {
  std::vector<TemplateId> out;
  out.reserve(slot_of_.size());
  for (const auto& [id, slot] : slot_of_) out.push_back(id);
  std::sort(out.begin(), out.end());
  return out;
}

size_t TemplateMiner::memoryBytes() const {
  size_t b = sizeof(*this) + slots_.capacity() * sizeof(Cluster) + free_slots_.capacity() * sizeof(uint32_t);
  for (const Cluster& c : slots_) {
    if (!c.live) continue;
    b += heapBytes(c.t.text) + heapBytes(c.t.example) + (c.begin.capacity() + c.end.capacity()) * sizeof(uint32_t) +
         c.pinned.capacity();
  }
  b += slot_of_.bucket_count() * sizeof(void*) + slot_of_.size() * (sizeof(std::pair<TemplateId, uint32_t>) + 2 * sizeof(void*));
  b += root_->bytes() + shortcuts_.capacity() * sizeof(Shortcut);
  b += heapBytes(scratch_.text) + (scratch_.begin.capacity() + scratch_.end.capacity()) * sizeof(uint32_t) +
       scratch_.variable.capacity() + scratch_.pinned.capacity();
  return b;
}

}  // namespace faultline::common

#include "aggregator/store/symptom_cache.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

namespace faultline::aggregator {
namespace {

size_t heapOf(const std::string& s) { return s.capacity() > 15 ? s.capacity() + 1 : 0; }

// An unordered_map node and its bucket slot, and a deque slot.
constexpr size_t kEntryOverhead = 64;
// A std::map node beside its key and value strings.
constexpr size_t kFieldNode = 48;

}  // namespace

size_t SymptomCache::footprint(const common::Symptom& s) {
  size_t n = sizeof(Entry) + kEntryOverhead;
  for (const std::string* str : {&s.rule_id, &s.symptom, &s.category, &s.node, &s.device, &s.source, &s.summary,
                                 &s.boot_id})
    n += heapOf(*str);
  n += s.evidence.capacity() * sizeof(std::string);
  for (const auto& e : s.evidence) n += heapOf(e);
  for (const auto& [k, v] : s.fields) n += kFieldNode + sizeof(std::string) * 2 + heapOf(k) + heapOf(v);
  return n;
}

void SymptomCache::put(int64_t id, common::Symptom s) {
  const size_t b = footprint(s);
  if (b > max_bytes_) {
    erase(id);
    return;
  }
  auto [it, fresh] = map_.try_emplace(id);
  if (fresh) order_.push_back(id);
  else bytes_ -= it->second.bytes;
  it->second.symptom = std::move(s);
  it->second.bytes = b;
  bytes_ += b;
  while (bytes_ > max_bytes_ && !order_.empty()) {
    const int64_t old = order_.front();
    order_.pop_front();
    if (auto o = map_.find(old); o != map_.end()) {
      bytes_ -= o->second.bytes;
      map_.erase(o);
      ++evicted_;
    }
  }
}

void SymptomCache::erase(int64_t id) {
  if (auto it = map_.find(id); it != map_.end()) {
    bytes_ -= it->second.bytes;
    map_.erase(it);
  }
  // Its slot in order_ stays until it reaches the front (finding nothing then); a put of the
  // same id meanwhile adds a second slot, and the first one evicts it early: harmless.
}

const common::Symptom* SymptomCache::find(int64_t id) const {
  auto it = map_.find(id);
  return it == map_.end() ? nullptr : &it->second.symptom;
}

void SymptomCache::clear() {
  map_.clear();
  order_.clear();
  bytes_ = 0;
}

size_t defaultSymptomCacheBytes(uint64_t memory_bytes) {
  constexpr uint64_t kMin = uint64_t{64} << 20, kMax = uint64_t{1} << 30;
  return static_cast<size_t>(std::clamp(memory_bytes / 16, kMin, kMax));
}

uint64_t availableMemoryBytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  uint64_t memory = pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
  // cgroup v2: "0::/system.slice/faultline-aggregator.service" in /proc/self/cgroup.
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
    uint64_t limit = 0;
    if (max >> limit && limit > 0 && (memory == 0 || limit < memory)) memory = limit;  // "max": no limit
  }
  return memory;
}

}  // namespace faultline::aggregator

// The symptoms this process stored lately, decoded, by their store id: the verdict of a job that
// just ended reads its symptoms from here instead of decoding their JSON payloads again (on a
// 10,000-node job, ~200k payloads were most of the time between the end event and the verdict).
//
// It holds what a verdict reads of each (common::copyForCorrelation: the evidence cut to its first
// line, which halves what a symptom costs here).
//
// Never the source of truth: the store's query says which symptoms belong to a window, the cache
// only spares decoding those it holds. An entry is put after the transaction that wrote its row
// committed (a rolled-back id may be given again), replaces any entry of the same id, and writes
// that do not put (other insert paths) erase theirs — so an id found here is that row's symptom.
// Bounded by an estimate of the bytes held: the oldest entries go first. Not thread-safe (the
// Store's lock guards it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <utility>

#include "common/symptom.h"

namespace faultline::aggregator {

class SymptomCache {
 public:
  explicit SymptomCache(size_t max_bytes) : max_bytes_(max_bytes) {}

  void put(int64_t id, common::Symptom s);
  void erase(int64_t id);
  // The symptom stored under `id`, or null.
  const common::Symptom* find(int64_t id) const;
  void clear();

  size_t size() const { return map_.size(); }
  size_t bytes() const { return bytes_; }
  size_t maxBytes() const { return max_bytes_; }
  uint64_t evicted() const { return evicted_; }

  // What holding `s` costs, roughly: the object, the heap of its strings, vector and map nodes.
  static size_t footprint(const common::Symptom& s);

 private:
  struct Entry {
    common::Symptom symptom;
    size_t bytes = 0;
  };
  size_t max_bytes_;
  size_t bytes_ = 0;
  uint64_t evicted_ = 0;
  std::unordered_map<int64_t, Entry> map_;
  std::deque<int64_t> order_;  // ids in the order they were put (an erased or replaced id may linger)
};

// The cache's size when none is given: a sixteenth of `memory_bytes` (what the machine, or the
// cgroup the aggregator runs in, has), at least 64 MiB and at most 1 GiB. One cascade of a
// 10,000-node fleet (~200k symptoms of ~1.3 KB) fits from 16 GiB of memory on; a small host
// keeps a small cache.
size_t defaultSymptomCacheBytes(uint64_t memory_bytes);
// The memory this process may use: physical memory, or the cgroup v2 limit (memory.max of the
// process's own cgroup) when that is lower. 0 when neither can be read.
uint64_t availableMemoryBytes();

}  // namespace faultline::aggregator

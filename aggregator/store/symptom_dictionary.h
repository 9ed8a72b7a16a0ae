// zstd dictionaries for symptom payloads (store migration 10). A symptom's compact payload
// (symptom_codec.h) is mostly log text — evidence lines, the source's path, the summary — that
// differs from its neighbours' in host names, numbers and times only; each row compressed on its
// own, with a dictionary trained from the store's own earlier payloads, keeps about a quarter of it.
//
// The packed payload: kPackedPayloadTag, the dictionary's id and the compact body's length as
// varints, then the body (the compact payload without its tag) as a zstd frame without magic
// number, checksum or dictionary id. Dictionaries live in the store's table symptom_dictionaries
// (id, bytes) and are never changed or deleted once written: every packed row can always be read.
//
// Pure: no store, no I/O. Thread-safe: a PayloadDictionary is immutable (zstd's CDict and DDict
// may be shared by threads; each thread compresses and decompresses with contexts of its own).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::aggregator {

inline constexpr char kPackedPayloadTag = '\x02';

class PayloadDictionary {
 public:
  // `bytes` as ZDICT_trainFromBuffer wrote them (or any content: raw dictionaries work too).
  // Compresses at `level` (1: the writer's, cheap; the ratio barely differs on ~500-byte rows).
  PayloadDictionary(int64_t id, std::string bytes, int level = 1);
  ~PayloadDictionary();
  PayloadDictionary(const PayloadDictionary&) = delete;
  PayloadDictionary& operator=(const PayloadDictionary&) = delete;

  int64_t id() const { return id_; }
  const std::string& bytes() const { return bytes_; }
  bool ok() const { return cdict_ && ddict_; }

  // The packed payload of `compact` (a compact payload: kCompactPayloadTag first), or `compact`
  // itself when packing would not make it smaller (or it is not compact: JSON stays JSON).
  std::string pack(std::string compact) const;
  // The compact body (without its tag) of a packed payload made with this dictionary, into *out
  // (reused: no allocation once it is big enough). false: damaged.
  bool unpack(std::string_view packed, std::string* out) const;

 private:
  int64_t id_;
  std::string bytes_;
  void* cdict_ = nullptr;  // ZSTD_CDict
  void* ddict_ = nullptr;  // ZSTD_DDict
};

// The dictionary id a packed payload names; nullopt when `payload` is not packed or is damaged.
std::optional<int64_t> packedDictionaryId(std::string_view payload);

// A dictionary trained from `samples` (compact payloads), at most `max_bytes`; nullopt when zstd
// finds too little to learn from (then more samples later).
std::optional<std::string> trainPayloadDictionary(const std::vector<std::string>& samples, size_t max_bytes);

// The dictionaries a store holds, by id, and the one new rows are packed with. Thread-safe; a
// dictionary, once added, stays (pointers returned stay valid while this lives).
class PayloadDictionaries {
 public:
  // Adds (or keeps, when the id is known) a dictionary; makes it the current one when `current`.
  const PayloadDictionary* add(int64_t id, std::string bytes, bool current);
  const PayloadDictionary* find(int64_t id) const;
  // What new rows are packed with; null: none yet (rows stay compact).
  std::shared_ptr<const PayloadDictionary> current() const;
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::map<int64_t, std::shared_ptr<const PayloadDictionary>> by_id_;
  std::shared_ptr<const PayloadDictionary> current_;
};

}  // namespace faultline::aggregator

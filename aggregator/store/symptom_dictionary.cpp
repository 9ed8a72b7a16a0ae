// Packed symptom payloads: zstd with a trained dictionary (symptom_dictionary.h).
#include "aggregator/store/symptom_dictionary.h"

#define ZSTD_STATIC_LINKING_ONLY   // the names of ZSTD_c_format / ZSTD_d_format (set through the stable API)
#define ZDICT_STATIC_LINKING_ONLY  // ZDICT_trainFromBuffer_fastCover (exported by libzstd since 1.3.6)
#include <zdict.h>
#include <zstd.h>

#include <algorithm>

#include "aggregator/store/symptom_codec.h"

namespace faultline::aggregator {

namespace {

void putVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>(0x80 | (v & 0x7f)));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

bool getVarint(std::string_view in, size_t* at, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *at < in.size(); shift += 7) {
    const auto b = static_cast<unsigned char>(in[(*at)++]);
    *v |= uint64_t(b & 0x7f) << shift;
    if (!(b & 0x80)) return true;
  }
  return false;
}

// The frame without what the row does not need: magic number (the tag says it is zstd), checksum
// (the database keeps the bytes), dictionary id (ours is in the header), content size (ditto).
struct CompressContext {
  ZSTD_CCtx* c = ZSTD_createCCtx();
  CompressContext() {
    ZSTD_CCtx_setParameter(c, ZSTD_c_format, ZSTD_f_zstd1_magicless);
    ZSTD_CCtx_setParameter(c, ZSTD_c_checksumFlag, 0);
    ZSTD_CCtx_setParameter(c, ZSTD_c_dictIDFlag, 0);
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
  }
  ~CompressContext() { ZSTD_freeCCtx(c); }
};

struct DecompressContext {
  ZSTD_DCtx* d = ZSTD_createDCtx();
  DecompressContext() { ZSTD_DCtx_setParameter(d, ZSTD_d_format, ZSTD_f_zstd1_magicless); }
  ~DecompressContext() { ZSTD_freeDCtx(d); }
};

// The header of a packed payload: dictionary id and body length; *at just past it.
bool readHeader(std::string_view p, uint64_t* dict, uint64_t* length, size_t* at) {
  *at = 1;
  return !p.empty() && p[0] == kPackedPayloadTag && getVarint(p, at, dict) && getVarint(p, at, length) &&
         *length <= (64u << 20);
}

}  // namespace

PayloadDictionary::PayloadDictionary(int64_t id, std::string bytes, int level) : id_(id), bytes_(std::move(bytes)) {
  cdict_ = ZSTD_createCDict(bytes_.data(), bytes_.size(), level);
  ddict_ = ZSTD_createDDict(bytes_.data(), bytes_.size());
}

PayloadDictionary::~PayloadDictionary() {
  ZSTD_freeCDict(static_cast<ZSTD_CDict*>(cdict_));
  ZSTD_freeDDict(static_cast<ZSTD_DDict*>(ddict_));
}

std::string PayloadDictionary::pack(std::string compact) const {
  if (!ok() || compact.empty() || compact[0] != kCompactPayloadTag) return compact;
  thread_local CompressContext ctx;
  const std::string_view body = std::string_view(compact).substr(1);
  std::string out;
  out.reserve(12 + ZSTD_compressBound(body.size()));
  out.push_back(kPackedPayloadTag);
  putVarint(out, static_cast<uint64_t>(id_));
  putVarint(out, body.size());
  const size_t head = out.size();
  out.resize(head + ZSTD_compressBound(body.size()));
  ZSTD_CCtx_refCDict(ctx.c, static_cast<const ZSTD_CDict*>(cdict_));
  const size_t n = ZSTD_compress2(ctx.c, out.data() + head, out.size() - head, body.data(), body.size());
  if (ZSTD_isError(n) || head + n >= compact.size()) return compact;
  out.resize(head + n);
  return out;
}

bool PayloadDictionary::unpack(std::string_view packed, std::string* out) const {
  uint64_t dict = 0, length = 0;
  size_t at = 0;
  if (!ok() || !readHeader(packed, &dict, &length, &at) || dict != static_cast<uint64_t>(id_)) return false;
  thread_local DecompressContext ctx;
  out->resize(length);
  ZSTD_DCtx_refDDict(ctx.d, static_cast<const ZSTD_DDict*>(ddict_));
  const size_t n = ZSTD_decompressDCtx(ctx.d, out->data(), out->size(), packed.data() + at, packed.size() - at);
  return !ZSTD_isError(n) && n == length;
}

std::optional<int64_t> packedDictionaryId(std::string_view payload) {
  uint64_t dict = 0, length = 0;
  size_t at = 0;
  if (!readHeader(payload, &dict, &length, &at) || dict > uint64_t(INT64_MAX)) return std::nullopt;
  return static_cast<int64_t>(dict);
}

std::optional<std::string> trainPayloadDictionary(const std::vector<std::string>& samples, size_t max_bytes) {
  std::string all;
  std::vector<size_t> sizes;
  for (const auto& s : samples) {
    if (s.size() < 2 || s[0] != kCompactPayloadTag) continue;
    all.append(s, 1);  // the body: what pack() compresses
    sizes.push_back(s.size() - 1);
  }
  // zstd wants a hundred times the dictionary's size in samples to do well; with less, a smaller
  // dictionary (it refuses fewer than a few kB of samples outright).
  const size_t capacity = std::min(max_bytes, std::max<size_t>(all.size() / 16, 1024));
  if (sizes.size() < 16) return std::nullopt;
  std::string dict(capacity, '\0');
  // One fastCover pass with the parameters ZDICT_trainFromBuffer's search settles on for these
  // payloads (segment size k at the top of its range, d 8, f 20), not the search itself: it tried
  // several k, each a whole training and a trial compression, and took a third as many
  // instructions as the writer's first 65,536 symptoms (bench/README.md). Rows packed with either
  // dictionary came out the same size within a byte.
  ZDICT_fastCover_params_t params{};
  params.k = static_cast<unsigned>(std::min<size_t>(2000, capacity));
  params.d = 8;
  params.f = 20;
  params.accel = 1;
  params.zParams.compressionLevel = 3;  // ZSTD_CLEVEL_DEFAULT, as ZDICT_trainFromBuffer's
  const size_t n = ZDICT_trainFromBuffer_fastCover(dict.data(), dict.size(), all.data(), sizes.data(),
                                                   static_cast<unsigned>(sizes.size()), params);
  if (ZDICT_isError(n)) return std::nullopt;
  dict.resize(n);
  return dict;
}

const PayloadDictionary* PayloadDictionaries::add(int64_t id, std::string bytes, bool current) {
  std::lock_guard lock(mu_);
  auto& slot = by_id_[id];
  if (!slot) slot = std::make_shared<const PayloadDictionary>(id, std::move(bytes));
  if (current) current_ = slot;
  return slot.get();
}

const PayloadDictionary* PayloadDictionaries::find(int64_t id) const {
  std::lock_guard lock(mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second.get();
}

std::shared_ptr<const PayloadDictionary> PayloadDictionaries::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

size_t PayloadDictionaries::size() const {
  std::lock_guard lock(mu_);
  return by_id_.size();
}

}  // namespace faultline::aggregator

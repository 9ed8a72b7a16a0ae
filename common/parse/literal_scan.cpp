#include "common/parse/literal_scan.h"

#include <hs/hs.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

namespace faultline::common {
namespace {

// Bytes whose presence makes a line a candidate whatever else it says (see the header).
const std::vector<std::string>& triggers() {
  // In the order of Stream::Triggers' bits.
  static const std::vector<std::string> t = {"\x1b", "\\", "\"MESSAGE\":["};
  return t;
}
// The one-byte triggers (ESC, '\\') are found with memchr, not by Vectorscan: a one-byte literal
// in the database costs its search about half as much again on every byte (callgrind, the bench's
// journal lines with the 1,081 rule literals: 9.3 -> 6.2 instructions a byte). They keep their ids
// (literalCount() + k); a database from a rule cache written before this holds them too, and its
// hits on them are ignored (memchr has them already).
constexpr unsigned kByteTriggers = 2;

struct IdsCtx {
  std::vector<int>* ids;
  unsigned count;
};

int onId(unsigned id, unsigned long long, unsigned long long, unsigned, void* ctx) {
  auto* c = static_cast<IdsCtx*>(ctx);
  if (id < c->count) c->ids->push_back(static_cast<int>(id));
  return 0;
}

// Literal i gets ids[i].
hs_database_t* compile(const std::vector<std::string>& lits, std::vector<unsigned> ids, unsigned mode,
                       std::string* error) {
  std::vector<const char*> exprs;
  std::vector<size_t> lens;
  std::vector<unsigned> flags;
  for (size_t i = 0; i < lits.size(); ++i) {
    exprs.push_back(lits[i].data());
    lens.push_back(lits[i].size());
    flags.push_back(0);
  }
  hs_database_t* db = nullptr;
  hs_compile_error_t* err = nullptr;
  if (hs_compile_lit_multi(exprs.data(), flags.data(), ids.data(), lens.data(),
                           static_cast<unsigned>(exprs.size()), mode, nullptr, &db, &err) != HS_SUCCESS) {
    *error = err && err->message ? err->message : "vectorscan compile failed";
    if (err && err->expression >= 0 && static_cast<size_t>(err->expression) < lits.size())
      *error += " (literal '" + lits[static_cast<size_t>(err->expression)] + "')";
    hs_free_compile_error(err);
    return nullptr;
  }
  return db;
}

// hs_alloc_scratch costs ~80 us even when the scratch already fits: call it only when this thread
// meets a scanner it has not sized its scratch for (by serial: a freed scanner's address may be
// reused by the next one).
std::atomic<uint64_t> next_serial{1};

struct ThreadScratch {
  hs_scratch_t* s = nullptr;
  uint64_t sized_for = 0;
  ~ThreadScratch() {
    if (s) hs_free_scratch(s);
  }
};

}  // namespace

std::shared_ptr<const LiteralScanner> LiteralScanner::build(const std::vector<std::string>& literals,
                                                            std::string* error) {
  for (const auto& l : literals) {
    if (l.empty()) {
      *error = "empty prefilter literal";
      return nullptr;
    }
    for (unsigned char c : l) {
      if (c < 0x20 || c == 0x7f || c == '?') {
        *error = "prefilter literal '" + l + "' holds a control byte or '?': the raw-buffer search cannot see it";
        return nullptr;
      }
    }
  }
  if (literals.size() + triggers().size() >= (size_t{1} << Stream::kIdBits)) {
    *error = "more prefilter literals than a hit can name (" + std::to_string(literals.size()) + ")";
    return nullptr;
  }
  std::vector<std::string> all(literals);
  std::vector<unsigned> ids(literals.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<unsigned>(i);
  for (size_t k = kByteTriggers; k < triggers().size(); ++k) {
    all.push_back(triggers()[k]);
    ids.push_back(static_cast<unsigned>(literals.size() + k));
  }
  std::shared_ptr<LiteralScanner> s(new LiteralScanner);
  s->count_ = literals.size();
  s->literals_ = literals;
  s->serial_ = next_serial.fetch_add(1);
  s->stream_db_ = compile(all, std::move(ids), HS_MODE_STREAM, error);
  if (!s->stream_db_) return nullptr;
  if (hs_alloc_scratch(s->stream_db_, &s->proto_scratch_) != HS_SUCCESS) {
    *error = "vectorscan: cannot allocate scratch space";
    return nullptr;
  }
  return s;
}

std::shared_ptr<const LiteralScanner> LiteralScanner::buildExpressions(const std::vector<Expression>& expressions,
                                                                       std::string* error) {
  if (expressions.size() + triggers().size() >= (size_t{1} << Stream::kIdBits)) {
    *error = "more expressions than a hit can name (" + std::to_string(expressions.size()) + ")";
    return nullptr;
  }
  std::vector<std::string> texts;
  std::vector<unsigned> flags, ids;
  for (size_t i = 0; i < expressions.size(); ++i) {
    texts.push_back(expressions[i].regex);
    flags.push_back(HS_FLAG_MULTILINE | (expressions[i].caseless ? HS_FLAG_CASELESS : 0u));
    ids.push_back(static_cast<unsigned>(i));
  }
  // The multi-byte triggers, byte by byte (hex escapes need no quoting).
  for (size_t k = kByteTriggers; k < triggers().size(); ++k) {
    std::string hex;
    for (unsigned char c : triggers()[k]) {
      static const char* kDigits = "0123456789abcdef";
      hex += "\\x";
      hex += kDigits[c >> 4];
      hex += kDigits[c & 15];
    }
    texts.push_back(hex);
    flags.push_back(0);
    ids.push_back(static_cast<unsigned>(expressions.size() + k));
  }
  std::vector<const char*> ptrs;
  for (const auto& t : texts) ptrs.push_back(t.c_str());
  std::shared_ptr<LiteralScanner> s(new LiteralScanner);
  s->count_ = expressions.size();
  s->literals_.assign(texts.begin(), texts.begin() + static_cast<long>(expressions.size()));
  s->serial_ = next_serial.fetch_add(1);
  hs_compile_error_t* err = nullptr;
  if (hs_compile_multi(ptrs.data(), flags.data(), ids.data(), static_cast<unsigned>(ptrs.size()), HS_MODE_STREAM,
                       nullptr, &s->stream_db_, &err) != HS_SUCCESS) {
    *error = err && err->message ? err->message : "vectorscan compile failed";
    if (err && err->expression >= 0 && static_cast<size_t>(err->expression) < texts.size())
      *error += " (expression '" + texts[static_cast<size_t>(err->expression)] + "')";
    hs_free_compile_error(err);
    s->stream_db_ = nullptr;
    return nullptr;
  }
  if (hs_alloc_scratch(s->stream_db_, &s->proto_scratch_) != HS_SUCCESS) {
    *error = "vectorscan: cannot allocate scratch space";
    return nullptr;
  }
  return s;
}

namespace {
void putBlob(std::string& out, const char* bytes, size_t n) {
  uint64_t len = n;
  out.append(reinterpret_cast<const char*>(&len), sizeof len);
  out.append(bytes, n);
}
bool takeBlob(std::string_view& in, std::string_view* blob) {
  uint64_t len = 0;
  if (in.size() < sizeof len) return false;
  std::memcpy(&len, in.data(), sizeof len);
  in.remove_prefix(sizeof len);
  if (len > in.size()) return false;
  *blob = in.substr(0, len);
  in.remove_prefix(len);
  return true;
}
}  // namespace

std::string LiteralScanner::serialize() const {
  std::string out;
  char* bytes = nullptr;
  size_t n = 0;
  if (hs_serialize_database(stream_db_, &bytes, &n) != HS_SUCCESS) return {};
  putBlob(out, bytes, n);
  std::free(bytes);
  return out;
}

std::shared_ptr<const LiteralScanner> LiteralScanner::fromSerialized(const std::vector<std::string>& literals,
                                                                     std::string_view blob, std::string* error) {
  std::string_view stream_bytes;
  if (!takeBlob(blob, &stream_bytes) || !blob.empty()) {
    *error = "vectorscan databases: truncated";
    return nullptr;
  }
  std::shared_ptr<LiteralScanner> s(new LiteralScanner);
  s->count_ = literals.size();
  s->literals_ = literals;
  s->serial_ = next_serial.fetch_add(1);
  if (hs_deserialize_database(stream_bytes.data(), stream_bytes.size(), &s->stream_db_) != HS_SUCCESS) {
    s->stream_db_ = nullptr;
    *error = "vectorscan databases: not readable by this Vectorscan";
    return nullptr;
  }
  if (hs_alloc_scratch(s->stream_db_, &s->proto_scratch_) != HS_SUCCESS) {
    *error = "vectorscan: cannot allocate scratch space";
    return nullptr;
  }
  return s;
}

LiteralScanner::~LiteralScanner() {
  if (proto_scratch_) hs_free_scratch(proto_scratch_);
  if (stream_db_) hs_free_database(stream_db_);
}

bool LiteralScanner::literalsIn(std::string_view text, std::vector<int>* ids) const {
  thread_local ThreadScratch scratch;
  ids->clear();
  if (text.size() > UINT32_MAX) return false;
  if (scratch.sized_for != serial_) {
    if (hs_alloc_scratch(stream_db_, &scratch.s) != HS_SUCCESS) return false;
    scratch.sized_for = serial_;
  }
  // The stream database, one stream per search: a block-mode copy of the database would cost
  // the agent ~370 KB resident for the few records per second that hold a literal.
  IdsCtx ctx{ids, static_cast<unsigned>(count_)};
  hs_stream_t* stream = nullptr;
  if (hs_open_stream(stream_db_, 0, &stream) != HS_SUCCESS) return false;
  const bool scanned =
      hs_scan_stream(stream, text.data(), static_cast<unsigned>(text.size()), 0, scratch.s, onId, &ctx) == HS_SUCCESS;
  if (hs_close_stream(stream, scratch.s, onId, &ctx) != HS_SUCCESS || !scanned) return false;
  if (ids->size() > 1) {
    std::sort(ids->begin(), ids->end());
    ids->erase(std::unique(ids->begin(), ids->end()), ids->end());
  }
  return true;
}

int LiteralScanner::Stream::onHit(unsigned id, unsigned long long /*from*/, unsigned long long to,
                                  unsigned /*flags*/, void* ctx) {
  auto* self = static_cast<Stream*>(ctx);
  if (id >= self->scanner_->count_) {
    const unsigned k = id - self->scanner_->count_;
    if (k < kByteTriggers || !(self->triggers_ & (1u << k))) return 0;
  }
  self->out_->push_back(hitAt(to, id));
  return 0;
}

void LiteralScanner::Stream::findByteTriggers(std::string_view bytes, uint64_t base, std::vector<uint64_t>* hits) const {
  for (unsigned k = 0; k < kByteTriggers; ++k) {
    if (!(triggers_ & (1u << k))) continue;
    const char byte = triggers()[k][0];
    const unsigned id = static_cast<unsigned>(scanner_->count_ + k);
    for (const char* p = bytes.data(); (p = static_cast<const char*>(std::memchr(
                                            p, byte, static_cast<size_t>(bytes.data() + bytes.size() - p)))) != nullptr;
         ++p)
      hits->push_back(hitAt(base + static_cast<uint64_t>(p - bytes.data()) + 1, id));
  }
}

LiteralScanner::Stream::Stream(std::shared_ptr<const LiteralScanner> scanner, unsigned triggers)
    : scanner_(std::move(scanner)), triggers_(triggers | kEsc) {
  hs_clone_scratch(scanner_->proto_scratch_, &scratch_);
  hs_open_stream(scanner_->stream_db_, 0, &stream_);
}

LiteralScanner::Stream::~Stream() {
  if (stream_) hs_close_stream(stream_, scratch_, nullptr, nullptr);
  if (scratch_) hs_free_scratch(scratch_);
}

bool LiteralScanner::Stream::scan(std::string_view bytes, std::vector<uint64_t>* hits) {
  if (!ok()) return false;
  const size_t before = hits->size();
  findByteTriggers(bytes, scanned_, hits);
  scanned_ += bytes.size();
  // hs_scan_stream takes an unsigned length: feed very large views in pieces.
  constexpr size_t kMax = 1u << 30;
  for (size_t pos = 0; pos < bytes.size(); pos += kMax) {
    const size_t n = std::min(kMax, bytes.size() - pos);
    out_ = hits;
    if (hs_scan_stream(stream_, bytes.data() + pos, static_cast<unsigned>(n), 0, scratch_, onHit, this) !=
        HS_SUCCESS) {
      broken_ = true;
      return false;
    }
  }
  if (!std::is_sorted(hits->begin() + static_cast<long>(before), hits->end()))
    std::sort(hits->begin() + static_cast<long>(before), hits->end());
  return true;
}

void LiteralScanner::Stream::close(std::vector<uint64_t>* hits) {
  if (!stream_) return;
  out_ = hits;
  if (hs_close_stream(stream_, scratch_, onHit, this) != HS_SUCCESS) broken_ = true;
  stream_ = nullptr;
}

}  // namespace faultline::common

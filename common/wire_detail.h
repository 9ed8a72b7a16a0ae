// Pieces of the Cap'n Proto codec shared by common/wire.cpp (batches) and common/relay_wire.cpp
// (site relay batches). Internal to faultline_common: include only from those files.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include <stdexcept>
#include <string>

#include "common/schema/faultline.capnp.h"
#include "common/symptom.h"
#include "common/wire.h"

namespace faultline::common::wire_detail {

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past U+10FFFF).
bool validUtf8(std::string_view s);
// `s` with every byte that is not part of a well-formed UTF-8 sequence replaced by U+FFFD.
std::string repairUtf8(std::string_view s);

// Reads a Text field within the limits: throws std::runtime_error("oversized <what>") or ("NUL in
// text"); the decoders turn that into their reason. Bytes that are not UTF-8 (a file name in
// another encoding, a hostile sender) become U+FFFD: the store and the API write JSON, which
// cannot hold them, and refusing the message would lose the rest of it.
struct TextReader {
  const DecodeLimits& limits;
  std::string operator()(capnp::Text::Reader t, const char* what) const;
};

std::string packToString(capnp::MessageBuilder& message);
void fillSymptom(schema::Symptom::Builder b, const Symptom& s);
// Throws std::runtime_error with the reason when a field is out of range.
Symptom readSymptom(schema::Symptom::Reader b, const TextReader& text);
// A sourceKind text as written by fillSymptom; an unknown one (or none: an older sender) is
// kApplication.
SourceKind sourceKindFromName(std::string_view kind);

// Reads one packed message of `Root` within `limits` and hands its root to `read`, which fills the
// caller's result and throws std::runtime_error(reason) on a bad field. false + *reason when the
// bytes are refused: "empty", "too large", "malformed: ..." (Cap'n Proto's own checks:
// truncation, traversal and nesting limits), or what `read` threw. Nothing escapes.
// Throws "too many <what>" when a list is longer than `max`: checked before a list is decoded.
template <typename List>
void checkListSize(const List& list, size_t max, const char* what) {
  if (list.size() > max) throw std::runtime_error(std::string("too many ") + what);
}

template <typename Root, typename Read>
bool readPacked(const void* data, size_t size, const DecodeLimits& limits, std::string* reason, Read&& read) {
  if (size == 0 || size > limits.max_bytes) {
    *reason = size == 0 ? "empty" : "too large";
    return false;
  }
  try {
    kj::ArrayInputStream in(kj::ArrayPtr<const kj::byte>(static_cast<const kj::byte*>(data), size));
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = limits.traversal_words;
    opts.nestingLimit = limits.nesting;
    capnp::PackedMessageReader message(in, opts);
    read(message.getRoot<Root>());
  } catch (const kj::Exception& e) {
    *reason = std::string("malformed: ") + e.getDescription().cStr();
    return false;
  } catch (const std::exception& e) {
    *reason = e.what();
    return false;
  }
  return true;
}

}  // namespace faultline::common::wire_detail

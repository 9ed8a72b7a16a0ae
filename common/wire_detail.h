// Pieces of the Cap'n Proto codec shared by common/wire.cpp (batches) and common/relay_wire.cpp
// (site relay batches). Internal to faultline_common: include only from those files.
#pragma once

#include <capnp/message.h>

#include <string>

#include "common/schema/faultline.capnp.h"
#include "common/symptom.h"
#include "common/wire.h"

namespace faultline::common::wire_detail {

// Reads a Text field within the limits: throws std::runtime_error("oversized <what>") or
// ("NUL in text"); the decoders turn that into their reason.
struct TextReader {
  const DecodeLimits& limits;
  std::string operator()(capnp::Text::Reader t, const char* what) const;
};

std::string packToString(capnp::MessageBuilder& message);
void fillSymptom(schema::Symptom::Builder b, const Symptom& s);
// Throws std::runtime_error with the reason when a field is out of range.
Symptom readSymptom(schema::Symptom::Reader b, const TextReader& text);

}  // namespace faultline::common::wire_detail

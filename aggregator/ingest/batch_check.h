// Field sanity the aggregator adds on top of common::decodeBatch: text that cannot be stored and
// re-sent faithfully. Found by the fuzz target (tests/fuzz/fuzz_decode.cpp): a NUL byte inside a
// Cap'n Proto Text passes decoding, but the string is cut at it when encoded again, so a
// "rule id" of "\0x" would be stored as one thing and read back as another (empty).
//
// Pure; no I/O; never throws.
#pragma once

#include <optional>
#include <string>

#include "common/wire.h"

namespace faultline::aggregator {

// nullopt when the batch is sane, else the reason ("NUL in text").
std::optional<std::string> checkBatchFields(const common::SymptomBatchData& batch);

}  // namespace faultline::aggregator

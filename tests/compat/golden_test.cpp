// tests/compat/v1_batch.bin: the packed bytes of v1Batch() as an agent of wire version 1 wrote
// them, committed once. The current decoder must keep reading them to v1Batch()'s values, whatever
// happens to the .capnp copies later (this test needs no v1 schema to pass).
//
// Regenerate (only if v1Batch() or the frozen schema deliberately changes, which should not
// happen): build, then run `build/tests/compat_test "[.regenerate]"` and commit the file.
#include <catch2/catch.hpp>
#include <fstream>

#include "tests/compat/compat_util.h"

using namespace faultline;
using namespace faultline::compat::testing;

namespace {

const char* const kGolden = FAULTLINE_SOURCE_DIR "/tests/compat/v1_batch.bin";

std::string readGolden() {
  std::ifstream in(kGolden, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("compat: the committed v1 batch decodes to the values the v1 agent sent", "[compat]") {
  const std::string bytes = readGolden();
  REQUIRE_FALSE(bytes.empty());
  std::string reason;
  auto got = common::decodeBatch(bytes.data(), bytes.size(), &reason);
  INFO(reason);
  REQUIRE(got);
  checkSame(*got, v1Batch());
}

TEST_CASE("compat: the frozen v1 schema still writes the committed v1 batch byte for byte",
          "[compat]") {
  // Fails when tests/compat/faultline_v1.capnp was edited (it must not be) or v1Batch() changed.
  const bool same_bytes = packV1<v1::SymptomBatch>(v1Batch()) == readGolden();
  CHECK(same_bytes);
}

TEST_CASE("compat: regenerate tests/compat/v1_batch.bin", "[.regenerate]") {
  std::ofstream(kGolden, std::ios::binary | std::ios::trunc) << packV1<v1::SymptomBatch>(v1Batch());
  SUCCEED(std::string("wrote ") + kGolden);
}

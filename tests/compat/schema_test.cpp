// The append-only rule, checked on the schemas themselves: every field of the frozen v1 schema
// that crosses the wire (from SymptomBatch and Heartbeat down) is still in the current schema
// under the same name, ordinal and type, and every enumerant keeps its number.
#include <catch2/catch.hpp>

#include "tests/compat/compat_util.h"

using namespace faultline::compat::testing;

namespace {

void compareStructs(capnp::StructSchema older, capnp::StructSchema newer, const std::string& path,
                    std::vector<std::string>* out);

void compareTypes(capnp::Type older, capnp::Type newer, const std::string& path,
                  std::vector<std::string>* out) {
  if (older.which() != newer.which()) {
    out->push_back(path + ": type changed");
    return;
  }
  if (older.isStruct()) compareStructs(older.asStruct(), newer.asStruct(), path + ".", out);
  if (older.isList())
    compareTypes(older.asList().getElementType(), newer.asList().getElementType(), path + "[]",
                 out);
  if (older.isEnum()) {
    auto a = older.asEnum().getEnumerants(), b = newer.asEnum().getEnumerants();
    for (unsigned i = 0; i < a.size(); ++i)
      if (i >= b.size() || a[i].getProto().getName() != b[i].getProto().getName())
        out->push_back(path + ": enumerant " + a[i].getProto().getName().cStr() +
                       " moved or removed");
  }
}

void compareStructs(capnp::StructSchema older, capnp::StructSchema newer, const std::string& path,
                    std::vector<std::string>* out) {
  for (auto f : older.getFields()) {
    std::string p = path + f.getProto().getName().cStr();
    KJ_IF_MAYBE (nf, newer.findFieldByName(f.getProto().getName())) {
      if (f.getProto().getOrdinal().getExplicit() != nf->getProto().getOrdinal().getExplicit())
        out->push_back(p + ": ordinal changed");
      compareTypes(f.getType(), nf->getType(), p, out);
    } else {
      out->push_back(p + ": removed or renamed");
    }
  }
}

}  // namespace

TEST_CASE("compat: the current schema keeps every v1 wire field with its name and ordinal and type",
          "[compat]") {
  std::vector<std::string> problems;
  compareStructs(capnp::Schema::from<v1::SymptomBatch>(), capnp::Schema::from<now::SymptomBatch>(),
                 "SymptomBatch.", &problems);
  compareStructs(capnp::Schema::from<v1::Heartbeat>(), capnp::Schema::from<now::Heartbeat>(),
                 "Heartbeat.", &problems);
  INFO(Catch::Detail::stringify(problems));
  CHECK(problems.empty());
  // The comparison itself bites: v1 lacks what the current Heartbeat appended.
  problems.clear();
  compareStructs(capnp::Schema::from<now::Heartbeat>(), capnp::Schema::from<v1::Heartbeat>(),
                 "Heartbeat.", &problems);
  CHECK(problems == std::vector<std::string>{"Heartbeat.inventory: removed or renamed",
                                             "Heartbeat.inventoryHash: removed or renamed"});
}

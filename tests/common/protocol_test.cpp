#include "common/protocol.h"

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>
#include <zstd.h>

#include <catch2/catch.hpp>

#include "common/schema/faultline.capnp.h"

using namespace faultline::common;

TEST_CASE("protocol: ack is agent id + little-endian u64", "[protocol]") {
  auto bytes = encodeAck({"gpu-node-7", 0x0102030405060708ull});
  CHECK(bytes.size() == 10 + 8);
  CHECK(static_cast<uint8_t>(bytes[10]) == 0x08);
  auto ack = decodeAck(bytes);
  REQUIRE(ack);
  CHECK(ack->agent_id == "gpu-node-7");
  CHECK(ack->sequence == 0x0102030405060708ull);
  CHECK_FALSE(decodeAck("short"));
}

TEST_CASE("protocol: heartbeat round trip, garbage refused", "[protocol]") {
  HeartbeatData hb;
  hb.agent_id = "a";
  hb.hostname = "n";
  hb.node = "n";
  hb.boot_id = "b";
  hb.ruleset_version = "0.1.0+x";
  hb.spool_batches = 3;
  hb.dropped_symptoms = 2;
  SourceHealth s;
  s.name = "kmsg";
  s.status = "partial";
  s.reason = "overrun";
  s.lost = 5;
  s.records = 10;
  hb.sources = {s};
  std::string reason;
  auto back = decodeHeartbeat(encodeHeartbeat(hb), &reason);
  REQUIRE(back);
  CHECK(back->agent_id == "a");
  CHECK(back->spool_batches == 3);
  REQUIRE(back->sources.size() == 1);
  CHECK(back->sources[0].lost == 5);
  CHECK(back->sources[0].status == "partial");
  CHECK_FALSE(decodeHeartbeat(std::string(100, '\xff'), &reason));
}

TEST_CASE("protocol: a heartbeat with a NUL byte inside a text is refused as NUL in text", "[protocol]") {
  // encodeHeartbeat passes C strings and cannot write one: plant it with the generated builder.
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<faultline::schema::Heartbeat>();
  root.setAgentId("a");
  root.setHostname("n");
  root.initSources(1)[0].setSource(capnp::Text::Reader("km\0sg", 5));
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  std::string reason;
  auto bytes = std::string(reinterpret_cast<const char*>(out.getArray().begin()), out.getArray().size());
  CHECK_FALSE(decodeHeartbeat(bytes, &reason));
  CHECK(reason == "NUL in text");
  root.getSources()[0].setSource("kmsg");
  kj::VectorOutputStream clean;
  capnp::writePackedMessage(clean, message);
  auto back = decodeHeartbeat(
      std::string(reinterpret_cast<const char*>(clean.getArray().begin()), clean.getArray().size()), &reason);
  REQUIRE(back);
  CHECK(back->sources.at(0).name == "kmsg");
}

namespace {

NodeInventory sampleInventory() {
  NodeInventory inv;
  inv.collected_ns = 1'717'243'200'000'000'000;
  inv.gpus = {{0, "0000:18:00.0", "GPU-9f3a2c11-0e7b-4c3d-8a21-5b6f0d2e9c41", "1650922021234"},
              {6, "0000:ba:00.0", "GPU-00060022-b315-5df5-155d-0022b3155df5", ""}};
  inv.hcas = {{"mlx5_0", "0000:0c:00.0", 1, "ACTIVE", "InfiniBand"}, {"mlx5_1", "0000:1f:00.0", 1, "DOWN", "InfiniBand"}};
  inv.hca_error = "mlx5_9: no device link";
  return inv;
}

}  // namespace

TEST_CASE("protocol: heartbeat carries the node inventory when set, and its hash always", "[protocol]") {
  HeartbeatData hb;
  hb.agent_id = "a";
  hb.inventory = sampleInventory();
  hb.inventory_hash = inventoryHash(*hb.inventory);
  std::string reason;
  auto back = decodeHeartbeat(encodeHeartbeat(hb), &reason);
  REQUIRE(back);
  REQUIRE(back->inventory);
  CHECK(back->inventory->collected_ns == hb.inventory->collected_ns);
  CHECK(back->inventory->gpus == hb.inventory->gpus);
  CHECK(back->inventory->hcas == hb.inventory->hcas);
  CHECK(back->inventory->hca_error == "mlx5_9: no device link");
  CHECK(back->inventory->gpu_error.empty());
  CHECK(back->inventory_hash == hb.inventory_hash);
  CHECK(inventoryHash(*back->inventory) == hb.inventory_hash);

  // Without the inventory (unchanged since the last one sent): absent, not an empty node.
  HeartbeatData lean = hb;
  lean.inventory.reset();
  auto lean_bytes = encodeHeartbeat(lean);
  CHECK(lean_bytes.size() < encodeHeartbeat(hb).size());
  back = decodeHeartbeat(lean_bytes, &reason);
  REQUIRE(back);
  CHECK_FALSE(back->inventory);
  CHECK(back->inventory_hash == hb.inventory_hash);

  // A node with no GPUs found is carried as such (present, empty, with the reason).
  NodeInventory none;
  none.gpu_error = "nvidia-smi: not found";
  lean.inventory = none;
  back = decodeHeartbeat(encodeHeartbeat(lean), &reason);
  REQUIRE(back);
  REQUIRE(back->inventory);
  CHECK(back->inventory->gpus.empty());
  CHECK(back->inventory->gpu_error == "nvidia-smi: not found");
}

TEST_CASE("protocol: inventory hash follows the devices, not the collection time", "[protocol]") {
  auto a = sampleInventory();
  auto b = a;
  b.collected_ns += 600'000'000'000;
  CHECK(inventoryHash(a) == inventoryHash(b));
  CHECK(a.sameDevices(b));
  b.gpus[1].uuid = "GPU-replaced";
  CHECK(inventoryHash(a) != inventoryHash(b));
  CHECK_FALSE(a.sameDevices(b));
  b = a;
  b.hcas[1].state = "ACTIVE";
  CHECK(inventoryHash(a) != inventoryHash(b));
  CHECK(inventoryHash(NodeInventory{}) != 0);
}

TEST_CASE("protocol: zstd frames round-trip, receivers unwrap both types", "[protocol]") {
  std::string plain;
  for (int i = 0; i < 2000; ++i) plain += "NCCL WARN NET/IB : Got completion with error 12, opcode 1, len 0\n";
  auto packed = compressZstd(plain);
  CHECK(packed.size() < plain.size() / 20);
  std::string reason;
  auto back = decompressZstd(packed, plain.size(), &reason);
  REQUIRE(back);
  CHECK(*back == plain);

  UnwrappedPayload u;
  REQUIRE(unwrapPayload(kTypeBatchZstd, packed, &u, &reason));
  CHECK(u.type == kTypeBatch);
  CHECK(u.payload == plain);
  UnwrappedPayload v;
  REQUIRE(unwrapPayload(kTypeHeartbeat, "raw", &v, &reason));
  CHECK(v.type == kTypeHeartbeat);
  CHECK(v.payload == "raw");
  CHECK(v.inflated.empty());
  // Empty input round-trips too.
  auto empty = decompressZstd(compressZstd(""), 10, &reason);
  REQUIRE(empty);
  CHECK(empty->empty());
}

TEST_CASE("protocol: hostile zstd input is refused without inflating it", "[protocol]") {
  std::string reason;
  // A bomb: 64 MiB of zeros compresses to a few KiB; the receiver's bound stops it.
  std::string zeros(64 << 20, '\0');
  auto bomb = compressZstd(zeros, 1);
  CHECK(bomb.size() < (64 << 10));
  CHECK_FALSE(decompressZstd(bomb, 1 << 20, &reason));
  CHECK(reason.find("1048576") != std::string::npos);
  // The same bomb with the content size left out of the header (streamed): still bounded.
  {
    ZSTD_CCtx* c = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(c, ZSTD_c_contentSizeFlag, 0);
    std::string out(ZSTD_compressBound(zeros.size()), '\0');
    ZSTD_outBuffer o{out.data(), out.size(), 0};
    ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
    REQUIRE(ZSTD_compressStream2(c, &o, &in, ZSTD_e_end) == 0);
    ZSTD_freeCCtx(c);
    out.resize(o.pos);
    REQUIRE(ZSTD_getFrameContentSize(out.data(), out.size()) == ZSTD_CONTENTSIZE_UNKNOWN);
    reason.clear();
    CHECK_FALSE(decompressZstd(out, 1 << 20, &reason));
    CHECK(reason.find("exceeds") != std::string::npos);
    auto ok = decompressZstd(out, zeros.size(), &reason);
    REQUIRE(ok);
    CHECK(ok->size() == zeros.size());
  }
  // Truncated, corrupt, and not zstd at all.
  auto good = compressZstd(std::string(100000, 'x') + "tail");
  CHECK_FALSE(decompressZstd(good.substr(0, good.size() / 2), 1 << 20, &reason));
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x5a;
  flipped[flipped.size() - 3] ^= 0x5a;
  auto f = decompressZstd(flipped, 1 << 20, &reason);
  CHECK((!f || *f != std::string(100000, 'x') + "tail"));
  CHECK_FALSE(decompressZstd("batch", 1 << 20, &reason));
  CHECK(reason == "not zstd");
  UnwrappedPayload u;
  CHECK_FALSE(unwrapPayload("batch+zstd", "garbage!", &u, &reason));
}

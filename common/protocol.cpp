#include "common/protocol.h"

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>
#include <zstd.h>

#include <cstring>
#include <memory>
#include <stdexcept>

#include "common/schema/faultline.capnp.h"
#include "common/wire_detail.h"

namespace faultline::common {

std::string encodeAck(const Ack& ack) {
  std::string out = ack.agent_id;
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((ack.sequence >> (8 * i)) & 0xff));
  return out;
}

std::optional<Ack> decodeAck(std::string_view payload) {
  if (payload.size() < 8 || payload.size() > 8 + 256) return std::nullopt;
  Ack ack;
  ack.agent_id = std::string(payload.substr(0, payload.size() - 8));
  auto tail = payload.substr(payload.size() - 8);
  for (int i = 0; i < 8; ++i) ack.sequence |= static_cast<uint64_t>(static_cast<uint8_t>(tail[i])) << (8 * i);
  return ack;
}

std::string compressZstd(std::string_view data, int level) {
  std::string out(ZSTD_compressBound(data.size()), '\0');
  size_t n = ZSTD_compress(out.data(), out.size(), data.data(), data.size(), level);
  // Compressing into a buffer of compressBound() bytes cannot fail short of a bad level.
  if (ZSTD_isError(n)) return {};
  out.resize(n);
  return out;
}

std::optional<std::string> decompressZstd(std::string_view data, size_t max_bytes, std::string* reason) {
  if (data.size() < 4 || data.substr(0, 4) != std::string_view("\x28\xb5\x2f\xfd", 4)) {
    *reason = "not zstd";
    return std::nullopt;
  }
  // A frame header may claim any content size and window: both are checked against our bounds
  // before anything that large is allocated, and the output grows only with what is produced.
  unsigned long long claimed = ZSTD_getFrameContentSize(data.data(), data.size());
  if (claimed == ZSTD_CONTENTSIZE_ERROR) {
    *reason = "corrupt zstd header";
    return std::nullopt;
  }
  if (claimed != ZSTD_CONTENTSIZE_UNKNOWN && claimed > max_bytes) {
    *reason = "zstd frame claims " + std::to_string(claimed) + " bytes, over " + std::to_string(max_bytes);
    return std::nullopt;
  }
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> dctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!dctx) {
    *reason = "zstd: out of memory";
    return std::nullopt;
  }
  ZSTD_DCtx_setParameter(dctx.get(), ZSTD_d_windowLogMax, 24);  // 16 MiB window at most
  std::string out;
  out.resize(std::min<size_t>(max_bytes, claimed != ZSTD_CONTENTSIZE_UNKNOWN ? static_cast<size_t>(claimed)
                                                                              : std::max<size_t>(data.size() * 4, 4096)));
  ZSTD_inBuffer in{data.data(), data.size(), 0};
  size_t produced = 0;
  while (true) {
    if (produced == out.size()) {
      // The output is full and the frames are not finished: grow, up to the limit.
      if (out.size() >= max_bytes) {
        *reason = "zstd payload exceeds " + std::to_string(max_bytes) + " bytes";
        return std::nullopt;
      }
      out.resize(std::min(max_bytes, std::max<size_t>(out.size() * 2, 4096)));
    }
    ZSTD_outBuffer o{out.data() + produced, out.size() - produced, 0};
    size_t last = ZSTD_decompressStream(dctx.get(), &o, &in);
    produced += o.pos;
    if (ZSTD_isError(last)) {
      *reason = std::string("corrupt zstd: ") + ZSTD_getErrorName(last);
      return std::nullopt;
    }
    if (last == 0 && in.pos == in.size) break;  // every frame complete
    if (in.pos == in.size && o.pos < o.size) {
      *reason = "truncated zstd";
      return std::nullopt;
    }
  }
  out.resize(produced);
  return out;
}

bool unwrapPayload(std::string_view type, std::string_view payload, UnwrappedPayload* out, std::string* reason,
                   size_t max_bytes) {
  out->inflated.clear();
  if (type.size() > kZstdSuffix.size() && type.substr(type.size() - kZstdSuffix.size()) == kZstdSuffix) {
    out->type = type.substr(0, type.size() - kZstdSuffix.size());
    auto plain = decompressZstd(payload, max_bytes, reason);
    if (!plain) return false;
    out->inflated = std::move(*plain);
    out->payload = out->inflated;
    return true;
  }
  out->type = type;
  out->payload = payload;
  return true;
}

uint64_t inventoryHash(const NodeInventory& inv) {
  // FNV-1a over length-prefixed fields: stable across builds and platforms.
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](std::string_view s) {
    uint64_t n = s.size();
    for (int i = 0; i < 8; ++i) {
      h ^= (n >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
  };
  for (const auto& g : inv.gpus) {
    mix("gpu");
    mix(std::to_string(g.index));
    mix(g.pci_bus_id);
    mix(g.uuid);
    mix(g.serial);
  }
  for (const auto& p : inv.hcas) {
    mix("hca");
    mix(p.name);
    mix(p.pci_address);
    mix(std::to_string(p.port));
    mix(p.state);
    mix(p.link_layer);
  }
  mix(inv.gpu_error);
  mix(inv.hca_error);
  for (const auto& a : inv.addresses) {
    mix("addr");
    mix(a);
  }
  return h == 0 ? 1 : h;
}

std::string encodeHeartbeat(const HeartbeatData& hb) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Heartbeat>();
  root.setAgentId(hb.agent_id);
  root.setHostname(hb.hostname);
  root.setBootId(hb.boot_id);
  root.setAgentVersion(hb.agent_version);
  root.setRulesetVersion(hb.ruleset_version);
  root.setCreatedNs(hb.created_ns);
  root.setStartedNs(hb.started_ns);
  root.setSpoolBatches(hb.spool_batches);
  root.setSpoolBytes(hb.spool_bytes);
  root.setDroppedSymptoms(hb.dropped_symptoms);
  root.setNextSequence(hb.next_sequence);
  root.setInventoryHash(hb.inventory_hash);
  if (hb.inventory) {
    const auto& inv = *hb.inventory;
    auto b = root.initInventory();
    b.setCollectedNs(inv.collected_ns);
    b.setGpuError(inv.gpu_error);
    b.setHcaError(inv.hca_error);
    auto gpus = b.initGpus(static_cast<unsigned>(inv.gpus.size()));
    for (unsigned i = 0; i < inv.gpus.size(); ++i) {
      gpus[i].setIndex(inv.gpus[i].index);
      gpus[i].setPciBusId(inv.gpus[i].pci_bus_id);
      gpus[i].setUuid(inv.gpus[i].uuid);
      gpus[i].setSerial(inv.gpus[i].serial);
    }
    auto hcas = b.initHcas(static_cast<unsigned>(inv.hcas.size()));
    for (unsigned i = 0; i < inv.hcas.size(); ++i) {
      hcas[i].setName(inv.hcas[i].name);
      hcas[i].setPciAddress(inv.hcas[i].pci_address);
      hcas[i].setPort(inv.hcas[i].port);
      hcas[i].setState(inv.hcas[i].state);
      hcas[i].setLinkLayer(inv.hcas[i].link_layer);
    }
    auto addrs = b.initAddresses(static_cast<unsigned>(inv.addresses.size()));
    for (unsigned i = 0; i < inv.addresses.size(); ++i) addrs.set(i, inv.addresses[i]);
  }
  auto srcs = root.initSources(static_cast<unsigned>(hb.sources.size()));
  for (unsigned i = 0; i < hb.sources.size(); ++i) {
    const auto& s = hb.sources[i];
    auto b = srcs[i];
    b.setNode(hb.node);
    b.setSource(s.name);
    b.setFormat(s.format);
    b.setRecords(s.records);
    b.setSkipped(s.skipped);
    b.setStatus(s.status);
    b.setReason(s.reason);
    b.setLost(s.lost);
    b.setLagNs(s.lag_ns);
  }
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  auto bytes = out.getArray();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

std::optional<HeartbeatData> decodeHeartbeat(std::string_view payload, std::string* reason) {
  HeartbeatData hb;
  const DecodeLimits limits{.max_bytes = kMaxHeartbeatBytes, .traversal_words = kHeartbeatTraversalWords, .nesting = 64};
  bool ok = wire_detail::readPacked<schema::Heartbeat>(payload.data(), payload.size(), limits, reason, [&](auto root) {
    // As in decodeBatch (common/wire.cpp): a NUL inside a Text would read back cut once stored.
    auto text = [](capnp::Text::Reader t) {
      if (std::memchr(t.begin(), '\0', t.size()) != nullptr) throw std::runtime_error("NUL in text");
      std::string_view v(t.cStr(), t.size());
      return wire_detail::validUtf8(v) ? std::string(v) : wire_detail::repairUtf8(v);
    };
    hb.agent_id = text(root.getAgentId());
    hb.hostname = text(root.getHostname());
    hb.boot_id = text(root.getBootId());
    hb.agent_version = text(root.getAgentVersion());
    hb.ruleset_version = text(root.getRulesetVersion());
    hb.created_ns = root.getCreatedNs();
    hb.started_ns = root.getStartedNs();
    hb.spool_batches = root.getSpoolBatches();
    hb.spool_bytes = root.getSpoolBytes();
    hb.dropped_symptoms = root.getDroppedSymptoms();
    hb.next_sequence = root.getNextSequence();
    hb.inventory_hash = root.getInventoryHash();
    if (root.hasInventory()) {
      auto r = root.getInventory();
      NodeInventory inv;
      inv.collected_ns = r.getCollectedNs();
      inv.gpu_error = text(r.getGpuError());
      inv.hca_error = text(r.getHcaError());
      wire_detail::checkListSize(r.getGpus(), limits.max_node_list, "gpus");
      wire_detail::checkListSize(r.getHcas(), limits.max_node_list, "hcas");
      wire_detail::checkListSize(r.getAddresses(), limits.max_node_list, "addresses");
      for (auto g : r.getGpus())
        inv.gpus.push_back({g.getIndex(), text(g.getPciBusId()), text(g.getUuid()), text(g.getSerial())});
      for (auto p : r.getHcas())
        inv.hcas.push_back({text(p.getName()), text(p.getPciAddress()), p.getPort(), text(p.getState()),
                            text(p.getLinkLayer())});
      for (auto a : r.getAddresses()) inv.addresses.push_back(text(a));
      hb.inventory = std::move(inv);
    }
    wire_detail::checkListSize(root.getSources(), limits.max_node_list, "sources");
    for (auto s : root.getSources()) {
      SourceHealth h;
      hb.node = text(s.getNode());
      h.name = text(s.getSource());
      h.format = text(s.getFormat());
      h.records = s.getRecords();
      h.skipped = s.getSkipped();
      h.status = text(s.getStatus());
      h.reason = text(s.getReason());
      h.lost = s.getLost();
      h.lag_ns = s.getLagNs();
      hb.sources.push_back(std::move(h));
    }
  });
  if (!ok) return std::nullopt;
  return hb;
}

}  // namespace faultline::common

#include "common/protocol.h"

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include "common/schema/faultline.capnp.h"

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
  if (payload.empty() || payload.size() > (1 << 20)) {
    *reason = payload.empty() ? "empty" : "too large";
    return std::nullopt;
  }
  HeartbeatData hb;
  try {
    kj::ArrayInputStream in(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(payload.data()), payload.size()));
    capnp::ReaderOptions opts;
    opts.traversalLimitInWords = 1 << 20;
    capnp::PackedMessageReader message(in, opts);
    auto root = message.getRoot<schema::Heartbeat>();
    hb.agent_id = root.getAgentId();
    hb.hostname = root.getHostname();
    hb.boot_id = root.getBootId();
    hb.agent_version = root.getAgentVersion();
    hb.ruleset_version = root.getRulesetVersion();
    hb.created_ns = root.getCreatedNs();
    hb.started_ns = root.getStartedNs();
    hb.spool_batches = root.getSpoolBatches();
    hb.spool_bytes = root.getSpoolBytes();
    hb.dropped_symptoms = root.getDroppedSymptoms();
    hb.next_sequence = root.getNextSequence();
    for (auto s : root.getSources()) {
      SourceHealth h;
      hb.node = s.getNode();
      h.name = s.getSource();
      h.format = s.getFormat();
      h.records = s.getRecords();
      h.skipped = s.getSkipped();
      h.status = s.getStatus();
      h.reason = s.getReason();
      h.lost = s.getLost();
      h.lag_ns = s.getLagNs();
      hb.sources.push_back(std::move(h));
    }
  } catch (const kj::Exception& e) {
    *reason = std::string("malformed: ") + e.getDescription().cStr();
    return std::nullopt;
  }
  return hb;
}

}  // namespace faultline::common

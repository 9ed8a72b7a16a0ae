// Helpers for the wire compatibility tests: an "old agent" that writes messages with the frozen v1
// schema (tests/compat/faultline_v1.capnp), the values it sends, and schema-driven comparisons of
// the same bytes read through two schema versions (capnp's dynamic API, field by field, by name).
#pragma once

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include <catch2/catch.hpp>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/protocol.h"
#include "common/schema/faultline.capnp.h"
#include "common/wire.h"
#include "tests/compat/faultline_v1.capnp.h"

namespace faultline::compat::testing {

namespace v1 = faultline::schema_v1;
namespace now = faultline::schema;

inline constexpr int64_t kT0 = 1'717'236'000'000'000'000;  // 2024-06-01T10:00:00Z
inline constexpr int64_t kSec = 1'000'000'000;
inline constexpr const char* kHost = "gpu-v1";
inline constexpr const char* kAgentId = "agent-gpu-v1";

// The batch an agent of wire version 1 sends in these tests. Every field that SymptomBatch v1
// has is set somewhere (enums to non-zero values in at least one symptom). FROZEN together with
// tests/compat/v1_batch.bin: change a value only by regenerating that file (see golden_test.cpp).
// A current agent's batch: v1Batch() with what was appended since (issue 30's unmatched
// templates), every field set.
inline common::SymptomBatchData v1Batch();
inline common::SymptomBatchData currentBatch() {
  common::SymptomBatchData b = v1Batch();
  b.unmatched = {{"cannot reconcile ledger <HEX>: quorum failure", 3, "cannot reconcile ledger 0x3f2a: quorum failure",
                  kT0 + 2 * kSec, true, common::SourceKind::kJournal},
                 {"Traceback (most recent call last):", 1, "Traceback (most recent call last):", kT0 + 9 * kSec, false,
                  common::SourceKind::kApplication}};
  b.unmatched_left_out = 2;
  b.unmatched_lines_left_out = 17;
  return b;
}

inline common::SymptomBatchData v1Batch() {
  common::SymptomBatchData b;
  b.header = {kAgentId,         kHost,          "3f2a9c1e-6b0d-4e57-9a1c-v1boot", 17, "0.1.0",
              "0.1.0+rules.v1", kT0 + 90 * kSec};
  common::Symptom xid;
  xid.rule_id = "gpu.xid.79";
  xid.symptom = "gpu_fallen_off_bus";
  xid.sub_domain = common::SubDomain::kHardware;
  xid.category = "gpu";
  xid.role = common::Role::kRoot;
  xid.severity = common::Severity::kCritical;
  xid.node = kHost;
  xid.device = "0000:3b:00.0";
  xid.source = "kmsg";
  xid.source_kind = common::SourceKind::kKernel;
  xid.first_ns = kT0;
  xid.last_ns = kT0 + 5 * kSec;
  xid.time_known = true;
  xid.count = 3;
  xid.evidence = {"NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.",
                  "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
                  "NVRM: Xid (PCI:0000:3b:00): 79, pid=4243, GPU has fallen off the bus."};
  xid.fields = {{"xid", "79"}, {"pci", "0000:3b:00"}, {"pid", "4242"}};
  xid.summary = "GPU 0000:3b:00.0 fell off the bus";
  xid.boot_id = b.header.boot_id;
  common::Symptom link = xid;
  link.rule_id = "net.ib.port_down";
  link.symptom = "ib_port_down";
  link.sub_domain = common::SubDomain::kNetwork;
  link.category = "infiniband";
  link.role = common::Role::kCascade;
  link.severity = common::Severity::kError;
  link.fallback_root = true;
  link.device = "mlx5_0/1";
  link.source = "journal";
  link.source_kind = common::SourceKind::kJournal;
  link.first_ns = link.last_ns = kT0 + 7 * kSec;
  link.count = 1;
  link.evidence = {"mlx5_core 0000:0c:00.0: Port module event: module 0, Cable unplugged"};
  link.fields = {{"port", "1"}};
  link.summary = "IB port mlx5_0/1 went down";
  common::Symptom untimed = link;
  untimed.rule_id = "app.nccl.timeout";
  untimed.symptom = "nccl_watchdog_timeout";
  untimed.sub_domain = common::SubDomain::kApplication;
  untimed.category = "nccl";
  untimed.role = common::Role::kContext;
  untimed.severity = common::Severity::kWarning;
  untimed.fallback_root = false;
  untimed.device = "";
  untimed.source = "/var/log/train/rank0.log";
  untimed.source_kind = common::SourceKind::kApplication;
  untimed.first_ns = untimed.last_ns = 0;
  untimed.time_known = false;
  untimed.count = 2;
  untimed.evidence = {"[Rank 0] Watchdog caught collective operation timeout"};
  untimed.fields = {{"rank", "0"}};
  untimed.summary = "NCCL watchdog timeout on rank 0";
  b.symptoms = {xid, link, untimed};
  b.sources = {{kHost, "kmsg", "kmsg", 1200, 4, "partial", "ring buffer overrun"},
               {kHost, "journal", "journal", 5000, 0, "ok", ""}};
  return b;
}

// The heartbeat of the same agent (v1 has no inventory; `with_inventory` adds the fields the
// current schema appended, for the new-agent direction).
inline common::HeartbeatData sampleHeartbeat(bool with_inventory) {
  common::HeartbeatData hb;
  hb.agent_id = kAgentId;
  hb.hostname = kHost;
  hb.node = kHost;
  hb.boot_id = "3f2a9c1e-6b0d-4e57-9a1c-v1boot";
  hb.agent_version = "0.1.0";
  hb.ruleset_version = "0.1.0+rules.v1";
  hb.created_ns = kT0 + 95 * kSec;
  hb.started_ns = kT0 - 3600 * kSec;
  common::SourceHealth kmsg{"kmsg", "kmsg", "partial", "ring buffer overrun",
                            1200,   4,      7,         250'000'000};
  common::SourceHealth journal{"journal", "journal", "ok", "", 5000, 0, 0, 40'000'000};
  hb.sources = {kmsg, journal};
  hb.spool_batches = 2;
  hb.spool_bytes = 4096;
  hb.dropped_symptoms = 5;
  hb.next_sequence = 18;
  if (with_inventory) {
    common::NodeInventory inv;
    inv.collected_ns = kT0 - 60 * kSec;
    inv.gpus = {{0, "0000:18:00.0", "GPU-9f3a2c11-0e7b-4c3d-8a21-5b6f0d2e9c41", "1650922021234"},
                {6, "0000:ba:00.0", "GPU-00060022-b315-5df5-155d-0022b3155df5", "1650922021240"}};
    inv.hcas = {{"mlx5_0", "0000:0c:00.0", 1, "ACTIVE", "InfiniBand"},
                {"mlx5_1", "0000:1f:00.0", 1, "DOWN", "Ethernet"}};
    inv.gpu_error = "GPU 7: nvidia-smi reported [Unknown Error]";
    inv.hca_error = "mlx5_9: no device link";
    inv.addresses = {"10.0.0.18", "fd00::18"};
    hb.inventory_hash = common::inventoryHash(inv);
    hb.inventory = std::move(inv);
  }
  return hb;
}

// What a v1 agent's encoder wrote (the shape of common::encodeBatch at that version).
// SourceStatus.lost/lagNs exist in v1 but common::CoverageEntry has no such fields: they get
// fixed non-zero values so the message holds every v1 field.
inline void writeV1(const common::SymptomBatchData& batch, v1::SymptomBatch::Builder b) {
  const auto& h = batch.header;
  b.setAgentId(h.agent_id);
  b.setHostname(h.hostname);
  b.setBootId(h.boot_id);
  b.setSequence(h.sequence);
  b.setAgentVersion(h.agent_version);
  b.setRulesetVersion(h.ruleset_version);
  b.setCreatedNs(h.created_ns);
  auto list = b.initSymptoms(static_cast<unsigned>(batch.symptoms.size()));
  for (unsigned i = 0; i < list.size(); ++i) {
    const auto& s = batch.symptoms[i];
    auto o = list[i];
    o.setRuleId(s.rule_id);
    o.setSymptom(s.symptom);
    o.setSubDomain(static_cast<v1::SubDomain>(s.sub_domain));
    o.setCategory(s.category);
    o.setRole(static_cast<v1::Role>(s.role));
    o.setSeverity(static_cast<v1::Severity>(s.severity));
    o.setNode(s.node);
    o.setDevice(s.device);
    o.setSource(s.source);
    o.setFirstNs(s.first_ns);
    o.setLastNs(s.last_ns);
    o.setTimeKnown(s.time_known);
    o.setCount(s.count);
    auto ev = o.initEvidence(static_cast<unsigned>(s.evidence.size()));
    for (unsigned k = 0; k < ev.size(); ++k) ev.set(k, s.evidence[k]);
    auto fields = o.initFields(static_cast<unsigned>(s.fields.size()));
    unsigned k = 0;
    for (const auto& [key, value] : s.fields) {
      fields[k].setKey(key);
      fields[k++].setValue(value);
    }
    o.setSummary(s.summary);
    o.setBootId(s.boot_id);
    o.setFallbackRoot(s.fallback_root);
    o.setSourceKind(std::string(common::sourceKindName(s.source_kind)));
  }
  auto srcs = b.initSources(static_cast<unsigned>(batch.sources.size()));
  for (unsigned i = 0; i < srcs.size(); ++i) {
    const auto& c = batch.sources[i];
    srcs[i].setNode(c.node);
    srcs[i].setSource(c.source);
    srcs[i].setFormat(c.format);
    srcs[i].setRecords(c.records);
    srcs[i].setSkipped(c.skipped);
    srcs[i].setStatus(c.status);
    srcs[i].setReason(c.reason);
    srcs[i].setLost(i + 1);
    srcs[i].setLagNs((i + 1) * 1'000'000);
  }
}

inline void writeV1(const common::HeartbeatData& hb, v1::Heartbeat::Builder b) {
  b.setAgentId(hb.agent_id);
  b.setHostname(hb.hostname);
  b.setBootId(hb.boot_id);
  b.setAgentVersion(hb.agent_version);
  b.setRulesetVersion(hb.ruleset_version);
  b.setCreatedNs(hb.created_ns);
  b.setStartedNs(hb.started_ns);
  b.setSpoolBatches(hb.spool_batches);
  b.setSpoolBytes(hb.spool_bytes);
  b.setDroppedSymptoms(hb.dropped_symptoms);
  b.setNextSequence(hb.next_sequence);
  auto srcs = b.initSources(static_cast<unsigned>(hb.sources.size()));
  for (unsigned i = 0; i < srcs.size(); ++i) {
    const auto& s = hb.sources[i];
    srcs[i].setNode(hb.node);
    srcs[i].setSource(s.name);
    srcs[i].setFormat(s.format);
    srcs[i].setRecords(s.records);
    srcs[i].setSkipped(s.skipped);
    srcs[i].setStatus(s.status);
    srcs[i].setReason(s.reason);
    srcs[i].setLost(s.lost);
    srcs[i].setLagNs(s.lag_ns);
  }
}

// Packed bytes of a message, as common/wire.cpp writes them.
inline std::string pack(capnp::MessageBuilder& message) {
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  auto bytes = out.getArray();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

template <typename V1Root, typename Data>
std::string packV1(const Data& data) {
  capnp::MallocMessageBuilder message;
  writeV1(data, message.initRoot<V1Root>());
  return pack(message);
}

// Reads packed bytes with given limits. `bytes` must outlive the object.
class PackedReader {
 public:
  explicit PackedReader(std::string_view bytes, capnp::ReaderOptions options = {})
      : in_(kj::ArrayPtr<const kj::byte>(reinterpret_cast<const kj::byte*>(bytes.data()),
                                         bytes.size())),
        reader_(in_, options) {}
  template <typename T>
  typename T::Reader root() {
    return reader_.getRoot<T>();
  }

 private:
  kj::ArrayInputStream in_;
  capnp::PackedMessageReader reader_;
};

// The aggregator's read limits for each message, as capnp::ReaderOptions.
inline capnp::ReaderOptions batchLimits() {
  common::DecodeLimits l;
  capnp::ReaderOptions o;
  o.traversalLimitInWords = l.traversal_words;
  o.nestingLimit = l.nesting;
  return o;
}
inline capnp::ReaderOptions heartbeatLimits() {
  capnp::ReaderOptions o;
  o.traversalLimitInWords = common::kHeartbeatTraversalWords;
  return o;
}

// ---- Schema-driven comparison ------------------------------------------------------------------

inline void diffStructs(capnp::DynamicStruct::Reader older, capnp::DynamicStruct::Reader newer,
                        const std::string& path, bool newer_only_at_default,
                        std::vector<std::string>* out);

inline void diffValues(capnp::DynamicValue::Reader a, capnp::DynamicValue::Reader b,
                       const std::string& path, bool newer_only_at_default,
                       std::vector<std::string>* out) {
  if (a.getType() != b.getType()) {
    out->push_back(path + ": different types");
    return;
  }
  bool same = true;
  switch (a.getType()) {
    case capnp::DynamicValue::VOID:
      break;
    case capnp::DynamicValue::BOOL:
      same = a.as<bool>() == b.as<bool>();
      break;
    case capnp::DynamicValue::INT:
      same = a.as<int64_t>() == b.as<int64_t>();
      break;
    case capnp::DynamicValue::UINT:
      same = a.as<uint64_t>() == b.as<uint64_t>();
      break;
    case capnp::DynamicValue::FLOAT:
      same = a.as<double>() == b.as<double>();
      break;
    case capnp::DynamicValue::TEXT:
      same = a.as<capnp::Text>() == b.as<capnp::Text>();
      break;
    case capnp::DynamicValue::DATA:
      same = a.as<capnp::Data>() == b.as<capnp::Data>();
      break;
    case capnp::DynamicValue::ENUM:
      same = a.as<capnp::DynamicEnum>().getRaw() == b.as<capnp::DynamicEnum>().getRaw();
      break;
    case capnp::DynamicValue::STRUCT:
      diffStructs(a.as<capnp::DynamicStruct>(), b.as<capnp::DynamicStruct>(), path + ".",
                  newer_only_at_default, out);
      break;
    case capnp::DynamicValue::LIST: {
      auto la = a.as<capnp::DynamicList>(), lb = b.as<capnp::DynamicList>();
      if (la.size() != lb.size()) {
        out->push_back(path + ": " + std::to_string(la.size()) + " vs " +
                       std::to_string(lb.size()) + " elements");
        break;
      }
      for (unsigned i = 0; i < la.size(); ++i)
        diffValues(la[i], lb[i], path + "[" + std::to_string(i) + "]", newer_only_at_default, out);
      break;
    }
    default:
      out->push_back(path + ": a type these tests do not compare");
      break;
  }
  if (!same) out->push_back(path + ": differs");
}

// Every field of `older`'s schema compared, by name and recursively, with the same field of
// `newer` (the same bytes read through another schema version); appends "path: why" for each
// difference. With newer_only_at_default, fields only `newer`'s schema has must hold their
// default (what an old writer leaves them at).
inline void diffStructs(capnp::DynamicStruct::Reader older, capnp::DynamicStruct::Reader newer,
                        const std::string& path, bool newer_only_at_default,
                        std::vector<std::string>* out) {
  for (auto f : older.getSchema().getFields()) {
    std::string name = f.getProto().getName();
    KJ_IF_MAYBE (nf, newer.getSchema().findFieldByName(f.getProto().getName())) {
      if (older.has(f) != newer.has(*nf))
        out->push_back(path + name + ": set in one version only");
      else if (older.has(f))
        diffValues(older.get(f), newer.get(*nf), path + name, newer_only_at_default, out);
    } else {
      out->push_back(path + name + ": missing from the newer schema");
    }
  }
  if (!newer_only_at_default) return;
  for (auto f : newer.getSchema().getFields())
    if (older.getSchema().findFieldByName(f.getProto().getName()) == nullptr &&
        newer.has(f, capnp::HasMode::NON_DEFAULT))
      out->push_back(path + f.getProto().getName().cStr() + ": newer field not at its default");
}

namespace detail {
inline void collectFields(capnp::DynamicStruct::Reader r, const std::string& path,
                          std::set<std::string>* all, std::set<std::string>* set) {
  for (auto f : r.getSchema().getFields()) {
    std::string p = path + f.getProto().getName().cStr();
    all->insert(p);
    if (!r.has(f, capnp::HasMode::NON_DEFAULT)) continue;
    auto v = r.get(f);
    if (v.getType() == capnp::DynamicValue::TEXT && v.as<capnp::Text>().size() == 0) continue;
    if (v.getType() == capnp::DynamicValue::LIST && v.as<capnp::DynamicList>().size() == 0)
      continue;
    set->insert(p);
    if (v.getType() == capnp::DynamicValue::STRUCT)
      collectFields(v.as<capnp::DynamicStruct>(), p + ".", all, set);
    if (v.getType() == capnp::DynamicValue::LIST)
      for (auto e : v.as<capnp::DynamicList>())
        if (e.getType() == capnp::DynamicValue::STRUCT)
          collectFields(e.as<capnp::DynamicStruct>(), p + "[].", all, set);
  }
}
}  // namespace detail

// The fields of a message (paths like "symptoms[].role") that hold their default value (empty
// text or list, 0, false, the first enumerant) everywhere: in every element of a list. Empty when
// the message exercises its whole schema.
inline std::set<std::string> unsetFields(capnp::DynamicStruct::Reader root) {
  std::set<std::string> all, set, unset;
  detail::collectFields(root, "", &all, &set);
  for (const auto& p : all)
    if (!set.count(p)) unset.insert(p);
  return unset;
}

// ---- Decoded values
// ------------------------------------------------------------------------------

inline void checkSame(const common::Symptom& got, const common::Symptom& want) {
  INFO("symptom " << want.rule_id);
  CHECK(got.rule_id == want.rule_id);
  CHECK(got.symptom == want.symptom);
  CHECK(got.sub_domain == want.sub_domain);
  CHECK(got.category == want.category);
  CHECK(got.role == want.role);
  CHECK(got.severity == want.severity);
  CHECK(got.fallback_root == want.fallback_root);
  CHECK(got.node == want.node);
  CHECK(got.device == want.device);
  CHECK(got.source == want.source);
  CHECK(got.source_kind == want.source_kind);
  CHECK(got.first_ns == want.first_ns);
  CHECK(got.last_ns == want.last_ns);
  CHECK(got.time_known == want.time_known);
  CHECK(got.count == want.count);
  CHECK(got.evidence == want.evidence);
  CHECK(got.fields == want.fields);
  CHECK(got.summary == want.summary);
  CHECK(got.boot_id == want.boot_id);
}

inline void checkSame(const common::SymptomBatchData& got, const common::SymptomBatchData& want) {
  CHECK(got.header.agent_id == want.header.agent_id);
  CHECK(got.header.hostname == want.header.hostname);
  CHECK(got.header.boot_id == want.header.boot_id);
  CHECK(got.header.sequence == want.header.sequence);
  CHECK(got.header.agent_version == want.header.agent_version);
  CHECK(got.header.ruleset_version == want.header.ruleset_version);
  CHECK(got.header.created_ns == want.header.created_ns);
  REQUIRE(got.symptoms.size() == want.symptoms.size());
  for (size_t i = 0; i < want.symptoms.size(); ++i) checkSame(got.symptoms[i], want.symptoms[i]);
  REQUIRE(got.sources.size() == want.sources.size());
  for (size_t i = 0; i < want.sources.size(); ++i) {
    INFO("source " << want.sources[i].source);
    CHECK(got.sources[i].node == want.sources[i].node);
    CHECK(got.sources[i].source == want.sources[i].source);
    CHECK(got.sources[i].format == want.sources[i].format);
    CHECK(got.sources[i].records == want.sources[i].records);
    CHECK(got.sources[i].skipped == want.sources[i].skipped);
    CHECK(got.sources[i].status == want.sources[i].status);
    CHECK(got.sources[i].reason == want.sources[i].reason);
  }
  // Appended after v1 (issue 30): none from a v1 agent.
  REQUIRE(got.unmatched.size() == want.unmatched.size());
  for (size_t i = 0; i < want.unmatched.size(); ++i) {
    INFO("unmatched template " << want.unmatched[i].text);
    CHECK(got.unmatched[i].text == want.unmatched[i].text);
    CHECK(got.unmatched[i].count == want.unmatched[i].count);
    CHECK(got.unmatched[i].first_line == want.unmatched[i].first_line);
    CHECK(got.unmatched[i].first_ns == want.unmatched[i].first_ns);
    CHECK(got.unmatched[i].time_known == want.unmatched[i].time_known);
    CHECK(got.unmatched[i].kind == want.unmatched[i].kind);
  }
  CHECK(got.unmatched_left_out == want.unmatched_left_out);
  CHECK(got.unmatched_lines_left_out == want.unmatched_lines_left_out);
}

inline void checkSame(const common::HeartbeatData& got, const common::HeartbeatData& want) {
  CHECK(got.agent_id == want.agent_id);
  CHECK(got.hostname == want.hostname);
  CHECK(got.node == want.node);
  CHECK(got.boot_id == want.boot_id);
  CHECK(got.agent_version == want.agent_version);
  CHECK(got.ruleset_version == want.ruleset_version);
  CHECK(got.created_ns == want.created_ns);
  CHECK(got.started_ns == want.started_ns);
  CHECK(got.spool_batches == want.spool_batches);
  CHECK(got.spool_bytes == want.spool_bytes);
  CHECK(got.dropped_symptoms == want.dropped_symptoms);
  CHECK(got.next_sequence == want.next_sequence);
  REQUIRE(got.sources.size() == want.sources.size());
  for (size_t i = 0; i < want.sources.size(); ++i) {
    INFO("source " << want.sources[i].name);
    CHECK(got.sources[i].name == want.sources[i].name);
    CHECK(got.sources[i].format == want.sources[i].format);
    CHECK(got.sources[i].status == want.sources[i].status);
    CHECK(got.sources[i].reason == want.sources[i].reason);
    CHECK(got.sources[i].records == want.sources[i].records);
    CHECK(got.sources[i].skipped == want.sources[i].skipped);
    CHECK(got.sources[i].lost == want.sources[i].lost);
    CHECK(got.sources[i].lag_ns == want.sources[i].lag_ns);
  }
  CHECK(got.inventory_hash == want.inventory_hash);
  REQUIRE(got.inventory.has_value() == want.inventory.has_value());
  if (want.inventory) {
    CHECK(got.inventory->collected_ns == want.inventory->collected_ns);
    CHECK(got.inventory->sameDevices(*want.inventory));
  }
}

}  // namespace faultline::compat::testing

#include "common/wire.h"

#include <capnp/message.h>
#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include <cstring>

#include "common/wire_detail.h"

namespace faultline::common {

namespace {

schema::Role toWire(Role r) { return static_cast<schema::Role>(static_cast<uint16_t>(r)); }
schema::SubDomain toWire(SubDomain d) { return static_cast<schema::SubDomain>(static_cast<uint16_t>(d)); }
schema::Severity toWire(Severity s) { return static_cast<schema::Severity>(static_cast<uint16_t>(s)); }

}  // namespace

namespace wire_detail {

namespace {

// Length of the well-formed UTF-8 sequence at s[i], 0 when there is none.
size_t sequenceAt(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) return 1;
  const size_t n = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : c >= 0xC2 ? 1 : 0;
  if (n == 0 || c > 0xF4 || i + n >= s.size()) return 0;  // bytes i+1 .. i+n must exist
  const auto c1 = static_cast<unsigned char>(s[i + 1]);
  if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 > 0x8F))
    return 0;  // overlong, surrogate, past U+10FFFF
  for (size_t k = 1; k <= n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
  return n + 1;
}

}  // namespace

bool validUtf8(std::string_view s) {
  for (size_t i = 0, n; i < s.size(); i += n)
    if ((n = sequenceAt(s, i)) == 0) return false;
  return true;
}

std::string repairUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    size_t n = sequenceAt(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string TextReader::operator()(capnp::Text::Reader t, const char* what) const {
  if (t.size() > limits.max_text) throw std::runtime_error(std::string("oversized ") + what);
  // A Cap'n Proto Text may hold a NUL before its terminator; as a std::string it would then
  // mean one thing here and another (cut at the NUL) once re-encoded or bound as a C string,
  // so no consumer of a decoded message ever sees one (found by tests/fuzz/fuzz_decode.cpp).
  if (std::memchr(t.begin(), '\0', t.size()) != nullptr) throw std::runtime_error("NUL in text");
  std::string_view v(t.cStr(), t.size());
  return validUtf8(v) ? std::string(v) : repairUtf8(v);
}

std::string packToString(capnp::MessageBuilder& message) {
  kj::VectorOutputStream out;
  capnp::writePackedMessage(out, message);
  auto bytes = out.getArray();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

void fillSymptom(schema::Symptom::Builder b, const Symptom& s) {
  b.setRuleId(s.rule_id);
  b.setSymptom(s.symptom);
  b.setSubDomain(toWire(s.sub_domain));
  b.setCategory(s.category);
  b.setRole(toWire(s.role));
  b.setSeverity(toWire(s.severity));
  b.setNode(s.node);
  b.setDevice(s.device);
  b.setSource(s.source);
  b.setFirstNs(s.first_ns);
  b.setLastNs(s.last_ns);
  b.setTimeKnown(s.time_known);
  b.setCount(s.count);
  auto ev = b.initEvidence(static_cast<unsigned>(s.evidence.size()));
  for (size_t i = 0; i < s.evidence.size(); ++i) ev.set(static_cast<unsigned>(i), s.evidence[i]);
  auto fields = b.initFields(static_cast<unsigned>(s.fields.size()));
  unsigned i = 0;
  for (const auto& [k, v] : s.fields) {
    fields[i].setKey(k);
    fields[i].setValue(v);
    ++i;
  }
  b.setSummary(s.summary);
  b.setBootId(s.boot_id);
  b.setFallbackRoot(s.fallback_root);
  b.setSourceKind(std::string(sourceKindName(s.source_kind)));
}

Symptom readSymptom(schema::Symptom::Reader b, const TextReader& text) {
  Symptom s;
  s.rule_id = text(b.getRuleId(), "ruleId");
  if (s.rule_id.empty()) throw std::runtime_error("symptom without rule id");
  s.symptom = text(b.getSymptom(), "symptom");
  auto sd = static_cast<uint16_t>(b.getSubDomain());
  auto role = static_cast<uint16_t>(b.getRole());
  auto sev = static_cast<uint16_t>(b.getSeverity());
  if (sd > static_cast<uint16_t>(SubDomain::kApplication) || role > 3 || sev > 3)
    throw std::runtime_error("bad enum");
  s.sub_domain = static_cast<SubDomain>(sd);
  s.role = static_cast<Role>(role);
  s.severity = static_cast<Severity>(sev);
  s.category = text(b.getCategory(), "category");
  s.node = text(b.getNode(), "node");
  s.device = text(b.getDevice(), "device");
  s.source = text(b.getSource(), "source");
  s.first_ns = b.getFirstNs();
  s.last_ns = b.getLastNs();
  s.time_known = b.getTimeKnown();
  if (s.time_known && (s.first_ns < 0 || s.last_ns < s.first_ns)) throw std::runtime_error("bad timestamp");
  s.count = b.getCount();
  if (s.count == 0) throw std::runtime_error("zero count");
  for (auto e : b.getEvidence()) {
    if (s.evidence.size() >= Symptom::kMaxEvidence) break;
    s.evidence.push_back(text(e, "evidence"));
  }
  checkListSize(b.getFields(), text.limits.max_fields, "fields");
  for (auto f : b.getFields()) s.fields[text(f.getKey(), "field")] = text(f.getValue(), "field");
  s.summary = text(b.getSummary(), "summary");
  s.boot_id = text(b.getBootId(), "bootId");
  s.fallback_root = b.getFallbackRoot();
  s.source_kind = sourceKindFromName(text(b.getSourceKind(), "sourceKind"));
  return s;
}

SourceKind sourceKindFromName(std::string_view kind) {
  for (SourceKind k : {SourceKind::kKernel, SourceKind::kJournal, SourceKind::kFabricManager, SourceKind::kMetric})
    if (kind == sourceKindName(k)) return k;
  return SourceKind::kApplication;
}

}  // namespace wire_detail

using wire_detail::TextReader;

std::string encodeBatch(const SymptomBatchData& batch) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::SymptomBatch>();
  const auto& h = batch.header;
  root.setAgentId(h.agent_id);
  root.setHostname(h.hostname);
  root.setBootId(h.boot_id);
  root.setSequence(h.sequence);
  root.setAgentVersion(h.agent_version);
  root.setRulesetVersion(h.ruleset_version);
  root.setCreatedNs(h.created_ns);
  auto list = root.initSymptoms(static_cast<unsigned>(batch.symptoms.size()));
  for (size_t i = 0; i < batch.symptoms.size(); ++i)
    wire_detail::fillSymptom(list[static_cast<unsigned>(i)], batch.symptoms[i]);
  auto srcs = root.initSources(static_cast<unsigned>(batch.sources.size()));
  for (size_t i = 0; i < batch.sources.size(); ++i) {
    const auto& c = batch.sources[i];
    auto b = srcs[static_cast<unsigned>(i)];
    b.setNode(c.node);
    b.setSource(c.source);
    b.setFormat(c.format);
    b.setRecords(c.records);
    b.setSkipped(c.skipped);
    b.setStatus(c.status);
    b.setReason(c.reason);
  }
  if (!batch.unmatched.empty()) {
    auto um = root.initUnmatched(static_cast<unsigned>(batch.unmatched.size()));
    for (size_t i = 0; i < batch.unmatched.size(); ++i) {
      const auto& t = batch.unmatched[i];
      auto b = um[static_cast<unsigned>(i)];
      b.setText(t.text);
      b.setCount(t.count);
      b.setFirstLine(t.first_line);
      b.setFirstNs(t.first_ns);
      b.setTimeKnown(t.time_known);
      b.setSourceKind(std::string(sourceKindName(t.kind)));
    }
  }
  root.setUnmatchedLeftOut(batch.unmatched_left_out);
  root.setUnmatchedLinesLeftOut(batch.unmatched_lines_left_out);
  return wire_detail::packToString(message);
}

std::optional<SymptomBatchData> decodeBatch(const void* data, size_t size, std::string* reason,
                                            const DecodeLimits& limits) {
  SymptomBatchData out;
  bool ok = wire_detail::readPacked<schema::SymptomBatch>(data, size, limits, reason, [&](auto root) {
    TextReader text{limits};
    auto& h = out.header;
    h.agent_id = text(root.getAgentId(), "agentId");
    h.hostname = text(root.getHostname(), "hostname");
    h.boot_id = text(root.getBootId(), "bootId");
    h.sequence = root.getSequence();
    h.agent_version = text(root.getAgentVersion(), "agentVersion");
    h.ruleset_version = text(root.getRulesetVersion(), "rulesetVersion");
    h.created_ns = root.getCreatedNs();
    auto list = root.getSymptoms();
    if (list.size() > limits.max_symptoms) throw std::runtime_error("too many symptoms");
    for (auto b : list) out.symptoms.push_back(wire_detail::readSymptom(b, text));
    wire_detail::checkListSize(root.getSources(), limits.max_node_list, "sources");
    for (auto b : root.getSources()) {
      CoverageEntry c;
      c.node = text(b.getNode(), "node");
      c.source = text(b.getSource(), "source");
      c.format = text(b.getFormat(), "format");
      c.records = b.getRecords();
      c.skipped = b.getSkipped();
      c.status = text(b.getStatus(), "status");
      c.reason = text(b.getReason(), "reason");
      out.sources.push_back(std::move(c));
    }
    wire_detail::checkListSize(root.getUnmatched(), limits.max_unmatched, "unmatched templates");
    for (auto b : root.getUnmatched()) {
      UnmatchedTemplate t;
      t.text = text(b.getText(), "unmatched text");
      t.count = b.getCount();
      t.first_line = text(b.getFirstLine(), "unmatched line");
      t.first_ns = b.getFirstNs();
      t.time_known = b.getTimeKnown();
      if (t.count == 0) throw std::runtime_error("unmatched template without lines");
      if (t.first_ns < 0) throw std::runtime_error("bad timestamp");
      t.kind = wire_detail::sourceKindFromName(text(b.getSourceKind(), "sourceKind"));
      out.unmatched.push_back(std::move(t));
    }
    out.unmatched_left_out = root.getUnmatchedLeftOut();
    out.unmatched_lines_left_out = root.getUnmatchedLinesLeftOut();
  });
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace faultline::common

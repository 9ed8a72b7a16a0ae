#include "common/relay_wire.h"

#include <capnp/serialize-packed.h>
#include <kj/io.h>

#include "common/wire_detail.h"

namespace faultline::common {

std::string encodeRelayBatch(const RelayBatchData& batch) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::RelayBatch>();
  root.setSiteId(batch.site_id);
  root.setSequence(batch.sequence);
  root.setCreatedNs(batch.created_ns);
  root.setAggregatorVersion(batch.aggregator_version);
  root.setRulesetVersion(batch.ruleset_version);
  auto verdicts = root.initVerdicts(static_cast<unsigned>(batch.verdicts.size()));
  for (unsigned i = 0; i < verdicts.size(); ++i) {
    const auto& v = batch.verdicts[i];
    auto b = verdicts[i];
    b.setJobId(v.job_id);
    b.setState(v.state);
    b.setExitCode(v.exit_code);
    b.setStartNs(v.start_ns);
    b.setEndNs(v.end_ns);
    b.setNodelist(v.nodelist);
    b.setTimeLimitSec(v.time_limit_sec);
    b.setRevision(v.revision);
    b.setCreatedNs(v.created_ns);
    b.setStatus(v.status);
    b.setReason(v.reason);
    auto missing = b.initMissingNodes(static_cast<unsigned>(v.missing_nodes.size()));
    for (unsigned k = 0; k < missing.size(); ++k) missing.set(k, v.missing_nodes[k]);
    b.setDiagnosisJson(v.diagnosis_json);
    b.setSymptoms(v.symptoms);
    b.setConfirms(v.confirms);
  }
  auto events = root.initNodeEvents(static_cast<unsigned>(batch.node_events.size()));
  for (unsigned i = 0; i < events.size(); ++i) {
    const auto& e = batch.node_events[i];
    events[i].setNode(e.node);
    events[i].setTimeNs(e.time_ns);
    events[i].setKind(e.kind);
    events[i].setDetail(e.detail);
    events[i].setJobId(e.job_id);
  }
  auto symptoms = root.initSymptoms(static_cast<unsigned>(batch.symptoms.size()));
  for (unsigned i = 0; i < symptoms.size(); ++i) wire_detail::fillSymptom(symptoms[i], batch.symptoms[i]);
  auto live = root.initLiveNodes(static_cast<unsigned>(batch.live_nodes.size()));
  for (unsigned i = 0; i < live.size(); ++i) live.set(i, batch.live_nodes[i]);
  return wire_detail::packToString(message);
}

std::optional<RelayBatchData> decodeRelayBatch(const void* data, size_t size, std::string* reason,
                                               const DecodeLimits& limits) {
  RelayBatchData out;
  bool ok = wire_detail::readPacked<schema::RelayBatch>(data, size, limits, reason, [&](auto root) {
    wire_detail::TextReader text{limits};
    // A diagnosis of a large job (its chain, its coverage) may exceed the per-field limit of a
    // symptom's text; it is bounded by the message size instead.
    DecodeLimits big = limits;
    big.max_text = limits.max_bytes;
    wire_detail::TextReader long_text{big};
    out.site_id = text(root.getSiteId(), "siteId");
    if (out.site_id.empty()) throw std::runtime_error("missing site id");
    out.sequence = root.getSequence();
    out.created_ns = root.getCreatedNs();
    out.aggregator_version = text(root.getAggregatorVersion(), "aggregatorVersion");
    out.ruleset_version = text(root.getRulesetVersion(), "rulesetVersion");
    auto verdicts = root.getVerdicts();
    auto events = root.getNodeEvents();
    auto symptoms = root.getSymptoms();
    if (size_t(verdicts.size()) + events.size() + symptoms.size() > limits.max_symptoms)
      throw std::runtime_error("too many items");
    for (auto b : verdicts) {
      RelayVerdictData v;
      v.job_id = text(b.getJobId(), "jobId");
      if (v.job_id.empty()) throw std::runtime_error("verdict without job id");
      v.state = text(b.getState(), "state");
      v.exit_code = text(b.getExitCode(), "exitCode");
      v.start_ns = b.getStartNs();
      v.end_ns = b.getEndNs();
      if (v.start_ns < 0 || v.end_ns < 0) throw std::runtime_error("bad timestamp");
      v.nodelist = long_text(b.getNodelist(), "nodelist");
      v.time_limit_sec = b.getTimeLimitSec();
      v.revision = b.getRevision();
      if (v.revision == 0) throw std::runtime_error("bad revision");
      v.created_ns = b.getCreatedNs();
      v.status = text(b.getStatus(), "status");
      if (v.status != "provisional" && v.status != "final") throw std::runtime_error("bad verdict status");
      v.reason = text(b.getReason(), "reason");
      wire_detail::checkListSize(b.getMissingNodes(), limits.max_symptoms, "missing nodes");
      for (auto m : b.getMissingNodes()) v.missing_nodes.push_back(text(m, "missingNodes"));
      v.diagnosis_json = long_text(b.getDiagnosisJson(), "diagnosisJson");
      v.symptoms = b.getSymptoms();
      v.confirms = b.getConfirms();
      if (v.confirms != 0 && (v.confirms >= v.revision || !v.diagnosis_json.empty()))
        throw std::runtime_error("bad confirmed revision");
      out.verdicts.push_back(std::move(v));
    }
    for (auto b : events) {
      RelayNodeEventData e;
      e.node = text(b.getNode(), "node");
      if (e.node.empty()) throw std::runtime_error("node event without node");
      e.time_ns = b.getTimeNs();
      e.kind = text(b.getKind(), "kind");
      e.detail = text(b.getDetail(), "detail");
      e.job_id = text(b.getJobId(), "jobId");
      out.node_events.push_back(std::move(e));
    }
    for (auto b : symptoms) out.symptoms.push_back(wire_detail::readSymptom(b, text));
    wire_detail::checkListSize(root.getLiveNodes(), limits.max_symptoms, "live nodes");
    for (auto n : root.getLiveNodes()) {
      out.live_nodes.push_back(text(n, "liveNodes"));
      if (out.live_nodes.back().empty()) throw std::runtime_error("empty live node name");
    }
  });
  if (!ok) return std::nullopt;
  return out;
}

}  // namespace faultline::common

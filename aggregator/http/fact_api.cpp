#include "aggregator/http/fact_api.h"

#include <fmt/format.h>

#include <set>

#include "aggregator/jobs/fact_events.h"
#include "common/job.h"

namespace faultline::aggregator {

using nlohmann::json;

namespace {

json verdictSummary(const VerdictRow& v) {
  return {{"revision", v.revision},
          {"status", v.status},
          {"reason", v.reason},
          {"sub_domain", common::subDomainName(v.diagnosis.sub_domain)}};
}

}  // namespace

FactApi::FactApi(Store& store, VerdictEngine* engine, Metrics& metrics, const Clock& clock,
                 const common::RuleEngine* rules, std::function<bool()> leads)
    : store_(store),
      engine_(engine),
      metrics_(metrics),
      clock_(clock),
      rules_(rules),
      leads_(std::move(leads)) {}

bool FactApi::isFactPath(const std::vector<std::string>& parts) {
  size_t i = !parts.empty() && parts[0] == "latest" ? 1 : 0;
  if (parts.size() <= i) return false;
  return parts[i] == "attributor" ||
         (parts[i] == "v2" && parts.size() == i + 2 && parts[i + 1] == "healthz");
}

HttpResponse FactApi::handle(const HttpRequest& request, std::vector<std::string> parts) {
  if (parts[0] == "latest") parts.erase(parts.begin());
  const bool post = request.method == "POST";
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (parts[0] == "v2") {
    if (!get) return errorResponse(405, "GET only");
    return jsonResponse(200, json{{"status", "ok"}, {"service", "faultline"}});
  }
  if (parts.size() == 1)
    return post ? createAttributor(request)
                : errorResponse(405, "POST only: an attributor is created");
  if (parts.size() == 3 && parts[2] == "observation")
    return post ? observe(request, parts[1])
                : errorResponse(405, "POST only: an observation is posted");
  if (parts.size() == 3 && parts[2] == "attribution")
    return get ? attribution(parts[1]) : errorResponse(405, "GET only: an attribution is read");
  return errorResponse(404, "not found");
}

HttpResponse FactApi::createAttributor(const HttpRequest& request) {
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded()) return errorResponse(400, "body is not JSON");
  std::string why;
  auto a = attributorFromJson(body, clock_.nowNs(), &why);
  if (!a) {
    metrics_.add("faultline_fact_rejected_total", "route", "attributor");
    return errorResponse(400, why);
  }
  auto row = store_.recordJob(a->update, &why);
  if (!row) return errorResponse(why.rfind("store:", 0) == 0 ? 503 : 400, why);
  metrics_.add("faultline_job_events_total", "kind", a->ended ? "end" : "start");
  metrics_.add("faultline_fact_attributors_total");
  json out{{"attributor_id", a->attributor_id},
           {"job_id", a->attributor_id},
           {"state", row->info.state},
           {"verdict", nullptr}};
  if (a->ended && engine_ && (!leads_ || leads_()))
    if (auto v = engine_->onJobEnded(a->attributor_id)) out["verdict"] = verdictSummary(*v);
  return jsonResponse(200, out);
}

HttpResponse FactApi::observe(const HttpRequest& request, const std::string& id) {
  if (!rules_)
    return errorResponse(503, "this server reads no observations (it was given no rules)");
  if (!validJobId(id)) return errorResponse(400, "bad attributor id");
  auto job = store_.job(id);
  if (!job)
    return errorResponse(404, fmt::format("unknown attributor '{}': POST /attributor first", id));
  json body = json::parse(request.body, nullptr, false);
  if (body.is_discarded()) return errorResponse(400, "body is not JSON");
  // Observation ids count this attributor's observations: obs-1, obs-2, ...
  std::set<std::string> seen;
  for (const auto& o : store_.jobOutputs(id))
    if (o.source.rfind("fact:obs-", 0) == 0)
      seen.insert(o.source.substr(5, o.source.find(':', 5) - 5));
  ObservationContext ctx;
  ctx.job_start_ns = job->info.start_ns;
  ctx.job_end_ns = job->info.end_ns;
  if (engine_) ctx.margin_ns = engine_->options().window_margin_ns;
  ctx.job_nodes = job->info.nodes;
  common::JobInfo layout = job->info;
  common::deriveRanks(layout);
  if (!layout.ranks.empty()) ctx.node_of_rank = [layout](int r) { return layout.nodeOfRank(r); };
  ctx.observation_id = fmt::format("obs-{}", seen.size() + 1);
  const bool metrics = body.contains("context") && body["context"].is_object() &&
                       body["context"].value("format", json()) == json("prometheus_metrics");
  if (metrics) ctx.metrics = &posted_[id];
  std::string why;
  auto o = observationFromJson(body, ctx, *rules_, id, clock_.nowNs(), &why);
  if (!o) {
    if (metrics && posted_[id].series.empty()) posted_.erase(id);
    metrics_.add("faultline_fact_rejected_total", "route", "observation");
    return errorResponse(400, why);
  }
  if (metrics) forgetOldMetrics(id);
  size_t symptoms = 0;
  json outputs = json::array();
  for (const auto& out : o->outputs) {
    if (!store_.putJobOutput(out, &why)) return errorResponse(503, why);
    symptoms += out.symptoms.size();
    outputs.push_back(common::toJson(out.coverage));
  }
  metrics_.add("faultline_fact_observations_total", "source", o->source);
  metrics_.add("faultline_job_output_symptoms_total", "", "", symptoms);
  json answer{{"observation_id", ctx.observation_id},
              {"attributor_id", id},
              {"format", o->format},
              {"lines", o->lines},
              {"out_of_window", o->out_of_window},
              {"symptoms", symptoms},
              {"coverage", outputs},
              {"verdict", nullptr}};
  if (engine_ && (!leads_ || leads_()))
    if (auto v = engine_->onJobOutput(id)) answer["verdict"] = verdictSummary(*v);
  return jsonResponse(200, answer);
}

void FactApi::forgetOldMetrics(const std::string& keep) {
  size_t total = 0;
  for (const auto& [id, held] : posted_) total += held.series.size();
  while (total > kMaxHeldSeries) {
    auto oldest = posted_.end();
    for (auto it = posted_.begin(); it != posted_.end(); ++it)
      if (it->first != keep && (oldest == posted_.end() || it->second.used_ns < oldest->second.used_ns)) oldest = it;
    if (oldest == posted_.end()) return;
    total -= oldest->second.series.size();
    posted_.erase(oldest);
  }
}

HttpResponse FactApi::attribution(const std::string& id) {
  auto job = store_.job(id);
  if (!job) return errorResponse(404, fmt::format("unknown attributor '{}'", id));
  auto v = store_.latestVerdict(id);
  // Every node of the workload, each with the verdict's claims on it: NVRx's client takes the
  // nodes whose list is not empty as the faulty ones.
  std::vector<std::string> nodes = job->info.nodes;
  json claims = json::object();
  json out{{"attributor_id", id}, {"job_id", id}, {"state", job->info.state}, {"verdict", nullptr}};
  if (v) {
    const auto& d = v->diagnosis;
    json verdict = verdictSummary(*v);
    verdict["confidence"] = d.confidence;
    verdict["explanation"] = d.explanation;
    verdict["cause"] = d.cause ? d.cause->rule_id : "";
    verdict["summary"] = d.cause ? d.cause->summary : "";
    out["verdict"] = verdict;
    for (const auto& r : d.responsible) {
      json a{{"rule_id", d.cause ? d.cause->rule_id : ""},
             {"symptom", d.cause ? d.cause->symptom : ""},
             {"sub_domain", common::subDomainName(d.sub_domain)},
             {"device", r.device},
             {"confidence", r.confidence},
             {"summary", d.cause ? d.cause->summary : ""},
             {"evidence", d.cause ? d.cause->evidence : ""},
             {"action", d.recommended_action},
             {"revision", v->revision},
             {"status", v->status}};
      if (!claims.contains(r.node)) {
        claims[r.node] = json::array();
        if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
      }
      claims[r.node].push_back(std::move(a));
    }
  }
  json attributions = json::array();
  for (const auto& n : nodes)
    attributions.push_back({{"type", "NodeAttribution"},
                            {"node", n},
                            {"attributions", claims.contains(n) ? claims[n] : json::array()}});
  out["attributions"] = std::move(attributions);
  return jsonResponse(200, out);
}

}  // namespace faultline::aggregator

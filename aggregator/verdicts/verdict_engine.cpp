#include "aggregator/verdicts/verdict_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <set>

#include "aggregator/verdicts/live_unrecognized.h"

namespace faultline::aggregator {

namespace {
constexpr const char* kWatermarkKey = "verdicts.symptom_watermark";
constexpr const char* kOutputWatermarkKey = "verdicts.job_output_watermark";
constexpr const char* kTemplateWatermarkKey = "verdicts.template_watermark";
constexpr const char* kCoverageWatermarkKey = "verdicts.coverage_watermark";

// When the job ended on this aggregator's clock: its end's recording, else the job's own end time.
int64_t endedAt(const JobRow& job) { return job.end_recorded_ns ? job.end_recorded_ns : job.info.end_ns; }
}

VerdictEngine::VerdictEngine(Store& store, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
                             VerdictOptions options, Metrics* metrics)
    : store_(store), clock_(clock), rules_(std::move(rules)), options_(options), metrics_(metrics) {}

std::vector<std::string> VerdictEngine::unreportedNodes(const JobRow& job) {
  return unreportedNodes(job, store_.reportedUpTo(job.info.nodes));
}

std::vector<std::string> VerdictEngine::unreportedNodes(const JobRow& job,
                                                        const std::map<std::string, int64_t>& reported) {
  std::vector<std::string> out;
  const int64_t needed = job.info.end_ns + options_.window_margin_ns;
  for (const auto& n : job.info.nodes) {
    auto r = reported.find(n);
    if (r == reported.end() || r->second < needed) out.push_back(n);
  }
  return out;
}

common::CorrelatorOptions VerdictEngine::correlatorOptions(const JobRow& job) {
  common::CorrelatorOptions c = options_.correlator;
  // The aggregator's margin is the job's window: what the correlator counts before the start and
  // after the end (lasting faults from before the start are kept by their persists relations).
  c.pre_start_ns = c.post_end_ns = options_.window_margin_ns;
  auto inventories = store_.inventoryFacts(job.info.nodes);
  // An address on several of the job's nodes (a container bridge's 172.17.0.1, a shared virtual
  // address) names none of them.
  std::map<std::string, int> holders;
  for (const auto& [node, inv] : inventories)
    for (const auto& a : inv.addresses) ++holders[a];
  for (auto& [node, inv] : inventories) {
    auto& facts = c.node_facts[node];
    std::vector<std::string> own;
    for (auto& a : inv.addresses)
      if (holders[a] == 1) own.push_back(std::move(a));
    if (!own.empty()) facts.addresses = std::move(own);
    // A GPU list nvidia-smi could not read fully says nothing about how many GPUs there are.
    if (inv.gpu_count) facts.gpu_count = *inv.gpu_count;
  }
  const int64_t end = job.info.end_ns;
  auto failures = store_.recentFailures(job.info.nodes, end - options_.node_history_window_ns, end, job.info.job_id,
                                        job.site, options_.node_history_jobs);
  for (const auto& node : job.info.nodes) {
    auto& h = c.node_history[node];
    h.window_ns = options_.node_history_window_ns;
    if (auto it = failures.find(node); it != failures.end()) {
      h.failures = static_cast<int>(it->second.failures);
      h.jobs = std::move(it->second.job_ids);
    }
  }
  return c;
}

int64_t VerdictEngine::readUpTo(const std::string& job_id) const {
  auto it = read_up_to_.find(job_id);
  return it == read_up_to_.end() ? -1 : it->second;
}

namespace {

// The job's own output (uploaded by the epilog): all of it belongs to the job, its symptoms go
// into `symptoms`. Ranks the uploader could not place are placed now, through the layout the job
// has by now. Returns the outputs' coverage and unmatched templates.
std::pair<std::vector<common::CoverageEntry>, std::vector<common::TemplateSighting>> takeJobOutputs(
    Store& store, const JobRow& job, std::vector<common::Symptom>& symptoms) {
  std::vector<common::CoverageEntry> coverage;
  std::vector<common::TemplateSighting> templates;
  for (auto& o : store.jobOutputs(job.info.job_id)) {
    for (auto& t : o.unmatched) templates.push_back(std::move(t));
    for (auto& s : o.symptoms) {
      if (s.node.empty())
        if (auto rank = s.rank()) s.node = job.info.nodeOfRank(*rank);
      symptoms.push_back(std::move(s));
    }
    coverage.push_back(std::move(o.coverage));
  }
  return {std::move(coverage), std::move(templates)};
}

// Coverage from the agents: what each node's sources say, and who is silent.
std::vector<common::CoverageEntry> agentCoverage(const std::vector<std::string>& nodes,
                                                 const std::map<std::string, NodeRow>& rows, int64_t now,
                                                 int64_t agent_timeout_ns) {
  std::vector<common::CoverageEntry> coverage;
  for (const auto& n : nodes) {
    auto found = rows.find(n);
    const NodeRow* row = found == rows.end() ? nullptr : &found->second;
    if (!row || row->last_heartbeat_ns == 0) {
      if (row && row->last_seen_ns && now - row->last_seen_ns <= agent_timeout_ns) {
        coverage.push_back({n, "agent", "", 0, 0, "partial", "batches but no heartbeat yet"});
        continue;
      }
      coverage.push_back({n, "agent", "", 0, 0, "missing", "no agent has reported from this node"});
      continue;
    }
    if (now - row->last_heartbeat_ns > agent_timeout_ns) {
      coverage.push_back({n, "agent", "", 0, 0, "missing",
                          fmt::format("no heartbeat for {}s", (now - row->last_heartbeat_ns) / kSecondNs)});
      continue;
    }
    if (row->sources.empty()) coverage.push_back({n, "agent", "", 0, 0, "ok", ""});
    for (const auto& s : row->sources)
      coverage.push_back({n, s.source, s.format, s.records, s.skipped, s.status, s.reason});
  }
  return coverage;
}

}  // namespace

VerdictRow VerdictEngine::evaluate(const JobRow& job, const std::string& reason) {
  const int64_t now = clock_.nowNs();
  if (metrics_) metrics_->add("faultline_verdict_evaluations_total");
  // Taken before the window read: every symptom up to it is committed (or rolled back), so the
  // read below sees it if it belongs. A tick then skips this job for symptoms up to here.
  const int64_t settled = store_.settledSymptomId();
  common::CorrelatorOptions c = correlatorOptions(job);
  // Window: the correlator decides what counts; fetch what it could use. A job without a known
  // start is looked at from a day before its end.
  int64_t start = job.info.start_ns ? job.info.start_ns : job.info.end_ns - 86400 * kSecondNs;
  int64_t from = start - std::max({c.context_pre_start_ns, c.pre_start_ns, options_.window_margin_ns});
  int64_t to = job.info.end_ns + std::max(c.post_end_ns, options_.window_margin_ns);
  // Untimed symptoms (rank tracebacks) are placed by when they arrived: until the settle point.
  int64_t to_received = std::max(to, endedAt(job) + options_.settle_ns);
  VerdictRow v;
  v.job_id = job.info.job_id;
  v.reason = reason;
  v.created_ns = now;
  auto symptoms = store_.symptomsForWindow(job.info.nodes, from, to, to_received, &v.max_symptom_id);
  if (settled >= 0) {
    if (read_up_to_.size() >= kMaxReadUpTo && !read_up_to_.count(job.info.job_id)) read_up_to_.clear();
    read_up_to_[job.info.job_id] = settled;
  }
  auto [output_coverage, output_templates] = takeJobOutputs(store_, job, symptoms);
  auto rows = store_.nodes(job.info.nodes);
  std::vector<common::CoverageEntry> coverage = agentCoverage(job.info.nodes, rows, now, options_.agent_timeout_ns);
  // Evidence on one node localizes only when the others' agents answered for the window.
  c.covered_nodes.emplace();
  for (const auto& e : coverage)
    if (e.status == "ok" || e.status == "partial") c.covered_nodes->insert(e.node);
  const auto metric = metric_evidence_.find(job.info.job_id);
  if (metric != metric_evidence_.end())
    symptoms.insert(symptoms.end(), metric->second.symptoms.begin(), metric->second.symptoms.end());
  v.symptoms = symptoms.size();
  int64_t last_symptom_ns = 0;
  for (const auto& s : symptoms)
    if (s.time_known && s.source_kind != common::SourceKind::kMetric) last_symptom_ns = std::max(last_symptom_ns, s.last_ns);
  v.diagnosis = common::correlate(job.info, std::move(symptoms), rules_.get(), c);
  for (auto& oc : output_coverage) coverage.push_back(std::move(oc));
  if (metric != metric_evidence_.end())
    coverage.insert(coverage.end(), metric->second.coverage.begin(), metric->second.coverage.end());
  v.diagnosis.coverage = std::move(coverage);
  LiveUnrecognizedOptions lo;
  lo.margin_ns = options_.window_margin_ns;
  lo.baseline_window_ns = options_.baseline_window_ns;
  lo.baseline_jobs = options_.baseline_jobs;
  addLiveUnrecognized(store_, job, *c.covered_nodes, last_symptom_ns, output_templates, lo, &v.diagnosis);
  if (options_.domain_model && v.diagnosis.sub_domain == common::SubDomain::kUnattributed &&
      !v.diagnosis.unrecognized.empty())
    if (auto lead = common::unrecognizedDomainLead(v.diagnosis.unrecognized, *options_.domain_model); !lead.empty())
      v.diagnosis.explanation += (v.diagnosis.explanation.empty() ? "" : " ") + lead;
  std::map<std::string, int64_t> reported_up_to;  // from the rows already read (a 10,000-node job's take ~0.1 s)
  for (const auto& [n, row] : rows) reported_up_to.emplace(n, row.reported_ns);
  v.missing_nodes = unreportedNodes(job, reported_up_to);
  bool reported = v.missing_nodes.empty();
  bool timed_out = now - endedAt(job) >= options_.final_timeout_ns;
  v.status = reported || timed_out ? "final" : "provisional";
  // A provisional verdict waits for every node to report past the window; a node whose agent is
  // live and answered is only not there yet, not missing. Missing are the nodes without one (and,
  // once final on a timeout, every node that never caught up).
  if (v.status == "provisional")
    std::erase_if(v.missing_nodes, [&](const std::string& n) { return c.covered_nodes->count(n) > 0; });
  return v;
}

std::optional<VerdictRow> VerdictEngine::store(VerdictRow v) {
  std::string error;
  int rev = store_.addVerdict(v, &error);
  if (!rev) {
    read_up_to_.erase(v.job_id);  // what that evaluation read is in no stored verdict
    if (metrics_) metrics_->add("faultline_verdict_errors_total");
    return std::nullopt;
  }
  v.revision = rev;
  const int64_t stored_ns = clock_.nowNs();
  // The job's row, read once for the metric request (first verdict, settle) and the latency.
  const bool ask_metrics = metric_request_ && (rev == 1 || v.reason == "settle");
  std::optional<JobRow> job;
  if (ask_metrics || (metrics_ && rev == 1)) job = store_.job(v.job_id);
  if (ask_metrics && job) metric_request_(job->info);
  if (metrics_) {
    metrics_->add("faultline_verdicts_total", "sub_domain", std::string(common::subDomainName(v.diagnosis.sub_domain)));
    if (rev == 1) {
      // Time from the job's end (as the scheduler stamped it) to its first verdict being
      // committed (not to the start of the evaluation, which would hide the correlation).
      if (job && job->info.end_ns && stored_ns >= job->info.end_ns)
        metrics_->observe("faultline_verdict_latency_seconds", double(stored_ns - job->info.end_ns) / 1e9);
    }
  }
  return v;
}

std::optional<VerdictRow> VerdictEngine::onJobEnded(const std::string& job_id) {
  auto job = store_.job(job_id);
  if (!job || !job->failed() || store_.latestVerdict(job_id)) return std::nullopt;
  return store(evaluate(*job, "job_end"));
}

std::optional<VerdictRow> VerdictEngine::onJobOutput(const std::string& job_id) {
  auto job = store_.job(job_id);
  if (!job || !job->failed()) return std::nullopt;
  auto prev = store_.latestVerdict(job_id);
  if (!prev) return store(evaluate(*job, "job_end"));
  VerdictRow next = evaluate(*job, "job_output");
  if (prev->status == "final") next.status = "final";
  // The epilog retried an upload it had already made: nothing new to say.
  if (next.status == prev->status && common::toJson(next.diagnosis) == common::toJson(prev->diagnosis)) return prev;
  return store(std::move(next));
}

std::optional<VerdictRow> VerdictEngine::onMetricEvidence(const std::string& job_id,
                                                          std::vector<common::Symptom> symptoms,
                                                          std::vector<common::CoverageEntry> coverage) {
  if (metric_evidence_.size() >= kMaxReadUpTo && !metric_evidence_.count(job_id)) metric_evidence_.clear();
  metric_evidence_[job_id] = {std::move(symptoms), std::move(coverage)};
  auto job = store_.job(job_id);
  if (!job || !job->failed()) return std::nullopt;
  auto prev = store_.latestVerdict(job_id);
  if (!prev) return std::nullopt;  // its first verdict will take the evidence in
  VerdictRow next = evaluate(*job, "metrics");
  if (prev->status == "final") next.status = "final";
  if (next.status == prev->status && common::toJson(next.diagnosis) == common::toJson(prev->diagnosis)) return prev;
  return store(std::move(next));
}

bool VerdictEngine::changedFromStored(const std::string& job_id, const VerdictRow& next, bool beyond_coverage) {
  auto prev = store_.latestVerdict(job_id);
  if (!prev) return true;
  auto a = common::toJson(prev->diagnosis), b = common::toJson(next.diagnosis);
  if (beyond_coverage) {  // its record counts grow with every heartbeat: not news by themselves
    a.erase("coverage");
    b.erase("coverage");
  }
  return a != b;
}

// How far before a job's start and after its end a symptom still falls in its window, with the
// settle time on the far side: a span of symptoms on a node belongs to the jobs this reaches.
std::vector<std::string> VerdictEngine::jobsReaching(const std::string& node, int64_t first_ns, int64_t last_ns) {
  const int64_t pre = std::max({options_.correlator.context_pre_start_ns, options_.correlator.pre_start_ns,
                                options_.window_margin_ns});
  const int64_t post = std::max(options_.correlator.post_end_ns, options_.window_margin_ns);
  return store_.jobsAt(node, first_ns, last_ns, pre, post + options_.settle_ns);
}

// Symptoms stored since the last tick: which jobs' windows they fall in (the newest id each job's
// late symptoms bring), and each node's newest. Up to the settled id only, and the watermark moves
// there: an id still being written (another replica's transaction) is looked at on a later tick
// instead of passed over.
void VerdictEngine::readLateSymptoms(TickNews& news) {
  const int64_t watermark = store_.metaInt(kWatermarkKey, 0);
  int64_t newest = watermark;
  const int64_t settled = store_.settledSymptomId();
  for (const auto& span : settled > watermark ? store_.symptomsSince(watermark, settled)
                                              : std::vector<Store::NewSymptomSpan>{}) {
    newest = std::max(newest, span.max_id);
    news.fresh_nodes[span.node] = span.max_id;  // one span per node
    for (const auto& id : jobsReaching(span.node, span.first_ns, span.last_ns)) {
      int64_t& m = news.late[id];
      m = std::max(m, span.max_id);
    }
  }
  if (settled > newest) newest = settled;  // ids up to it that no row has: rolled back
  if (newest != watermark) store_.setMetaInt(kWatermarkKey, newest);
}

// Job outputs stored since the last tick (uploads the API did not judge at once: --db writes). An
// output is not a symptom id: its job is late whatever this engine read last.
void VerdictEngine::readLateOutputs(TickNews& news) {
  const int64_t mark = store_.metaInt(kOutputWatermarkKey, 0);
  int64_t newest = mark;
  for (auto& id : store_.jobsWithOutputSince(mark, &newest)) news.late[id] = std::numeric_limits<int64_t>::max();
  if (newest != mark) store_.setMetaInt(kOutputWatermarkKey, newest);
}

// Template sightings stored since the last tick (error lines no rule matched): news for the jobs
// whose window they fall in when they change the verdict — a batch of templates alone can come
// after the final revision (the agent ships them with its next batch).
void VerdictEngine::readSightings(TickNews& news) {
  const int64_t mark = store_.metaInt(kTemplateWatermarkKey, 0);
  int64_t newest = mark;
  for (const auto& span : store_.templatesSince(mark)) {
    newest = std::max(newest, span.max_id);
    for (auto& id : jobsReaching(span.node, span.first_ns, span.last_ns)) news.sighted.insert(std::move(id));
  }
  if (newest != mark) store_.setMetaInt(kTemplateWatermarkKey, newest);
}

// Sources that began to count for coverage since the last tick (a node's first heartbeat, a log's
// first records): news for the jobs that ended on the node within the final timeout before, when
// they change the verdict — which nodes printed a line of those with that kind of log can change
// after the final revision, a heartbeat later.
void VerdictEngine::readRecounts(TickNews& news) {
  const int64_t mark = store_.metaInt(kCoverageWatermarkKey, 0);
  int64_t newest = mark;
  for (const auto& [node, counted_ns] : store_.nodesCountedSince(mark)) {
    newest = std::max(newest, counted_ns);
    // The jobs that ended within the final timeout before, both times on this aggregator's clock
    // (endedAt): a job's own times can be in another (a replay, an import, a skewed scheduler).
    for (auto& id : store_.jobsEndedOnNodeBetween(node, counted_ns - options_.final_timeout_ns, counted_ns))
      news.recounted.insert(std::move(id));
  }
  if (newest != mark) store_.setMetaInt(kCoverageWatermarkKey, newest);
}

// The latest verdict of every job the news touches, and of every open verdict.
std::map<std::string, VerdictHead> VerdictEngine::headsToReview(const TickNews& news) {
  std::map<std::string, VerdictHead> heads;
  auto add = [&](const std::string& id) {
    if (!heads.count(id))
      if (auto v = store_.latestVerdictHead(id)) heads.emplace(id, std::move(*v));
  };
  for (const auto& entry : news.late) add(entry.first);
  for (const auto* ids : {&news.sighted, &news.recounted})
    for (const auto& id : *ids) add(id);
  for (auto& v : store_.openVerdictHeads()) heads.emplace(v.job_id, std::move(v));
  return heads;
}

// Whether a job's latest verdict `v` may be due a revision: late symptoms it has not read, or else
// one of the other revision reasons can hold. An open verdict without late symptoms is evaluated
// (symptoms fetched, correlated) only then — not every tick for every open verdict, which during a
// fleet-wide cascade cost more than the ingest itself. Symptoms this engine's last evaluation
// already read (the end POST's, a moment ago, for the last symptoms of a cascade) are not news:
// judging a 10,000-node job again for them took as long as the first verdict, on the thread that
// answers HTTP.
bool VerdictEngine::mayBeDue(const JobRow& job, const VerdictHead& v, const TickNews& news, int64_t now) {
  const int64_t ended = endedAt(job);
  const int64_t read_up_to = readUpTo(job.info.job_id);
  auto late_it = news.late.find(job.info.job_id);
  if (late_it != news.late.end() && late_it->second > read_up_to) return true;
  const bool fresh_node = std::any_of(job.info.nodes.begin(), job.info.nodes.end(), [&](const std::string& n) {
    auto f = news.fresh_nodes.find(n);
    return f != news.fresh_nodes.end() && f->second > read_up_to;
  });
  return job.terminal_state != v.terminal_state ||
         (v.created_ns < ended + options_.settle_ns && now >= ended + options_.settle_ns) ||
         now - ended >= options_.final_timeout_ns || fresh_node || unreportedNodes(job).empty() ||
         news.sighted.count(job.info.job_id) || news.recounted.count(job.info.job_id);
}

// Why the job's verdict now is a revision of `v`, or "" when it is not one.
std::string VerdictEngine::revisionReason(const JobRow& job, const VerdictHead& v, const VerdictRow& next,
                                          const TickNews& news, int64_t now) {
  const std::string& id = job.info.job_id;
  const int64_t ended = endedAt(job);
  if (next.max_symptom_id > v.max_symptom_id || next.symptoms != v.symptoms) return "late_symptoms";
  if (job.terminal_state != v.terminal_state) return "job_update";
  if (v.status == "provisional" && next.status == "final") return next.missing_nodes.empty() ? "reported" : "timeout";
  if (v.status == "provisional" && v.created_ns < ended + options_.settle_ns && now >= ended + options_.settle_ns)
    return "settle";
  if (news.sighted.count(id) && changedFromStored(id, next)) return "late_templates";
  if (news.recounted.count(id) && changedFromStored(id, next, /*beyond_coverage=*/true)) return "late_coverage";
  return "";
}

size_t VerdictEngine::tick() {
  size_t written = 0;
  const int64_t now = clock_.nowNs();
  // 1. Failed jobs without a verdict (ends recorded by sacct, import, or a direct --db write).
  for (const auto& job : store_.jobsAwaitingVerdict())
    if (store(evaluate(job, "job_end"))) ++written;

  // 2. What was stored since the last tick, and which jobs it concerns.
  TickNews news;
  readLateSymptoms(news);
  readLateOutputs(news);
  readSightings(news);
  readRecounts(news);

  // 3. Per job with a verdict that may be due a revision.
  for (auto& [id, v] : headsToReview(news)) {
    auto job = store_.job(id);
    if (!job || !job->ended() || !mayBeDue(*job, v, news, now)) continue;
    VerdictRow next = evaluate(*job, "");
    next.reason = revisionReason(*job, v, next, news, now);
    if (next.reason.empty()) continue;
    if (v.status == "final") next.status = "final";
    if (store(std::move(next))) ++written;
  }
  return written;
}

}  // namespace faultline::aggregator

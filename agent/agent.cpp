#include "agent/agent.h"

#include <algorithm>

#include "agent/pod_log_path.h"

namespace faultline::agent {

namespace {
// A heartbeat that could not be queued (no connection yet) is tried again this soon.
constexpr int64_t kHeartbeatRetryMs = 1000;

// The error words' search: the rule cache's copy when it has one (nothing compiled here), else
// compiled once for the process.
std::shared_ptr<const common::LiteralScanner> errorWords(const common::RuleSet& rules) {
  return rules.error_words ? rules.error_words : common::errorWordScanner();
}
}  // namespace

std::shared_ptr<const common::RuleSet> leanRuleSet(const common::RuleSet& full) {
  auto lean = std::make_shared<common::RuleSet>();
  lean->version = full.version;
  lean->literal_scanner = full.literal_scanner;
  lean->error_words = full.error_words;
  lean->rules.reserve(full.rules.size());
  for (const auto& r : full.rules) {
    common::Rule c;
    c.id = r.id;
    c.deprecated = r.deprecated;
    c.line = r.line;
    c.symptom = r.symptom;
    c.sub_domain = r.sub_domain;
    c.category = r.category;
    c.role = r.role;
    c.severity = r.severity;
    c.priority = r.priority;
    c.fallback_root = r.fallback_root;
    c.prefilters = r.prefilters;
    c.sources = r.sources;
    c.device_template = r.device_template;
    c.node_template = r.node_template;
    c.summary_template = r.summary_template;
    c.fields = r.fields;
    // No compiled regex: the engine compiles a rule's pattern when a record first holds one of
    // its literals, so a node keeps only the rules its logs ever come near (anonymous RSS).
    c.pattern = r.pattern;
    lean->rules.push_back(std::move(c));
  }
  return lean;
}

Agent::Agent(boost::asio::io_context& io, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
             std::vector<std::unique_ptr<Source>> sources, Spool& spool, Shipper* shipper, AgentOptions options,
             Logger& log, Notifier notify, InventoryCollector* inventory)
    : io_(io), clock_(clock), engine_(std::make_unique<common::RuleEngine>(std::move(rules))),
      sources_(std::move(sources)), spool_(spool), shipper_(shipper), options_(std::move(options)), log_(log),
      notify_(std::move(notify)), inventory_collector_(inventory), aggregator_(options_.aggregate_window_ns),
      unmatched_(options_.unmatched), error_words_(options_.mine_unmatched ? errorWords(engine_->rules()) : nullptr),
      commit_timer_(io), heartbeat_timer_(io), watchdog_timer_(io) {}

Agent::~Agent() {
  commit_timer_.cancel();
  heartbeat_timer_.cancel();
  watchdog_timer_.cancel();
  for (auto& s : sources_) s->stop();
  if (inventory_collector_) inventory_collector_->cancel();
}

void Agent::startSource(Source& s, const std::map<std::string, std::string>& checkpoints) {
  const std::string name = s.name();
  auto it = checkpoints.find(name);
  s.useLiterals(engine_->literalScanner());
  s.useErrorWords(error_words_);
  s.start(it == checkpoints.end() ? "" : it->second,
          [this, name](common::LogRecord&& r, common::SourceKind kind) { onRecord(name, std::move(r), kind); });
  auto h = s.health();
  if (h.status != "ok") log_.warn("faultline-agent: source {}: {}: {}", h.name, h.status, h.reason);
}

void Agent::start() {
  started_ns_ = clock_.nowNs();
  stopped_ = false;
  for (auto& g : spool_.openGroups()) aggregator_.add(std::move(g));
  auto checkpoints = spool_.checkpoints();
  for (auto& s : sources_) startSource(*s, checkpoints);
  next_discovery_steady_ = clock_.steadyNs() + options_.discovery_interval_ns;
  next_inventory_steady_ = clock_.steadyNs();  // collect at start
  periodic();
  armCommit();
  armHeartbeat();
  armWatchdog();
  if (notify_) notify_("READY=1\nSTATUS=" + statusLine());
  log_.info("faultline-agent {} started: {} source(s), rules {}", options_.agent_version, sources_.size(),
            engine_->rules().version);
}

void Agent::stop() {
  if (stopped_) return;
  if (notify_) notify_("STOPPING=1");
  commit();
  stopped_ = true;
  commit_timer_.cancel();
  heartbeat_timer_.cancel();
  watchdog_timer_.cancel();
  for (auto& s : sources_) s->stop();
  if (inventory_collector_) inventory_collector_->cancel();
}

void Agent::periodic() {
  if (stopped_) return;
  const int64_t now = clock_.steadyNs();
  if (inventory_collector_ && !inventory_collector_->running() && now >= next_inventory_steady_) {
    next_inventory_steady_ = now + options_.inventory_interval_ns;
    inventory_collector_->collect([this](common::NodeInventory inv) { onInventory(std::move(inv)); });
  }
  if (discovery_ && now >= next_discovery_steady_) {
    next_discovery_steady_ = now + options_.discovery_interval_ns;
    discover();
  }
}

void Agent::onInventory(common::NodeInventory inv) {
  ++stats_.inventories;
  if (inventory_ && inventory_->sameDevices(inv)) {
    inventory_->collected_ns = inv.collected_ns;
    return;
  }
  ++stats_.inventory_changes;
  log_.info("faultline-agent: inventory {}: {} GPU(s){}, {} HCA port(s){}", inventory_ ? "changed" : "read",
            inv.gpus.size(), inv.gpu_error.empty() ? "" : " (" + inv.gpu_error + ")", inv.hcas.size(),
            inv.hca_error.empty() ? "" : " (" + inv.hca_error + ")");
  inventory_hash_ = common::inventoryHash(inv);
  inventory_ = std::move(inv);
  inventory_unsent_ = true;
  // At start and on change the aggregator hears at once, not a heartbeat interval later.
  sendHeartbeat();
}

void Agent::discover() {
  std::vector<std::string> known;
  known.reserve(sources_.size());
  for (const auto& s : sources_) known.push_back(s->name());
  auto fresh = discovery_(known);
  if (fresh.empty()) return;
  auto checkpoints = spool_.checkpoints();
  for (auto& s : fresh) {
    if (std::find(known.begin(), known.end(), s->name()) != known.end()) continue;  // defensive
    log_.info("faultline-agent: new source {}", s->name());
    startSource(*s, checkpoints);
    known.push_back(s->name());
    sources_.push_back(std::move(s));
    ++stats_.sources_added;
  }
}

void Agent::sendHeartbeat() {
  if (!shipper_ || stopped_) return;
  auto hb = heartbeat();
  const bool carry = inventory_ && (inventory_unsent_ || (options_.inventory_every_heartbeats > 0 &&
                                                          beats_without_inventory_ + 1 >= options_.inventory_every_heartbeats));
  if (carry) hb.inventory = inventory_;
  // A heartbeat is best effort: one that could not be queued leaves the inventory due.
  const bool sent = shipper_->sendHeartbeat(encodeHeartbeat(hb));
  if (sent && carry) {
    inventory_unsent_ = false;
    beats_without_inventory_ = 0;
  } else if (!carry) {
    ++beats_without_inventory_;
  }
  // Not queued: no connection yet (the first heartbeat at start, a reconnect). Try again in a
  // second rather than a whole interval later, or the aggregator counts a live node as missing.
  if (!sent && !heartbeat_retry_armed_ && options_.heartbeat_interval_ms > 0) {
    heartbeat_retry_armed_ = true;
    armHeartbeat(std::min<int64_t>(options_.heartbeat_interval_ms, kHeartbeatRetryMs));
  }
}

void Agent::onRecord(const std::string& source, common::LogRecord&& record, common::SourceKind kind) {
  ++stats_.records;
  dirty_ = true;
  if (!record.time_known) {
    // The aggregation window orders by a time, so the read time stands in for it; the record
    // stays untimed (the aggregator places it by arrival): the read time is not when it happened.
    record.time_ns = clock_.nowNs();
  }
  if (record.boot_id.empty()) record.boot_id = options_.boot_id;
  common::MatchContext ctx;
  ctx.node = options_.hostname;
  ctx.source = source;
  ctx.kind = kind;
  std::optional<common::Symptom> symptom;
  if (!record.rule_literals_absent) symptom = engine_->extract(record, ctx);
  if (!symptom) {
    // Benign lines never leave the node; error lines no rule matched leave as template counts. A
    // record a parser handed on for an error word holds one; any other is searched for one first.
    if (!options_.mine_unmatched) return;
    if (!record.rule_literals_absent && error_words_ && error_words_->literalsIn(record.text, &error_ids_) &&
        error_ids_.empty())
      return;
    ++stats_.unmatched_records;
    unmatched_.add(record, kind, record.time_ns);
    return;
  }
  ++stats_.symptoms;
  if (symptom->boot_id.empty()) symptom->boot_id = record.boot_id;
  // A container's log under /var/log/pods: which pod and container of a job wrote it.
  if (auto pod = parsePodLogPath(source))
    for (auto& [k, v] : podLogFields(*pod)) symptom->fields.emplace(k, v);
  aggregator_.add(std::move(*symptom));
}

bool Agent::commit() {
  for (auto& s : sources_) s->flush();
  auto ready = aggregator_.drainOlderThan(clock_.nowNs());
  // Records without a literal never reach onRecord: a source's moved checkpoint is news too.
  bool moved = false;
  for (const auto& s : sources_) {
    const auto cp = s->checkpoint();
    const auto it = committed_checkpoints_.find(s->name());
    moved = moved || (!cp.empty() && (it == committed_checkpoints_.end() || it->second != cp));
  }
  if (!dirty_ && !moved && ready.empty()) return true;
  // The groups still open go to the spool too, in the same transaction as the checkpoints; the
  // aggregator keeps them (drainAll + add rebuilds it identically).
  auto open = aggregator_.drainAll();
  for (const auto& g : open) aggregator_.add(g);

  SpoolCommit c;
  std::vector<common::CoverageEntry> coverage;
  for (const auto& s : sources_) {
    auto h = s->health();
    coverage.push_back({options_.hostname, h.name, h.format, h.records, h.skipped, h.status, h.reason});
    auto cp = s->checkpoint();
    if (!cp.empty()) c.checkpoints[s->name()] = cp;
  }
  auto newBatch = [&]() -> common::SymptomBatchData& {
    common::SymptomBatchData& b = c.batches.emplace_back();
    b.header.agent_id = options_.agent_id;
    b.header.hostname = options_.hostname;
    b.header.boot_id = options_.boot_id;
    b.header.agent_version = options_.agent_version;
    b.header.ruleset_version = engine_->rules().version;
    b.header.created_ns = clock_.nowNs();
    b.sources = coverage;
    return b;
  };
  // One batch per severity (critical first), so the shipper can send the worst news first and a
  // full spool drops the least severe batches.
  for (int sev = static_cast<int>(common::Severity::kCritical); sev >= 0; --sev) {
    std::vector<common::Symptom> group;
    for (auto& s : ready)
      if (static_cast<int>(s.severity) == sev) group.push_back(std::move(s));
    for (size_t i = 0; i < group.size(); i += options_.max_symptoms_per_batch) {
      auto end = std::min(group.size(), i + options_.max_symptoms_per_batch);
      newBatch().symptoms.assign(std::make_move_iterator(group.begin() + static_cast<long>(i)),
                                 std::make_move_iterator(group.begin() + static_cast<long>(end)));
    }
  }
  // The interval's template sightings ride with the least severe batch (one of their own when
  // there is none): they are context, the first thing a full spool may drop.
  uint64_t left_out = 0, lines_left_out = 0;
  auto sightings = unmatched_.take(&left_out, &lines_left_out);
  if (!sightings.empty() || left_out || lines_left_out) {
    auto& b = c.batches.empty() ? newBatch() : c.batches.back();
    b.unmatched = sightings;
    b.unmatched_left_out = left_out;
    b.unmatched_lines_left_out = lines_left_out;
  }
  c.open_groups = std::move(open);
  std::string error;
  auto seqs = spool_.commit(c, &error);
  if (!seqs) {
    ++stats_.commit_errors;
    log_.error("faultline-agent: spool commit failed, will retry: {}", error);
    // Keep the drained symptoms for the next attempt; checkpoints were not advanced, but the
    // records are already in memory, so nothing is re-read either.
    for (auto& b : c.batches)
      for (auto& s : b.symptoms) aggregator_.add(std::move(s));
    unmatched_.putBack(sightings);
    return false;
  }
  ++stats_.commits;
  committed_checkpoints_ = c.checkpoints;
  for (const auto& b : c.batches) stats_.spooled += b.symptoms.size();
  dirty_ = false;
  if (shipper_ && !seqs->empty()) shipper_->kick();
  return true;
}

void Agent::reloadRules(std::shared_ptr<const common::RuleSet> rules) {
  engine_ = std::make_unique<common::RuleEngine>(std::move(rules));
  for (auto& s : sources_) s->useLiterals(engine_->literalScanner());
  if (options_.mine_unmatched) {
    error_words_ = errorWords(engine_->rules());
    for (auto& s : sources_) s->useErrorWords(error_words_);
  }
  ++stats_.rule_reloads;
  log_.info("faultline-agent: rules reloaded: {}", engine_->rules().version);
}

std::vector<SourceHealth> Agent::sourceHealth() const {
  std::vector<SourceHealth> out;
  for (const auto& s : sources_) out.push_back(s->health());
  return out;
}

HeartbeatData Agent::heartbeat() const {
  HeartbeatData hb;
  hb.agent_id = options_.agent_id;
  hb.hostname = options_.hostname;
  hb.node = options_.hostname;
  hb.boot_id = options_.boot_id;
  hb.agent_version = options_.agent_version;
  hb.ruleset_version = engine_->rules().version;
  hb.created_ns = clock_.nowNs();
  hb.started_ns = started_ns_;
  hb.sources = sourceHealth();
  auto st = spool_.stats();
  hb.spool_batches = st.batches;
  hb.spool_bytes = st.bytes;
  hb.dropped_symptoms = st.dropped_symptoms;
  hb.next_sequence = st.next_sequence;
  hb.inventory_hash = inventory_ ? inventory_hash_ : 0;
  return hb;
}

std::string Agent::statusLine() const {
  auto st = spool_.stats();
  size_t bad = 0;
  for (const auto& s : sources_)
    if (s->health().status != "ok") ++bad;
  return fmt::format("{} records, {} symptoms, spool {} batches/{} bytes, {} dropped unsent, {} evicted in flight, "
                     "{} source(s) not ok",
                     stats_.records, stats_.symptoms, st.batches, st.bytes, st.dropped_symptoms,
                     st.evicted_in_flight_symptoms, bad);
}

void Agent::armCommit() {
  if (options_.batch_interval_ms <= 0 || stopped_) return;
  commit_timer_.expires_after(std::chrono::milliseconds(options_.batch_interval_ms));
  commit_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    commit();
    periodic();
    armCommit();
  });
}

void Agent::armHeartbeat(int64_t delay_ms) {
  if (options_.heartbeat_interval_ms <= 0 || stopped_) return;
  // Re-arming cancels a pending wait (its handler sees operation_aborted and does nothing).
  heartbeat_timer_.expires_after(std::chrono::milliseconds(delay_ms >= 0 ? delay_ms : options_.heartbeat_interval_ms));
  heartbeat_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    heartbeat_retry_armed_ = false;
    sendHeartbeat();  // arms a retry itself when this one could not be queued
    if (notify_) notify_("STATUS=" + statusLine());
    if (!heartbeat_retry_armed_) armHeartbeat();
  });
}

void Agent::armWatchdog() {
  if (options_.watchdog_interval_ms <= 0 || stopped_ || !notify_) return;
  watchdog_timer_.expires_after(std::chrono::milliseconds(options_.watchdog_interval_ms));
  watchdog_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    notify_("WATCHDOG=1");
    armWatchdog();
  });
}

}  // namespace faultline::agent

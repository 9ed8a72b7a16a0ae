// Nodes and agents (node_store.h): tables agents, nodes, source_status, node_events.
#include "aggregator/store/node_store.h"

#include <fmt/format.h>

#include <optional>

#include "aggregator/store/db.h"
#include "aggregator/store/store_internal.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

void insertNodeEvent(sql::Db& db, const NodeEvent& e) {
  // Kept: a fleet's agents all come up at once after an outage, each with an event.
  Stmt s(db, "INSERT INTO node_events(node, time_ns, kind, detail, job_id) VALUES(?,?,?,?,?)");
  s.bind(1, e.node).bind(2, e.time_ns).bind(3, e.kind).bind(4, e.detail).bind(5, e.job_id).step();
}

bool hostnameBoundElsewhere(sql::Db& db, const std::string& hostname, const std::string& agent_id) {
  Stmt owner(db.get(), "SELECT agent_id FROM agents WHERE hostname = ?");
  owner.bind(1, hostname);
  return owner.step() == sql::kRow && owner.text(0) != agent_id;
}

// The node's stored row as a write finds it: its boot id, and whether a heartbeat has come before.
struct StoredNode {
  std::string boot_id;
  bool heartbeat_seen = false;
};
std::optional<StoredNode> storedNode(sql::Db& db, const std::string& hostname) {
  Stmt prev(db.get(), "SELECT boot_id, last_heartbeat_ns FROM nodes WHERE hostname = ?");
  prev.bind(1, hostname);
  if (prev.step() != sql::kRow) return std::nullopt;
  return StoredNode{prev.text(0), prev.i64(1) != 0};
}

std::optional<std::string> storedBootId(sql::Db& db, const std::string& hostname) {
  auto node = storedNode(db, hostname);
  if (!node) return std::nullopt;
  return node->boot_id;
}

void noteAgentOrBoot(sql::Db& db, const std::string& hostname, const std::string& agent_id, const std::string& boot_id,
                     const std::optional<std::string>& stored_boot, int64_t now) {
  if (!stored_boot) insertNodeEvent(db, {hostname, now, "agent_seen", "agent " + agent_id, ""});
  else if (!boot_id.empty() && !stored_boot->empty() && *stored_boot != boot_id)
    insertNodeEvent(db, {hostname, now, "boot", "boot " + *stored_boot + " -> " + boot_id, ""});
}

bool NodeStore::addNodeEvent(const NodeEvent& e) {
  Lock lock(*this);
  insertNodeEvent(*db_, e);
  return true;
}

// The one-batch path is kept as the load bench's peer (bench/store_ingest --modes legacy).
bool recordSender(sql::Db& db, const common::SymptomBatchData& batch, int64_t now) {
  const auto& h = batch.header;
  auto prepare = [&](std::optional<Stmt>& st, std::string_view q) -> Stmt& {
    st.emplace(db.get(), q);
    return *st;
  };
  {
    std::optional<Stmt> st;
    auto& a = prepare(st,
                      "INSERT INTO agents(agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, "
                      "last_seen_ns, last_batch_ns, batches, symptoms) VALUES(?1,?2,?3,?4,?5,?6,?6,?6,1,?7) "
                      "ON CONFLICT(agent_id) DO UPDATE SET boot_id=?3, agent_version=?4, ruleset_version=?5, "
                      "last_seen_ns=?6, last_batch_ns=?6, batches=agents.batches+1, symptoms=agents.symptoms+?7");
    a.bind(1, h.agent_id).bind(2, h.hostname).bind(3, h.boot_id).bind(4, h.agent_version);
    a.bind(5, h.ruleset_version).bind(6, now).bind(7, int64_t(batch.symptoms.size()));
    if (a.step() != sql::kDone) return false;
  }
  {
    noteAgentOrBoot(db, h.hostname, h.agent_id, h.boot_id, storedBootId(db, h.hostname), now);
    std::optional<Stmt> st;
    auto& n = prepare(st,
                      "INSERT INTO nodes(hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, symptoms) "
                      "VALUES(?1,?2,?3,?4,?4,?5) ON CONFLICT(hostname) DO UPDATE SET agent_id=?2, "
                      "boot_id=CASE WHEN ?3 = '' THEN nodes.boot_id ELSE ?3 END, last_seen_ns=?4, symptoms=nodes.symptoms+?5");
    n.bind(1, h.hostname).bind(2, h.agent_id).bind(3, h.boot_id).bind(4, now).bind(5, int64_t(batch.symptoms.size()));
    if (n.step() != sql::kDone) return false;
  }
  for (const auto& c : batch.sources) {
    std::optional<Stmt> st;
    auto& src = prepare(st, std::string("INSERT INTO source_status(node, source, format, status, reason, records, "
                                        "skipped, updated_ns, counted_ns) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9) "
                                        "ON CONFLICT(node, source) DO UPDATE SET format=?3, status=?4, reason=?5, "
                                        "records=?6, skipped=?7, updated_ns=?8, ") +
                                std::string(kCountedOnConflict));
    src.bind(1, h.hostname).bind(2, c.source).bind(3, c.format).bind(4, c.status).bind(5, c.reason);
    src.bind(6, c.records).bind(7, c.skipped).bind(8, now).bind(9, countedAt(c.records, c.status, now)).step();
  }
  return true;
}

namespace {

// The agent's row as a heartbeat leaves it: liveness, versions, spool state; how far it has
// reported only grows.
bool upsertHeartbeatAgent(sql::Db& db, const HeartbeatInfo& hb, int64_t now) {
  Stmt a(db.get(),
         "INSERT INTO agents(agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, last_seen_ns, "
         "last_heartbeat_ns, reported_ns, started_ns, spool_batches, spool_bytes, dropped_symptoms, next_sequence) "
         "VALUES(?1,?2,?3,?4,?5,?6,?6,?6,?7,?8,?9,?10,?11,?12) ON CONFLICT(agent_id) DO UPDATE SET boot_id=?3, "
         "agent_version=?4, ruleset_version=?5, last_seen_ns=?6, last_heartbeat_ns=?6, reported_ns=CASE WHEN "
         "agents.reported_ns > ?7 THEN agents.reported_ns ELSE ?7 END, "
         "started_ns=?8, spool_batches=?9, spool_bytes=?10, dropped_symptoms=?11, next_sequence=?12");
  a.bind(1, hb.agent_id).bind(2, hb.hostname).bind(3, hb.boot_id).bind(4, hb.agent_version);
  a.bind(5, hb.ruleset_version).bind(6, now).bind(7, hb.created_ns).bind(8, hb.started_ns);
  a.bind(9, hb.spool_batches).bind(10, hb.spool_bytes).bind(11, hb.dropped_symptoms).bind(12, hb.next_sequence);
  return a.step() == sql::kDone;
}

// The node's row (with an event for a new node or a reboot). The node has reported everything up
// to created_ns only if nothing is left in its spool.
bool upsertHeartbeatNode(sql::Db& db, const HeartbeatInfo& hb, int64_t now, const std::optional<StoredNode>& stored) {
  noteAgentOrBoot(db, hb.hostname, hb.agent_id, hb.boot_id,
                  stored ? std::optional<std::string>(stored->boot_id) : std::nullopt, now);
  Stmt n(db.get(),
         "INSERT INTO nodes(hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, last_heartbeat_ns, reported_ns, "
         "spool_batches) VALUES(?1,?2,?3,?4,?4,?4,?5,?6) ON CONFLICT(hostname) DO UPDATE SET agent_id=?2, "
         "boot_id=CASE WHEN ?3 = '' THEN nodes.boot_id ELSE ?3 END, last_seen_ns=?4, last_heartbeat_ns=?4, "
         "reported_ns=CASE WHEN ?6 = 0 AND ?5 > nodes.reported_ns THEN ?5 ELSE nodes.reported_ns END, spool_batches=?6");
  n.bind(1, hb.hostname).bind(2, hb.agent_id).bind(3, hb.boot_id).bind(4, now).bind(5, hb.created_ns);
  n.bind(6, hb.spool_batches);
  return n.step() == sql::kDone;
}

// Each source's status, with an event when it changed (a new source that is ok is no news). On
// the node's first heartbeat its counted sources count from now: a node heard only through
// batches gives the verdicts no source coverage (verdict_engine.cpp, agentCoverage), so its
// sources begin to count for them here.
void recordSourceStatus(sql::Db& db, const HeartbeatInfo& hb, int64_t now, bool first_heartbeat) {
  for (const auto& src : hb.sources) {
    Stmt old(db.get(), "SELECT status FROM source_status WHERE node = ? AND source = ?");
    old.bind(1, hb.hostname).bind(2, src.source);
    std::string old_status = old.step() == sql::kRow ? old.text(0) : "";
    if (old_status != src.status && !(old_status.empty() && src.status == "ok"))
      insertNodeEvent(db, {hb.hostname, now, "source",
                           src.source + ": " + src.status + (src.reason.empty() ? "" : " (" + src.reason + ")"), ""});
    Stmt s(db.get(),
           std::string("INSERT INTO source_status(node, source, format, status, reason, records, skipped, lost, "
                       "updated_ns, counted_ns) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10) ON CONFLICT(node, source) DO "
                       "UPDATE SET format=?3, status=?4, reason=?5, records=?6, skipped=?7, lost=?8, updated_ns=?9, ") +
               std::string(kCountedOnConflict));
    s.bind(1, hb.hostname).bind(2, src.source).bind(3, src.format).bind(4, src.status).bind(5, src.reason);
    s.bind(6, src.records).bind(7, src.skipped).bind(8, src.lost).bind(9, now);
    s.bind(10, countedAt(src.records, src.status, now)).step();
  }
  if (first_heartbeat) {
    Stmt s(db.get(), "UPDATE source_status SET counted_ns = ? WHERE node = ? AND counted_ns > 0");
    s.bind(1, now).bind(2, hb.hostname).step();
  }
}

}  // namespace

bool NodeStore::recordHeartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason) {
  if (hb.agent_id.empty() || hb.hostname.empty()) {
    *reason = "missing agent id or hostname";
    return false;
  }
  if (hb.agent_id != authenticated_agent) {
    *reason = "agent id mismatch";
    return false;
  }
  const int64_t now = clock_.nowNs();
  Lock lock(*this);
  sql::Transaction tx(*db_);
  auto storeError = [&](std::string why) {
    *reason = "store: " + why;
    return false;
  };
  if (!tx.began()) return storeError(db_->errmsg());
  if (hostnameBoundElsewhere(*db_, hb.hostname, hb.agent_id)) {
    *reason = "hostname bound to another agent";
    return false;
  }
  const auto stored = storedNode(*db_, hb.hostname);
  if (!upsertHeartbeatAgent(*db_, hb, now) || !upsertHeartbeatNode(*db_, hb, now, stored))
    return storeError(db_->errmsg());
  recordSourceStatus(*db_, hb, now, /*first_heartbeat=*/!stored || !stored->heartbeat_seen);
  if (hb.inventory && !putInventoryLocked(hb.hostname, hb.agent_id, *hb.inventory, now))
    return storeError(db_->errmsg());
  std::string err;
  if (!tx.commit(&err)) return storeError(err);
  return true;
}

std::map<std::string, int64_t> NodeStore::nodesCountedSince(int64_t after_ns) {
  Lock lock(*this);
  Stmt s(db_->get(), "SELECT node, MAX(counted_ns) FROM source_status WHERE counted_ns > ? GROUP BY node");
  s.bind(1, after_ns);
  std::map<std::string, int64_t> out;
  while (s.step() == sql::kRow) out.emplace(s.text(0), s.i64(1));
  return out;
}

std::vector<SourceStatusInfo> NodeStore::sourcesLocked(const std::string& node) {
  Stmt s(db_->get(),
         "SELECT source, format, status, reason, records, skipped, lost FROM source_status WHERE node = ? "
         "ORDER BY source");
  s.bind(1, node);
  std::vector<SourceStatusInfo> out;
  while (s.step() == sql::kRow)
    out.push_back({s.text(0), s.text(1), s.text(2), s.text(3), uint64_t(s.i64(4)), uint64_t(s.i64(5)),
                   uint64_t(s.i64(6))});
  return out;
}

std::vector<AgentRow> NodeStore::agents() {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT agent_id, hostname, boot_id, agent_version, ruleset_version, first_seen_ns, last_seen_ns, "
         "last_heartbeat_ns, last_batch_ns, reported_ns, started_ns, spool_batches, spool_bytes, dropped_symptoms, "
         "next_sequence, batches, symptoms FROM agents ORDER BY hostname");
  std::vector<AgentRow> out;
  while (s.step() == sql::kRow) {
    AgentRow a;
    a.agent_id = s.text(0);
    a.hostname = s.text(1);
    a.boot_id = s.text(2);
    a.agent_version = s.text(3);
    a.ruleset_version = s.text(4);
    a.first_seen_ns = s.i64(5);
    a.last_seen_ns = s.i64(6);
    a.last_heartbeat_ns = s.i64(7);
    a.last_batch_ns = s.i64(8);
    a.reported_ns = s.i64(9);
    a.started_ns = s.i64(10);
    a.spool_batches = s.i64(11);
    a.spool_bytes = s.i64(12);
    a.dropped_symptoms = s.i64(13);
    a.next_sequence = s.i64(14);
    a.batches = s.i64(15);
    a.symptoms = s.i64(16);
    out.push_back(std::move(a));
  }
  for (auto& a : out) a.sources = sourcesLocked(a.hostname);
  return out;
}

namespace {
constexpr const char* kNodeColumns =
    "hostname, agent_id, boot_id, first_seen_ns, last_seen_ns, last_heartbeat_ns, reported_ns, spool_batches, symptoms";
NodeRow nodeFromRow(Stmt& s) {
  NodeRow n;
  n.hostname = s.text(0);
  n.agent_id = s.text(1);
  n.boot_id = s.text(2);
  n.first_seen_ns = s.i64(3);
  n.last_seen_ns = s.i64(4);
  n.last_heartbeat_ns = s.i64(5);
  n.reported_ns = s.i64(6);
  n.spool_batches = s.i64(7);
  n.symptoms = s.i64(8);
  return n;
}
}  // namespace

std::vector<NodeRow> NodeStore::nodes() {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes ORDER BY hostname", kNodeColumns));
  std::vector<NodeRow> out;
  while (s.step() == sql::kRow) out.push_back(nodeFromRow(s));
  for (auto& n : out) n.sources = sourcesLocked(n.hostname);
  return out;
}

std::optional<NodeRow> NodeStore::node(const std::string& hostname) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes WHERE hostname = ?", kNodeColumns));
  s.bind(1, hostname);
  if (s.step() != sql::kRow) return std::nullopt;
  NodeRow n = nodeFromRow(s);
  n.sources = sourcesLocked(hostname);
  return n;
}

std::map<std::string, NodeRow> NodeStore::nodes(const std::vector<std::string>& hostnames) {
  Lock lock(*this);
  const std::string names = joinJsonArray(hostnames);
  std::map<std::string, NodeRow> out;
  Stmt s(db_->get(), fmt::format("SELECT {} FROM nodes WHERE hostname IN {}", kNodeColumns, db_->jsonList(1)));
  s.bind(1, names);
  while (s.step() == sql::kRow) {
    NodeRow n = nodeFromRow(s);
    out.emplace(n.hostname, std::move(n));
  }
  Stmt src(db_->get(), fmt::format("SELECT node, source, format, status, reason, records, skipped, lost FROM "
                                   "source_status WHERE node IN {} ORDER BY node, source",
                                   db_->jsonList(1)));
  src.bind(1, names);
  while (src.step() == sql::kRow) {
    auto it = out.find(src.text(0));
    if (it == out.end()) continue;
    it->second.sources.push_back({src.text(1), src.text(2), src.text(3), src.text(4), uint64_t(src.i64(5)),
                                  uint64_t(src.i64(6)), uint64_t(src.i64(7))});
  }
  return out;
}

std::map<std::string, int64_t> NodeStore::reportedUpTo(const std::vector<std::string>& hostnames) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT hostname, reported_ns FROM nodes WHERE hostname IN {}", db_->jsonList(1)));
  s.bind(1, joinJsonArray(hostnames));
  std::map<std::string, int64_t> out;
  while (s.step() == sql::kRow) out.emplace(s.text(0), s.i64(1));
  return out;
}

std::vector<NodeEvent> NodeStore::nodeHistory(const std::string& hostname, int64_t since_ns, size_t limit) {
  Lock lock(*this);
  Stmt s(db_->get(),
         "SELECT node, time_ns, kind, detail, job_id FROM node_events WHERE node = ? AND time_ns >= ? "
         "ORDER BY time_ns DESC, id DESC LIMIT ?");
  s.bind(1, hostname).bind(2, since_ns).bind(3, int64_t(limit));
  std::vector<NodeEvent> out;
  while (s.step() == sql::kRow) out.push_back({s.text(0), s.i64(1), s.text(2), s.text(3), s.text(4)});
  return out;
}

}  // namespace faultline::aggregator

// Nodes and their agents: heartbeats, source status, inventories, facts and history. Owns the
// tables agents, nodes, source_status, node_events and node_inventory (node_store.cpp; the
// inventories and per-node facts in node_facts_store.cpp). Batches write their sender's rows
// through recordSender and insertNodeEvent (below) in the ingest's transaction. Part of the Store
// facade (store.h): every method takes the write connection's lock (store_core.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "aggregator/store/store_core.h"
#include "aggregator/store/store_rows.h"

namespace faultline::aggregator {

class NodeStore : protected StorePart {
 public:
  // Records the agent's liveness, spool state and per-source status. false + *reason on reject.
  bool recordHeartbeat(const HeartbeatInfo& hb, std::string_view authenticated_agent, std::string* reason);

  std::vector<AgentRow> agents();
  std::vector<NodeRow> nodes();
  std::optional<NodeRow> node(const std::string& hostname);
  // The rows (with their sources) of those of `hostnames` that have one: two queries for a whole
  // job's nodes (the verdict's coverage) instead of two per node.
  std::map<std::string, NodeRow> nodes(const std::vector<std::string>& hostnames);
  // Of those, how far each has reported (NodeRow::reported_ns) and nothing else: the tick's
  // "every node reported" check for an open verdict.
  std::map<std::string, int64_t> reportedUpTo(const std::vector<std::string>& hostnames);
  // The nodes with a source that began to count for the verdicts' coverage after `after_ns`
  // (source_status.counted_ns: records read, ok or partial; from the node's first heartbeat),
  // each with the latest such time.
  std::map<std::string, int64_t> nodesCountedSince(int64_t after_ns);
  std::vector<NodeEvent> nodeHistory(const std::string& hostname, int64_t since_ns, size_t limit = 200);
  bool addNodeEvent(const NodeEvent& e);

  // The latest inventory stored for each of `nodes` that has one (from agents' heartbeats).
  std::map<std::string, common::NodeInventory> inventories(const std::vector<std::string>& nodes);
  // What the verdict takes from those inventories, without reading them whole.
  std::map<std::string, InventoryFacts> inventoryFacts(const std::vector<std::string>& nodes);
  // Per node of `nodes` named in responsible_nodes of the latest verdict of a failed job (other
  // than `exclude_job_id`, of the same `site`) that ended in [since_ns, until_ns]: how many such
  // jobs and up to `max_job_ids` of them. Nodes never named are left out.
  std::map<std::string, NodeFailures> recentFailures(const std::vector<std::string>& nodes, int64_t since_ns,
                                                     int64_t until_ns, const std::string& exclude_job_id,
                                                     const std::string& site, size_t max_job_ids);

 protected:
  explicit NodeStore(StoreCore& core) : StorePart(core) {}

 private:
  std::vector<SourceStatusInfo> sourcesLocked(const std::string& node);
  bool putInventoryLocked(const std::string& node, const std::string& agent_id, const common::NodeInventory& inv,
                          int64_t now_ns);
};

// For the other parts' transactions (the caller holds the write connection's lock):
// a node event row (kept statement: a fleet's agents all come up at once after an outage).
void insertNodeEvent(sql::Db& db, const NodeEvent& e);
// A stored batch's sender, for SymptomStore::ingestBatch (the one-batch path; ingestBatches folds
// the same rows for a whole run): the agent's and node's rows (counts, last seen, boot), a node
// event for a new node or a reboot, the node's source coverage. false: a write failed.
bool recordSender(sql::Db& db, const common::SymptomBatchData& batch, int64_t now);
// Whether `hostname` is bound to an agent other than `agent_id` (a node has one agent).
bool hostnameBoundElsewhere(sql::Db& db, const std::string& hostname, const std::string& agent_id);
// The node's stored boot id; nullopt when it has no row yet.
std::optional<std::string> storedBootId(sql::Db& db, const std::string& hostname);
// The node event a batch or heartbeat raises: its agent seen for the first time (no stored row),
// or a reboot (a boot id other than the stored one; an empty one says nothing).
void noteAgentOrBoot(sql::Db& db, const std::string& hostname, const std::string& agent_id, const std::string& boot_id,
                     const std::optional<std::string>& stored_boot, int64_t now);

}  // namespace faultline::aggregator

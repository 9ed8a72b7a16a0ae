// The Store's per-node facts for the verdict engine (store.h): the latest inventory each agent
// sent, and a node's record in other jobs' verdicts. Same rules as store.cpp: bound parameters
// only, errors returned, never thrown.
#include <fmt/format.h>

#include <set>

#include "aggregator/store/db.h"
#include "aggregator/store/node_store.h"
#include "aggregator/store/store_internal.h"

namespace faultline::aggregator {

using nlohmann::json;
using sql::Stmt;

namespace {

json inventoryToJson(const common::NodeInventory& inv) {
  json gpus = json::array(), hcas = json::array();
  for (const auto& g : inv.gpus)
    gpus.push_back({{"index", g.index}, {"pci_bus_id", g.pci_bus_id}, {"uuid", g.uuid}, {"serial", g.serial}});
  for (const auto& p : inv.hcas)
    hcas.push_back({{"name", p.name},
                    {"pci_address", p.pci_address},
                    {"port", p.port},
                    {"state", p.state},
                    {"link_layer", p.link_layer}});
  return json{{"collected_ns", inv.collected_ns}, {"gpus", gpus},          {"hcas", hcas},
              {"gpu_error", inv.gpu_error},     {"hca_error", inv.hca_error}, {"addresses", inv.addresses}};
}

common::NodeInventory inventoryFromJson(const json& j) {
  common::NodeInventory inv;
  if (!j.is_object()) return inv;
  inv.collected_ns = j.value("collected_ns", int64_t{0});
  inv.gpu_error = j.value("gpu_error", "");
  inv.hca_error = j.value("hca_error", "");
  if (j.contains("gpus") && j["gpus"].is_array())
    for (const auto& g : j["gpus"])
      if (g.is_object())
        inv.gpus.push_back({g.value("index", uint32_t{0}), g.value("pci_bus_id", ""), g.value("uuid", ""),
                            g.value("serial", "")});
  if (j.contains("hcas") && j["hcas"].is_array())
    for (const auto& p : j["hcas"])
      if (p.is_object())
        inv.hcas.push_back({p.value("name", ""), p.value("pci_address", ""), p.value("port", uint32_t{0}),
                            p.value("state", ""), p.value("link_layer", "")});
  if (j.contains("addresses") && j["addresses"].is_array())
    for (const auto& a : j["addresses"])
      if (a.is_string()) inv.addresses.push_back(a.get<std::string>());
  return inv;
}

}  // namespace

bool NodeStore::putInventoryLocked(const std::string& node, const std::string& agent_id, const common::NodeInventory& inv,
                               int64_t now_ns) {
  Stmt s(db_->get(),
         "INSERT INTO node_inventory(node, agent_id, collected_ns, received_ns, inventory, gpu_count, addresses) "
         "VALUES(?1,?2,?3,?4,?5,?6,?7) ON CONFLICT(node) DO UPDATE SET agent_id=?2, collected_ns=?3, received_ns=?4, "
         "inventory=?5, gpu_count=?6, addresses=?7");
  const int64_t gpu_count = inv.gpu_error.empty() ? static_cast<int64_t>(inv.gpus.size()) : -1;
  s.bind(1, node).bind(2, agent_id).bind(3, inv.collected_ns).bind(4, now_ns).bind(5, inventoryToJson(inv).dump());
  s.bind(6, gpu_count).bind(7, json(inv.addresses).dump());
  return s.step() == sql::kDone;
}

std::map<std::string, common::NodeInventory> NodeStore::inventories(const std::vector<std::string>& nodes) {
  Lock lock(*this);
  Stmt s(db_->get(), fmt::format("SELECT node, inventory FROM node_inventory WHERE node IN {}", db_->jsonList(1)));
  s.bind(1, json(nodes).dump());
  std::map<std::string, common::NodeInventory> out;
  while (s.step() == sql::kRow) out[s.text(0)] = inventoryFromJson(json::parse(s.text(1), nullptr, false));
  return out;
}

std::map<std::string, InventoryFacts> NodeStore::inventoryFacts(const std::vector<std::string>& nodes) {
  Lock lock(*this);
  // The inventory text only for rows stored before migration 7 (gpu_count -2).
  Stmt s(db_->get(), fmt::format("SELECT node, gpu_count, addresses, CASE WHEN gpu_count = -2 THEN inventory ELSE '' END "
                                 "FROM node_inventory WHERE node IN {}",
                                 db_->jsonList(1)));
  s.bind(1, json(nodes).dump());
  std::map<std::string, InventoryFacts> out;
  while (s.step() == sql::kRow) {
    InventoryFacts& f = out[s.text(0)];
    const int64_t gpus = s.i64(1);
    if (gpus == -2) {
      auto inv = inventoryFromJson(json::parse(s.view(3), nullptr, false));
      if (inv.gpu_error.empty()) f.gpu_count = static_cast<int>(inv.gpus.size());
      f.addresses = std::move(inv.addresses);
      continue;
    }
    if (gpus >= 0) f.gpu_count = static_cast<int>(gpus);
    const json a = json::parse(s.view(2), nullptr, false);
    if (a.is_array())
      for (const auto& e : a)
        if (e.is_string()) f.addresses.push_back(e.get<std::string>());
  }
  return out;
}

std::map<std::string, NodeFailures> NodeStore::recentFailures(const std::vector<std::string>& nodes, int64_t since_ns,
                                                          int64_t until_ns, const std::string& exclude_job_id,
                                                          const std::string& site, size_t max_job_ids) {
  Lock lock(*this);
  // One pass over the window's jobs (jobs_by_end), each latest verdict's responsible list read
  // once, kept only for the asked nodes; a job naming a node twice (two devices) counts once.
  // Counted per event: jobs that inherited one lasting fault (the same cause rule, device and
  // time) count it once.
  const std::string blamed = db_->jsonField("r.value", "node");
  Stmt s(db_->get(), fmt::format("SELECT DISTINCT {0} AS blamed, j.job_id, j.end_ns, {3}, {4}, {5} "
                                 "FROM jobs j JOIN verdicts v ON v.job_id = j.job_id AND v.latest = 1, {1} "
                                 "WHERE j.end_ns >= ?2 AND j.end_ns <= ?3 AND j.job_id != ?4 AND j.site = ?5 "
                                 "AND j.terminal_state NOT IN ('', 'success') AND {0} IN {2} "
                                 "ORDER BY blamed, j.end_ns DESC, j.job_id DESC",
                                 blamed, db_->jsonArray("v.diagnosis", "responsible_nodes", "r"), db_->jsonList(1),
                                 db_->jsonText("v.diagnosis", "cause.rule_id"), db_->jsonText("v.diagnosis", "cause.device"),
                                 db_->jsonText("v.diagnosis", "cause.time")));
  s.bind(1, json(nodes).dump()).bind(2, since_ns).bind(3, until_ns).bind(4, exclude_job_id).bind(5, site);
  std::map<std::string, NodeFailures> out;
  std::map<std::string, std::set<std::string>> events;  // node -> cause keys counted
  while (s.step() == sql::kRow) {
    const std::string node = s.text(0);
    const std::string rule = s.text(3), time = s.text(5);
    if (!rule.empty() && !time.empty() && !events[node].insert(rule + "\n" + s.text(4) + "\n" + time).second) continue;
    auto& f = out[node];
    ++f.failures;
    if (f.job_ids.size() < max_job_ids) f.job_ids.push_back(s.text(1));
  }
  return out;
}

}  // namespace faultline::aggregator

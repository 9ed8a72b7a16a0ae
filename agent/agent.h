// The agent's pipeline on one io_context: sources → rule engine → SymptomAggregator → spool →
// shipper, plus heartbeats, sd_notify and rule reloads.
//
// Every batch_interval the agent commits: it flushes the sources' held-back records, drains the
// aggregation groups whose window has passed into batches, and writes those batches, the groups
// still open and every source's checkpoint to the spool in one transaction; then it kicks the
// shipper. A kill -9 between commits loses nothing: on restart the open groups come back from the
// spool and the sources resume from the checkpoints of the last commit.
//
// Periodic work rides on the commit timer and is timed by the injected clock (tests call
// periodic() after advancing a ManualClock): the node inventory is collected at start and
// re-checked every inventory_interval_ns — a change is sent in a heartbeat at once — and the
// source discovery callback (file_globs) is asked for new sources every discovery_interval_ns.
//
// Owns nothing it is given except the sources; the io_context, clock, spool, shipper and
// inventory collector must outlive it. Single-threaded; never throws out of a handler (failures are logged and counted).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/clock.h"
#include "agent/inventory.h"
#include "agent/protocol.h"
#include "agent/sources/source.h"
#include "agent/spool.h"
#include "agent/unmatched_templates.h"
#include "common/rule_engine.h"
#include "common/symptom_aggregator.h"
#include "common/uplink/log.h"
#include "common/uplink/shipper.h"

namespace faultline::agent {

// The uplink (shipper, rate cap, logger) is shared with the aggregator's site relay.
using uplink::Logger;
using uplink::Shipper;
using uplink::ShipperOptions;
using uplink::ShipperStats;

struct AgentOptions {
  std::string agent_id;
  std::string hostname;
  std::string boot_id;
  std::string agent_version = FAULTLINE_VERSION;
  int64_t aggregate_window_ns = 10'000'000'000;
  int batch_interval_ms = 2000;     // <= 0: no timer, commit() is called by hand (tests)
  int heartbeat_interval_ms = 30000;
  int watchdog_interval_ms = 0;     // > 0: send WATCHDOG=1 this often
  size_t max_symptoms_per_batch = 1000;
  int64_t inventory_interval_ns = 600'000'000'000;  // re-check the devices this often
  // Heartbeats carry the inventory when it changed since the last one that carried it, and at
  // least every this many heartbeats (an aggregator that restarted learns it again); 0: only on
  // change.
  int inventory_every_heartbeats = 10;
  int64_t discovery_interval_ns = 30'000'000'000;  // ask SourceDiscovery this often
  // Issue 30: the error lines no rule matched go through a bounded template miner
  // (unmatched_templates.h) and each batch carries what it saw since the last one. The file
  // sources' parsers then also hand on records holding an error-lexicon word.
  bool mine_unmatched = true;
  UnmatchedTemplatesOptions unmatched;
};

// Returns sources to add: those whose name() is not in `known` (file_globs re-expanded). Called
// on the io_context thread; the agent starts them with their checkpoint from the spool.
using SourceDiscovery =
    std::function<std::vector<std::unique_ptr<Source>>(const std::vector<std::string>& known)>;

struct AgentStats {
  uint64_t records = 0;
  uint64_t symptoms = 0;        // symptom occurrences extracted by the engine
  uint64_t spooled = 0;         // aggregated symptoms written to the spool
  uint64_t commits = 0;
  uint64_t commit_errors = 0;
  uint64_t rule_reloads = 0;
  uint64_t inventories = 0;         // collections finished
  uint64_t inventory_changes = 0;   // ... that differed from the previous one (the first counts)
  uint64_t sources_added = 0;       // by discovery after start
  uint64_t unmatched_records = 0;   // records no rule matched that went to the template miner
};

// A copy of `full` without what only people and tests read (meaning, action, NVIDIA catalog
// facts, examples, the expanded pattern text, file and pack names): the rule engine extracts the
// same symptoms from it. The agent keeps only this copy, which saves a few hundred KB of RSS.
std::shared_ptr<const common::RuleSet> leanRuleSet(const common::RuleSet& full);

// sd_notify(3) state strings; empty function = not under systemd.
using Notifier = std::function<void(const std::string& state)>;

class Agent {
 public:
  Agent(boost::asio::io_context& io, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
        std::vector<std::unique_ptr<Source>> sources, Spool& spool, Shipper* shipper, AgentOptions options,
        Logger& log, Notifier notify = {}, InventoryCollector* inventory = nullptr);
  ~Agent();

  // Restores open groups and checkpoints from the spool, starts the sources and timers.
  void start();
  // The atomic step described above. False (and logged) when the spool refused it; the
  // symptoms stay in memory for the next attempt.
  bool commit();
  // Final commit, STOPPING=1, sources stopped.
  void stop();
  // Swaps the rule set (SIGHUP). The caller validated it.
  void reloadRules(std::shared_ptr<const common::RuleSet> rules);
  // Set before start(). New sources found later are read from their beginning (they appeared
  // after the agent started watching) unless the spool has a checkpoint for them.
  void setSourceDiscovery(SourceDiscovery discovery) { discovery_ = std::move(discovery); }
  // Inventory re-check and source discovery when due (by the injected clock). The commit timer
  // calls it; tests call it by hand.
  void periodic();
  // Builds and sends one heartbeat now (with the inventory when due, see AgentOptions).
  void sendHeartbeat();

  // The heartbeat's content; carries inventory_hash but not the inventory itself.
  HeartbeatData heartbeat() const;
  const std::optional<common::NodeInventory>& inventory() const { return inventory_; }
  size_t sourceCount() const { return sources_.size(); }
  std::vector<SourceHealth> sourceHealth() const;
  const AgentStats& stats() const { return stats_; }
  size_t openGroups() const { return aggregator_.pending(); }
  const UnmatchedTemplates& unmatched() const { return unmatched_; }

 private:
  void onRecord(const std::string& source, common::LogRecord&& record, common::SourceKind kind);
  void startSource(Source& s, const std::map<std::string, std::string>& checkpoints);
  void onInventory(common::NodeInventory inv);
  void discover();
  void armCommit();
  // Next heartbeat after `delay_ms` (-1: the configured interval).
  void armHeartbeat(int64_t delay_ms = -1);
  void armWatchdog();
  std::string statusLine() const;

  boost::asio::io_context& io_;
  const Clock& clock_;
  std::unique_ptr<common::RuleEngine> engine_;
  std::vector<std::unique_ptr<Source>> sources_;
  Spool& spool_;
  Shipper* shipper_;
  AgentOptions options_;
  Logger& log_;
  Notifier notify_;
  InventoryCollector* inventory_collector_;
  SourceDiscovery discovery_;
  common::SymptomAggregator aggregator_;
  UnmatchedTemplates unmatched_;
  // The error words' search (common/error_lexicon.h) for records no parser searched for them
  // (journal, kmsg); null when not mining. `error_ids_` is its scratch.
  std::shared_ptr<const common::LiteralScanner> error_words_;
  std::vector<int> error_ids_;
  boost::asio::steady_timer commit_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer watchdog_timer_;
  AgentStats stats_;
  int64_t started_ns_ = 0;
  std::optional<common::NodeInventory> inventory_;
  uint64_t inventory_hash_ = 0;
  bool heartbeat_retry_armed_ = false;  // the last heartbeat could not be queued: retrying soon
  bool inventory_unsent_ = false;     // changed since the last heartbeat that carried it
  int beats_without_inventory_ = 0;
  int64_t next_inventory_steady_ = 0;  // clock_.steadyNs() when the next re-check is due
  int64_t next_discovery_steady_ = 0;
  bool dirty_ = false;
  std::map<std::string, std::string> committed_checkpoints_;  // as of the last commit
  bool stopped_ = true;
};

}  // namespace faultline::agent

// The agent's pipeline on one io_context: sources → rule engine → SymptomAggregator → spool →
// shipper, plus heartbeats, sd_notify and rule reloads.
//
// Every batch_interval the agent commits: it flushes the sources' held-back records, drains the
// aggregation groups whose window has passed into batches, and writes those batches, the groups
// still open and every source's checkpoint to the spool in one transaction; then it kicks the
// shipper. A kill -9 between commits loses nothing: on restart the open groups come back from the
// spool and the sources resume from the checkpoints of the last commit.
//
// Owns nothing it is given except the sources; the io_context, clock, spool and shipper must
// outlive it. Single-threaded; never throws out of a handler (failures are logged and counted).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/clock.h"
#include "agent/log.h"
#include "agent/protocol.h"
#include "agent/shipper.h"
#include "agent/sources/source.h"
#include "agent/spool.h"
#include "common/rule_engine.h"
#include "common/symptom_aggregator.h"

namespace faultline::agent {

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
};

struct AgentStats {
  uint64_t records = 0;
  uint64_t symptoms = 0;        // symptom occurrences extracted by the engine
  uint64_t spooled = 0;         // aggregated symptoms written to the spool
  uint64_t commits = 0;
  uint64_t commit_errors = 0;
  uint64_t rule_reloads = 0;
};

// sd_notify(3) state strings; empty function = not under systemd.
using Notifier = std::function<void(const std::string& state)>;

class Agent {
 public:
  Agent(boost::asio::io_context& io, const Clock& clock, std::shared_ptr<const common::RuleSet> rules,
        std::vector<std::unique_ptr<Source>> sources, Spool& spool, Shipper* shipper, AgentOptions options,
        Logger& log, Notifier notify = {});
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

  HeartbeatData heartbeat() const;
  std::vector<SourceHealth> sourceHealth() const;
  const AgentStats& stats() const { return stats_; }
  size_t openGroups() const { return aggregator_.pending(); }

 private:
  void onRecord(const std::string& source, common::LogRecord&& record, common::SourceKind kind);
  void armCommit();
  void armHeartbeat();
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
  common::SymptomAggregator aggregator_;
  boost::asio::steady_timer commit_timer_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer watchdog_timer_;
  AgentStats stats_;
  int64_t started_ns_ = 0;
  bool dirty_ = false;
  bool stopped_ = true;
};

}  // namespace faultline::agent

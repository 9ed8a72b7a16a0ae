// faultline-agent's composition: from a checked configuration and its rules, builds the spool,
// the sources (journald, kmsg, followed files and the globs' later files), the shipper, the
// inventory collector and the Agent on one io_context, and runs them until SIGTERM/SIGINT; SIGHUP
// reloads the rules; every minute freed memory goes back to the kernel. Members are declared in
// the order they are built, so they are torn down in reverse. main() only parses and checks
// (issue 32); the pieces' logic lives in the faultline_agent library.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <memory>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "agent/agent.h"
#include "agent/config.h"
#include "agent/inventory.h"
#include "agent/spool.h"
#include "common/rule_cache.h"
#include "common/uplink/log.h"
#include "common/uplink/shipper.h"

namespace faultline::agent {

// The rule directories a configuration names that exist (else the build tree's), then the
// override directory.
std::vector<std::string> agentRuleDirs(const AgentConfig& config);

// The rules, from the cache when it holds them (a warm start). Else, at start-up (no thread yet),
// a child process builds the cache and the agent reads it back, so the build's garbage never
// enters the agent's heap; on a reload, a helper thread builds it. Without a cache directory:
// built here.
common::CachedRuleLoad loadAgentRules(const AgentConfig& config, bool at_start);

// `faultline-agent keygen DIR`: a CurveZMQ key pair as DIR/agent.key (0600) and DIR/agent.pub.
int agentKeygen(const std::string& dir);

class AgentService {
 public:
  // `config` with hostname and agent id filled in.
  explicit AgentService(AgentConfig config);
  ~AgentService();
  AgentService(const AgentService&) = delete;
  AgentService& operator=(const AgentService&) = delete;

  // Builds and runs until a stop signal. The process's exit code: 0 after the signal, 1 when the
  // spool or the shipper cannot start (said on stderr).
  int run(common::RuleLoadResult rules);

 private:
  bool openSpool();
  void buildSources();
  bool startShipper();
  AgentOptions agentOptions() const;
  void armTrim();
  void armStop();
  void armHup();

  AgentConfig cfg_;
  std::string boot_id_;
  int64_t boot_time_ns_ = 0;  // kmsg stamps and followed dmesg files are boot-relative
  SystemClock clock_;
  Logger log_;
  boost::asio::io_context io_;
  std::unique_ptr<Spool> spool_;
  std::vector<std::unique_ptr<Source>> sources_;  // handed to the Agent
  SourceDiscovery discovery_;
  zmq::context_t zmq_ctx_{1};
  std::unique_ptr<Shipper> shipper_;
  std::unique_ptr<InventoryCollector> inventory_;
  std::unique_ptr<Agent> agent_;
  boost::asio::steady_timer trim_timer_{io_};
  boost::asio::signal_set stop_signals_{io_, SIGTERM, SIGINT};
  boost::asio::signal_set hup_{io_, SIGHUP};
};

}  // namespace faultline::agent

// faultline-aggregator's configuration: every command-line option in one struct, grouped by the
// piece it configures, and the checks and file reads that turn options into a runnable
// configuration (secrets read from their files, combinations refused with the reason). main()
// parses into it and hands it to AggregatorService (app/service.h); nothing here starts anything.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "aggregator/evidence/prometheus.h"
#include "aggregator/http/server.h"

namespace CLI {
class App;
}

namespace faultline::aggregator {

struct AggregatorConfig {
  // Store.
  std::string db;  // SQLite file or postgresql:// URL
  double leader_poll_s = 1;
  bool sync_full = false;
  size_t symptom_cache_mb = 0;
  double retention_days = 30, job_retention_days = 180;

  // HTTP API.
  std::string listen = "127.0.0.1";
  uint16_t port = 8470;
  std::string port_file;
  std::string token_file, read_token_file;
  std::string token, read_token;  // read from the files by resolve()
  HttpServerOptions http;
  bool insecure_http = false;
  double header_timeout_s = 30;
  std::vector<std::string> fact_open_from;

  // Rules and verdicts.
  std::vector<std::string> rule_dirs;  // empty: the shipped rules
  double settle_s = 120, margin_s = 30, agent_timeout_s = 90, final_timeout_s = 3600, tick_s = 0.25;
  PrometheusOptions prometheus;
  std::string prometheus_token_file, prometheus_password_file;

  // Jobs from Slurm.
  std::string sacct_command;
  double sacct_interval_s = 0;

  // Agents' ingest.
  std::string ingest_endpoint = "tcp://127.0.0.1:7400", ingest_endpoint_file;
  std::string curve_secret_file, allow_dir;
  std::string curve_secret;  // read by resolve()
  size_t max_message_bytes = 16 << 20;
  bool ingest_legacy = false;
  int ingest_pass = 1024;

  // Site relay.
  std::string relay_upstream, relay_site, relay_server_key_file;
  std::string relay_server_key;  // read by resolve()
  bool relay_symptoms = false, relay_zstd = false, relay_full_revisions = false;
  uint64_t relay_rate = 0, relay_max_bytes = 256ull << 20;
  double relay_interval_s = 2, relay_ack_timeout_s = 10;
};

// The defaults that depend on the machine: the store under $STATE_DIRECTORY, the decoded-symptom
// cache from the memory available.
AggregatorConfig defaultAggregatorConfig();

// Every option, bound to `config`'s fields.
void addAggregatorOptions(CLI::App& app, AggregatorConfig& config);

// Checks the combinations and reads the key, token and password files into `config`. "" when it
// can run; else what is wrong, for the operator (the caller exits with 2).
std::string resolveAggregatorConfig(AggregatorConfig& config);

}  // namespace faultline::aggregator

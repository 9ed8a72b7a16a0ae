// The aggregator-facing subcommands of `faultline`: job events (job start|end|import|output) and
// queries (jobs, job ID, nodes, node HOST, symptoms, agents). Each talks to the aggregator's HTTP
// API (--server, the default) or reads/writes its SQLite file (--db); both go through the same
// API routing, so the output is identical. Exit codes: 0 ok, 1 not found / no verdict,
// 2 bad usage or input, 3 aggregator or database unreachable.
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <vector>

#include "common/rule_engine.h"

namespace faultline::cli {

struct RemoteCommands {
  CLI::App *jobs = nullptr, *job = nullptr, *job_start = nullptr, *job_end = nullptr, *job_import = nullptr,
           *job_output = nullptr, *nodes = nullptr, *node = nullptr, *symptoms = nullptr, *agents = nullptr;
};

struct RemoteOptions {
  RemoteCommands cmds;
  std::string server;
  std::string db;
  std::string token;
  std::string token_file;
  std::string ca_file;  // https --server: the CA its certificate must chain to ("" = system CAs)
  double timeout_sec = 10;
  bool json = false;
  // jobs / nodes / symptoms filters
  std::string since, state, sub_domain, node, rule;
  std::vector<std::string> nodes;
  size_t limit = 0;
  bool rank = false;
  size_t min_jobs = 1;
  bool history = false;
  bool refusals = false;  // agents --refusals
  // job events
  std::string job_id, host, nodelist, exit_code, time, start_time, import_file;
  int ntasks_per_node = 0;
  std::string job_name, job_user, job_partition;  // job start/end: the workload (baseline runs share it)
  // job output
  std::vector<std::string> output_files;
  std::string output_node;
};

// The first line of a secret file (a token, a password) without trailing blanks; nullopt and
// *error ("cannot read WHAT PATH: why", "WHAT PATH is empty") when it cannot be read or is empty.
std::optional<std::string> readSecretFile(const std::string& path, const std::string& what, std::string* error);

// Adds the subcommands to `app`; `opts` receives the parsed values (must outlive parsing).
void addRemoteCommands(CLI::App& app, RemoteOptions& opts);
// Runs the chosen subcommand if it is one of ours; returns its exit code, or -1 if not ours.
// `job output` is not run here (it needs the rules): see runJobOutput.
int runRemoteCommands(CLI::App& app, RemoteOptions& opts);
// `faultline job output ID FILE...`: extracts each job-wide log's symptoms here, with the rule
// engine, ranks placed through the job's layout (--nodes/--ntasks-per-node, else what the
// aggregator knows of the job), and posts them to /jobs/ID/output; prints the verdict.
int runJobOutput(const RemoteOptions& opts, const common::RuleEngine& engine);

}  // namespace faultline::cli

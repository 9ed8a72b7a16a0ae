#include "agent/config.h"

#include <yaml-cpp/yaml.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <map>
#include <sstream>

#include "agent/system_info.h"

namespace faultline::agent {

namespace {

// One table drives both the YAML keys and the flags, so they cannot drift apart.
struct Key {
  const char* name;
  const char* help;
  std::function<bool(const YAML::Node&, AgentConfig*)> from_yaml;
  std::function<void(CLI::App&, const std::string& flag, AgentConfig*)> add_flag;
};

template <typename T>
Key scalar(const char* name, T AgentConfig::*field, const char* help) {
  return {name, help,
          [field](const YAML::Node& n, AgentConfig* c) {
            if (!n.IsScalar()) return false;
            c->*field = n.as<T>();
            return true;
          },
          [field, help](CLI::App& app, const std::string& flag, AgentConfig* c) {
            if constexpr (std::is_same_v<T, bool>) {
              // A bare `--flag` turns it on; `--flag false` off. The help states the real default,
              // not the bare flag's value.
              app.add_option(flag, c->*field, help)
                  ->expected(0, 1)
                  ->default_str("true")
                  ->option_text(std::string("[BOOLEAN] (default: ") + (c->*field ? "true" : "false") + ")");
            } else {
              app.add_option(flag, c->*field, help);
            }
          }};
}

Key list(const char* name, std::vector<std::string> AgentConfig::*field, const char* help) {
  return {name, help,
          [field](const YAML::Node& n, AgentConfig* c) {
            if (n.IsScalar()) {
              c->*field = {n.as<std::string>()};
              return true;
            }
            if (!n.IsSequence()) return false;
            (c->*field).clear();
            for (const auto& v : n) (c->*field).push_back(v.as<std::string>());
            return true;
          },
          [field, help](CLI::App& app, const std::string& flag, AgentConfig* c) {
            app.add_option(flag, c->*field, help);
          }};
}

const std::vector<Key>& keys() {
  static const std::vector<Key> k = {
      scalar("agent_id", &AgentConfig::agent_id, "agent id (default: hostname)"),
      scalar("hostname", &AgentConfig::hostname, "node name reported in symptoms (default: gethostname)"),
      scalar("state_dir", &AgentConfig::state_dir, "state directory (spool)"),
      scalar("spool_path", &AgentConfig::spool_path, "spool database (default: <state_dir>/spool.db)"),
      scalar("spool_max_bytes", &AgentConfig::spool_max_bytes, "bound of unacknowledged batches in the spool"),
      scalar("spool_synchronous", &AgentConfig::spool_synchronous,
             "normal|full: fsync the spool at checkpoints (kill -9 safe) or on every commit (power-loss safe)"),
      list("rules_dirs", &AgentConfig::rules_dirs, "rule directories"),
      scalar("rules_override_dir", &AgentConfig::rules_override_dir, "local rule directory, loaded after rules_dirs"),
      scalar("rules_cache_dir", &AgentConfig::rules_cache_dir,
             "rule cache directory (default: <state_dir>; off: load the YAML rules every start)"),
      list("endpoints", &AgentConfig::endpoints, "aggregator endpoints (tcp://host:port)"),
      scalar("curve_secret_key_file", &AgentConfig::curve_secret_key_file, "file with this agent's Z85 secret key"),
      scalar("curve_server_public_key", &AgentConfig::curve_server_public_key, "aggregator's Z85 public key"),
      scalar("batch_interval_ms", &AgentConfig::batch_interval_ms, "commit + ship period"),
      scalar("aggregate_window_s", &AgentConfig::aggregate_window_s, "window that merges identical symptoms"),
      scalar("heartbeat_interval_s", &AgentConfig::heartbeat_interval_s, "heartbeat period"),
      scalar("ack_timeout_ms", &AgentConfig::ack_timeout_ms,
             "resend a batch not acknowledged within this (before any ack is measured; the floor)"),
      scalar("ack_timeout_max_ms", &AgentConfig::ack_timeout_max_ms,
             "ceiling of the ack timeout, which adapts to the measured round trip and backs off"),
      scalar("max_in_flight", &AgentConfig::max_in_flight, "unacknowledged batches on the wire"),
      scalar("critical_first", &AgentConfig::critical_first, "send the most severe batches first"),
      scalar("rate_limit_bytes_per_sec", &AgentConfig::rate_limit_bytes_per_sec, "link byte-rate cap (0: none)"),
      scalar("rate_burst_bytes", &AgentConfig::rate_burst_bytes, "token bucket size"),
      scalar("compression", &AgentConfig::compression, "none|zstd: compress batches on the wire"),
      scalar("compression_level", &AgentConfig::compression_level, "zstd level (1..19)"),
      scalar("nvidia_smi", &AgentConfig::nvidia_smi, "GPU inventory command (\"\" disables)"),
      scalar("sysfs_root", &AgentConfig::sysfs_root, "sysfs root for the HCA inventory"),
      scalar("inventory_interval_s", &AgentConfig::inventory_interval_s, "re-check the node inventory this often"),
      scalar("inventory_every_heartbeats", &AgentConfig::inventory_every_heartbeats,
             "send an unchanged inventory every N heartbeats (0: only on change)"),
      scalar("journald", &AgentConfig::journald, "follow the journal"),
      scalar("journal_dir", &AgentConfig::journal_dir, "journal directory (default: the system journal)"),
      list("journal_files", &AgentConfig::journal_files, "journal files to read instead"),
      scalar("journal_from_head", &AgentConfig::journal_from_head, "without a cursor, read the whole journal"),
      scalar("kmsg", &AgentConfig::kmsg, "follow /dev/kmsg"),
      scalar("kmsg_path", &AgentConfig::kmsg_path, "kernel log device"),
      scalar("kernel_source", &AgentConfig::kernel_source, "kmsg|journal: which source carries kernel messages"),
      scalar("boot_id_file", &AgentConfig::boot_id_file, "boot id file"),
      scalar("fabricmanager_log", &AgentConfig::fabricmanager_log, "Fabric Manager log (\"\" disables)"),
      list("file_globs", &AgentConfig::file_globs, "application log globs"),
      scalar("file_glob_interval_s", &AgentConfig::file_glob_interval_s, "re-expand file_globs this often"),
      scalar("files_from_start", &AgentConfig::files_from_start, "without a checkpoint, read whole files"),
      scalar("file_read_delay_ms", &AgentConfig::file_read_delay_ms,
             "wait this long after a file change before reading (coalesces small appends)"),
      scalar("file_poll_ms", &AgentConfig::file_poll_ms, "fallback file poll period besides inotify"),
      scalar("utc_offset_s", &AgentConfig::utc_offset_s, "local time - UTC of local-time logs (default: system zone)"),
      scalar("unmatched_templates", &AgentConfig::unmatched_templates,
             "ship templates of the error lines no rule matched (counts, not lines)"),
      scalar("unmatched_max_templates", &AgentConfig::unmatched_max_templates,
             "templates the agent's miner keeps at most (memory bound)"),
      scalar("unmatched_per_batch", &AgentConfig::unmatched_per_batch,
             "template sightings per batch at most (the rest are counted as left out)"),
      scalar("log_rate_per_minute", &AgentConfig::log_rate_per_minute, "own log lines per minute"),
  };
  return k;
}

std::string flagName(const char* key) {
  std::string f = std::string("--") + key;
  for (auto& ch : f)
    if (ch == '_') ch = '-';
  return f;
}

}  // namespace

void applyYaml(const std::string& yaml_text, const std::string& file_name, AgentConfig* cfg,
               std::vector<std::string>* errors) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    errors->push_back(file_name + ":" + std::to_string(e.mark.line + 1) + ": " + e.msg);
    return;
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    errors->push_back(file_name + ":1: expected a mapping of keys");
    return;
  }
  for (const auto& kv : root) {
    std::string name = kv.first.as<std::string>();
    std::string where = file_name + ":" + std::to_string(kv.first.Mark().line + 1) + ": ";
    const Key* key = nullptr;
    for (const auto& k : keys())
      if (name == k.name) key = &k;
    if (!key) {
      errors->push_back(where + "unknown key '" + name + "'");
      continue;
    }
    try {
      if (!key->from_yaml(kv.second, cfg)) errors->push_back(where + "bad value for '" + name + "'");
      if (name == "utc_offset_s") cfg->utc_offset_set = true;
    } catch (const YAML::Exception& e) {
      errors->push_back(where + "bad value for '" + name + "': " + e.msg);
    }
  }
}

void validate(const AgentConfig& c, std::vector<std::string>* errors) {
  auto err = [&](const std::string& s) { errors->push_back(s); };
  if (c.kernel_source != "kmsg" && c.kernel_source != "journal")
    err("kernel_source must be 'kmsg' or 'journal', not '" + c.kernel_source + "'");
  for (const auto& ep : c.endpoints)
    if (ep.rfind("tcp://", 0) != 0 && ep.rfind("ipc://", 0) != 0)
      err("endpoint '" + ep + "': expected tcp://host:port or ipc://path");
  if (c.curve_secret_key_file.empty() != c.curve_server_public_key.empty())
    err("curve_secret_key_file and curve_server_public_key go together");
  if (!c.curve_server_public_key.empty() && c.curve_server_public_key.size() != 40)
    err("curve_server_public_key: expected 40 Z85 characters");
  if (!c.curve_secret_key_file.empty()) {
    auto key = readSmallFile(c.curve_secret_key_file, 4096);
    if (!key) err("curve_secret_key_file '" + c.curve_secret_key_file + "': cannot read");
  }
  if (c.batch_interval_ms < 10) err("batch_interval_ms must be >= 10");
  if (c.aggregate_window_s < 0) err("aggregate_window_s must be >= 0");
  if (c.heartbeat_interval_s < 1) err("heartbeat_interval_s must be >= 1");
  if (c.ack_timeout_ms < 100) err("ack_timeout_ms must be >= 100");
  if (c.ack_timeout_max_ms < c.ack_timeout_ms) err("ack_timeout_max_ms must be >= ack_timeout_ms");
  if (c.max_in_flight < 1) err("max_in_flight must be >= 1");
  if (c.spool_max_bytes < (64 << 10)) err("spool_max_bytes must be >= 65536");
  if (c.rules_dirs.empty()) err("rules_dirs is empty");
  if (c.compression != "none" && c.compression != "zstd")
    err("compression must be 'none' or 'zstd', not '" + c.compression + "'");
  if (c.compression_level < 1 || c.compression_level > 19) err("compression_level must be 1..19");
  if (c.spool_synchronous != "normal" && c.spool_synchronous != "full")
    err("spool_synchronous must be 'normal' or 'full', not '" + c.spool_synchronous + "'");
  if (c.inventory_interval_s < 10) err("inventory_interval_s must be >= 10");
  if (c.inventory_every_heartbeats < 0) err("inventory_every_heartbeats must be >= 0");
  if (c.file_read_delay_ms < 0 || c.file_read_delay_ms > 10000) err("file_read_delay_ms must be 0..10000");
  if (c.file_glob_interval_s < 1) err("file_glob_interval_s must be >= 1");
  if (c.unmatched_max_templates < 1 || c.unmatched_max_templates > 4096) err("unmatched_max_templates must be 1..4096");
  if (c.unmatched_per_batch < 1 || c.unmatched_per_batch > 1024) err("unmatched_per_batch must be 1..1024");
  if (!c.journald && !c.kmsg && c.fabricmanager_log.empty() && c.file_globs.empty())
    err("no source enabled");
}

ConfigParse parseCommandLine(int argc, const char* const* argv) {
  ConfigParse out;
  // The file first, so that flags given on the same command line override it.
  std::string config_path;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) config_path = argv[i + 1];
    else if (a.rfind("--config=", 0) == 0) config_path = a.substr(9);
  }
  if (!config_path.empty()) {
    auto text = readSmallFile(config_path);
    if (!text) out.errors.push_back(config_path + ": cannot read");
    else applyYaml(*text, config_path, &out.config, &out.errors);
  }
  CLI::App app{"faultline-agent: pre-extract GPU-node failure symptoms and ship them to the aggregator"};
  app.set_version_flag("--version", FAULTLINE_VERSION);
  std::string ignored;
  app.add_option("--config", ignored, "YAML configuration file (docs/agent.md)");
  app.add_flag("--check-config", out.check_only, "validate the configuration and the rules, then exit");
  for (const auto& k : keys()) k.add_flag(app, flagName(k.name), &out.config);
  auto* keygen = app.add_subcommand("keygen", "write a CurveZMQ key pair (agent.key, agent.pub) into DIR");
  keygen->add_option("dir", out.keygen_dir, "output directory")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    out.exit_now = true;
    out.exit_code = app.exit(e);
    return out;
  }
  if (app.get_option("--utc-offset-s")->count() > 0) out.config.utc_offset_set = true;
  out.keygen = keygen->parsed();
  if (!out.keygen) validate(out.config, &out.errors);
  return out;
}

}  // namespace faultline::agent

// The agent's configuration: defaults, then the YAML file (--config), then command-line flags —
// every YAML key has a flag of the same name with '-' for '_' (e.g. batch_interval_ms ↔
// --batch-interval-ms). Documented in docs/agent.md.
//
// Parsing is pure apart from reading the YAML file; validation returns every problem as text
// ("agent.yaml:12: unknown key 'foo'"), it never exits. main.cpp decides what to do with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace faultline::agent {

struct AgentConfig {
  std::string agent_id;                 // default: hostname
  std::string hostname;                 // default: gethostname()
  std::string state_dir = "/var/lib/faultline-agent";
  std::string spool_path;               // default: <state_dir>/spool.db
  uint64_t spool_max_bytes = 64ull << 20;
  // normal: WAL fsynced at checkpoints only — a kill -9 loses nothing, a power cut may lose the
  // last commits (their log lines are then read again: the checkpoints roll back with them).
  // full: fsync on every commit.
  std::string spool_synchronous = "normal";

  std::vector<std::string> rules_dirs = {"/usr/share/faultline/rules"};
  std::string rules_override_dir = "/etc/faultline/rules.d";  // loaded after, if it exists
  // The rule cache (common/rule_cache.h): the loaded rules and their compiled literal search in
  // one file, rebuilt when a rule file changes. "" = <state_dir>; "off" = always load the YAML.
  std::string rules_cache_dir;

  std::vector<std::string> endpoints;   // aggregator(s): tcp://host:port
  std::string curve_secret_key_file;    // this agent's Z85 secret key (faultline-agent keygen)
  std::string curve_server_public_key;  // the aggregator's Z85 public key

  int batch_interval_ms = 2000;         // commit + ship period
  int aggregate_window_s = 10;          // identical symptoms within this window become one
  int heartbeat_interval_s = 30;
  int ack_timeout_ms = 10000;
  int ack_timeout_max_ms = 60000;
  int max_in_flight = 16;
  bool critical_first = true;
  uint64_t rate_limit_bytes_per_sec = 0;  // 0: unlimited
  uint64_t rate_burst_bytes = 256 << 10;
  std::string compression = "none";     // none | zstd (on top of packed Cap'n Proto)
  int compression_level = 3;

  std::string nvidia_smi = "nvidia-smi";  // GPU inventory command; "" disables it
  std::string sysfs_root = "/sys";        // HCA inventory from <root>/class/infiniband
  int inventory_interval_s = 600;         // re-check the devices this often
  int inventory_every_heartbeats = 10;    // resend an unchanged inventory this often (0: never)

  bool journald = true;
  std::string journal_dir;              // "" = the local system journal
  std::vector<std::string> journal_files;
  bool journal_from_head = false;       // first start without a cursor: whole journal (else new)
  bool kmsg = true;
  std::string kmsg_path = "/dev/kmsg";
  std::string kernel_source = "kmsg";   // kmsg | journal: which one carries kernel messages
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
  std::string fabricmanager_log = "/var/log/fabricmanager.log";  // "" disables
  std::vector<std::string> file_globs;  // application logs (auto-detected format)
  int file_glob_interval_s = 30;        // re-expand file_globs this often (new files are followed)
  bool files_from_start = false;        // first start without a checkpoint: whole file (else new)
  int file_poll_ms = 10000;             // fallback poll besides inotify
  int file_read_delay_ms = 100;         // coalesce appends: read at most this often after inotify
  int utc_offset_s = 0;                 // local time - UTC for files stamped in local time
  bool utc_offset_set = false;          // false: taken from the system time zone

  // Issue 30: error lines no rule matched, mined into templates and shipped as counts with the
  // batches (agent/unmatched_templates.h); the miner's bound and the sightings per batch.
  bool unmatched_templates = true;
  int unmatched_max_templates = 256;
  int unmatched_per_batch = 32;

  int log_rate_per_minute = 60;

  std::string spoolPath() const { return spool_path.empty() ? state_dir + "/spool.db" : spool_path; }
  std::string rulesCacheDir() const {
    return rules_cache_dir == "off" ? "" : rules_cache_dir.empty() ? state_dir : rules_cache_dir;
  }
};

struct ConfigParse {
  AgentConfig config;
  std::vector<std::string> errors;  // empty when valid
  bool check_only = false;          // --check-config
  bool keygen = false;              // `faultline-agent keygen DIR`
  std::string keygen_dir;
  bool exit_now = false;            // --help / --version printed
  int exit_code = 0;
};

// Parses argv (flags + --config FILE + the keygen subcommand), reading the YAML file when given.
ConfigParse parseCommandLine(int argc, const char* const* argv);

// Applies a YAML document (file name for messages) over `cfg`. Unknown keys and bad values are
// errors.
void applyYaml(const std::string& yaml_text, const std::string& file_name, AgentConfig* cfg,
               std::vector<std::string>* errors);

// Cross-field checks (endpoints, keys, ranges, kernel_source).
void validate(const AgentConfig& cfg, std::vector<std::string>* errors);

}  // namespace faultline::agent

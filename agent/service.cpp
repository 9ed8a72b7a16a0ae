#include "agent/service.h"

#include <malloc.h>
#include <sys/wait.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent/sources/file_source.h"
#include "agent/sources/journald_source.h"
#include "agent/sources/kmsg_source.h"
#include "agent/system_info.h"
#include "common/time_zone.h"

namespace faultline::agent {

namespace {

// Builds the rule cache in a child process (called before any thread exists): the build's
// garbage (YAML trees, RE2 and Vectorscan compiles: ~30 MB at its peak) never enters the agent's
// heap. The child reports an unreadable cache it replaced. False when no cache was written.
bool buildRuleCacheInChild(const std::vector<std::string>& dirs, const std::string& dir) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    auto built = common::loadRuleDirsCached(dirs, dir);
    // Failed: the agent builds the rules itself and reports what this found.
    const bool ok = built.result.rules && built.note.find("not written") == std::string::npos;
    if (ok && !built.note.empty()) std::fprintf(stderr, "faultline-agent: %s\n", built.note.c_str());
    std::fflush(stderr);
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int localUtcOffset() {
  time_t now = time(nullptr);
  struct tm tm{};
  localtime_r(&now, &tm);
  return static_cast<int>(tm.tm_gmtoff);
}

// The system zone's rules (/etc/localtime), so local stamps stay right across a daylight-saving
// change while the agent runs; null when the file is missing or unreadable.
std::shared_ptr<const common::TimeZone> systemZone() {
  std::ifstream in("/etc/localtime", std::ios::binary);
  if (!in) return nullptr;
  std::stringstream ss;
  ss << in.rdbuf();
  std::string error;
  auto zone = common::TimeZone::fromTzif(ss.str(), "/etc/localtime", &error);
  if (!zone) return nullptr;
  return std::make_shared<const common::TimeZone>(std::move(*zone));
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// How followed files' lines are parsed: this boot's id and time (boot-relative stamps in a dmesg
// file are placed through it, as the kmsg source does), the local zone, this year.
common::ParseOptions fileParseOptions(const AgentConfig& cfg, const std::string& boot_id, int64_t boot_time_ns) {
  common::ParseOptions parse;
  parse.boot_id = boot_id;
  if (boot_time_ns > 0) parse.boot_time_ns = boot_time_ns;
  parse.utc_offset_sec = cfg.utc_offset_set ? cfg.utc_offset_s : localUtcOffset();
  if (!cfg.utc_offset_set) parse.local_zone = systemZone();
  time_t now = time(nullptr);
  struct tm tm{};
  gmtime_r(&now, &tm);
  parse.default_year = tm.tm_year + 1900;
  return parse;
}

}  // namespace

std::vector<std::string> agentRuleDirs(const AgentConfig& c) {
  std::vector<std::string> dirs;
  for (const auto& d : c.rules_dirs)
    if (std::filesystem::is_directory(d)) dirs.push_back(d);
  if (dirs.empty()) dirs.push_back(FAULTLINE_DEFAULT_RULES);  // running from the build tree
  if (!c.rules_override_dir.empty() && std::filesystem::is_directory(c.rules_override_dir))
    dirs.push_back(c.rules_override_dir);
  return dirs;
}

// Anonymous RSS at 1,000 lines/s: 12.3 MB after a build in the agent itself, 6.9 MB after one in
// a child. When no cache can be written the rules are built here, in a helper thread whose malloc
// arena takes the garbage.
common::CachedRuleLoad loadAgentRules(const AgentConfig& cfg, bool at_start) {
  const auto dirs = agentRuleDirs(cfg);
  const std::string dir = cfg.rulesCacheDir();
  if (dir.empty()) return common::loadRuleDirsCached(dirs, "");
  auto warm = common::loadRuleDirsCached(dirs, dir, /*build_on_miss=*/false);
  if (warm.result.rules) return warm;
  if (at_start && buildRuleCacheInChild(dirs, dir)) {
    auto again = common::loadRuleDirsCached(dirs, dir, /*build_on_miss=*/false);
    if (again.result.rules) return again;
  }
  common::CachedRuleLoad built;
  std::thread([&] { built = common::loadRuleDirsCached(dirs, dir); }).join();
  malloc_trim(0);
  return built;
}

int agentKeygen(const std::string& dir) {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0) {
    std::fprintf(stderr, "faultline-agent keygen: %s\n", zmq_strerror(zmq_errno()));
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::string sec_path = dir + "/agent.key", pub_path = dir + "/agent.pub";
  {
    std::ofstream s(sec_path, std::ios::trunc);
    s << sec << "\n";
    std::ofstream p(pub_path, std::ios::trunc);
    p << pub << "\n";
    if (!s || !p) {
      std::fprintf(stderr, "faultline-agent keygen: cannot write into %s\n", dir.c_str());
      return 1;
    }
  }
  std::filesystem::permissions(sec_path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
                               std::filesystem::perm_options::replace, ec);
  std::printf("%s\n%s\n", sec_path.c_str(), pub_path.c_str());
  return 0;
}

AgentService::AgentService(AgentConfig config)
    : cfg_(std::move(config)),
      boot_id_(readBootId(cfg_.boot_id_file)),
      boot_time_ns_(bootTimeNs()),
      log_(clock_, cfg_.log_rate_per_minute) {}

AgentService::~AgentService() = default;

int AgentService::run(common::RuleLoadResult rules) {
  if (!openSpool()) return 1;
  buildSources();
  if (!startShipper()) return 1;
  InventoryOptions inv;
  inv.nvidia_smi = cfg_.nvidia_smi;
  inv.sysfs_root = cfg_.sysfs_root;
  inventory_ = std::make_unique<InventoryCollector>(io_, clock_, inv);
  Notifier notify;
  if (getenv("NOTIFY_SOCKET")) notify = [](const std::string& s) { sd_notify(0, s.c_str()); };
  // Only the lean copy stays: the full set (documentation, examples) is freed before the loop.
  auto lean = leanRuleSet(*rules.rules);
  rules = {};
  agent_ = std::make_unique<Agent>(io_, clock_, lean, std::move(sources_), *spool_, shipper_.get(), agentOptions(),
                                   log_, notify, inventory_.get());
  if (discovery_) agent_->setSourceDiscovery(std::move(discovery_));
  armTrim();
  armStop();
  armHup();
  agent_->start();
  // Loading the rules (YAML trees, RE2 compilation) peaks at about twice what stays live, and
  // the freed blocks sit between long-lived ones: hand those pages back to the kernel.
  malloc_trim(0);
  io_.run();
  return 0;
}

bool AgentService::openSpool() {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(cfg_.spoolPath()).parent_path(), ec);
  std::string error, note;
  SpoolOptions o;
  o.max_bytes = cfg_.spool_max_bytes;
  o.synchronous_full = cfg_.spool_synchronous == "full";
  spool_ = Spool::open(cfg_.spoolPath(), o, &error, &note);
  if (!note.empty()) log_.error("faultline-agent: spool unreadable, started a new one: {}", note);
  if (!spool_) std::fprintf(stderr, "faultline-agent: spool: %s\n", error.c_str());
  return spool_ != nullptr;
}

void AgentService::buildSources() {
  const bool kmsg_carries_kernel = cfg_.kernel_source == "kmsg" && cfg_.kmsg;
  if (cfg_.journald) {
    JournaldOptions o;
    o.directory = cfg_.journal_dir;
    o.files = cfg_.journal_files;
    o.from_head = cfg_.journal_from_head;
    o.include_kernel = !kmsg_carries_kernel;
    sources_.push_back(std::make_unique<JournaldSource>(io_, o));
  }
  if (kmsg_carries_kernel) {
    KmsgOptions o;
    o.path = cfg_.kmsg_path;
    o.boot_id = boot_id_;
    o.boot_time_ns = boot_time_ns_;
    sources_.push_back(std::make_unique<KmsgSource>(io_, o));
  }
  auto makeFile = [this, parse = fileParseOptions(cfg_, boot_id_, boot_time_ns_)](
                      const std::string& path, common::LogFormat format, bool from_start) {
    FileOptions o;
    o.path = path;
    o.format = format;
    o.from_start = from_start;
    o.parse = parse;
    o.fallback_poll_ms = cfg_.file_poll_ms;
    o.read_delay_ms = cfg_.file_read_delay_ms;
    return std::make_unique<FileSource>(io_, o);
  };
  if (!cfg_.fabricmanager_log.empty())
    sources_.push_back(makeFile(cfg_.fabricmanager_log, common::LogFormat::kFabricManager, cfg_.files_from_start));
  for (const auto& path : expandFileGlobs(cfg_.file_globs))
    sources_.push_back(makeFile(path, common::LogFormat::kUnknown, cfg_.files_from_start));
  // Files that match later were created after the agent started watching: read them whole.
  if (!cfg_.file_globs.empty())
    discovery_ = [this, makeFile](const std::vector<std::string>& known) {
      std::vector<std::unique_ptr<Source>> fresh;
      for (const auto& path : expandFileGlobs(cfg_.file_globs))
        if (std::find(known.begin(), known.end(), path) == known.end())
          fresh.push_back(makeFile(path, common::LogFormat::kUnknown, true));
      return fresh;
    };
}

bool AgentService::startShipper() {
  if (cfg_.endpoints.empty()) {
    log_.warn("faultline-agent: no endpoints configured: symptoms stay in the spool");
    return true;
  }
  ShipperOptions so;
  so.endpoints = cfg_.endpoints;
  so.agent_id = cfg_.agent_id;
  if (!cfg_.curve_secret_key_file.empty()) {
    so.curve_secret_key = trim(readSmallFile(cfg_.curve_secret_key_file, 4096).value_or(""));
    so.curve_server_key = cfg_.curve_server_public_key;
  }
  so.ack_timeout_ns = int64_t{cfg_.ack_timeout_ms} * 1'000'000;
  so.ack_timeout_max_ns = int64_t{cfg_.ack_timeout_max_ms} * 1'000'000;
  so.max_in_flight = static_cast<size_t>(cfg_.max_in_flight);
  so.critical_first = cfg_.critical_first;
  so.rate_bytes_per_sec = cfg_.rate_limit_bytes_per_sec;
  so.rate_burst_bytes = cfg_.rate_burst_bytes;
  so.zstd = cfg_.compression == "zstd";
  so.zstd_level = cfg_.compression_level;
  so.key_file = cfg_.hostname + ".pub";
  shipper_ = std::make_unique<Shipper>(io_, zmq_ctx_, clock_, *spool_, so, &log_);
  std::string error;
  if (shipper_->start(&error)) return true;
  std::fprintf(stderr, "faultline-agent: %s\n", error.c_str());
  return false;
}

AgentOptions AgentService::agentOptions() const {
  AgentOptions ao;
  ao.agent_id = cfg_.agent_id;
  ao.hostname = cfg_.hostname;
  ao.boot_id = boot_id_;
  ao.aggregate_window_ns = int64_t{cfg_.aggregate_window_s} * 1'000'000'000;
  ao.batch_interval_ms = cfg_.batch_interval_ms;
  ao.heartbeat_interval_ms = cfg_.heartbeat_interval_s * 1000;
  ao.inventory_interval_ns = int64_t{cfg_.inventory_interval_s} * 1'000'000'000;
  ao.inventory_every_heartbeats = cfg_.inventory_every_heartbeats;
  ao.discovery_interval_ns = int64_t{cfg_.file_glob_interval_s} * 1'000'000'000;
  ao.mine_unmatched = cfg_.unmatched_templates;
  ao.unmatched.max_templates = static_cast<size_t>(cfg_.unmatched_max_templates);
  ao.unmatched.max_per_batch = static_cast<size_t>(cfg_.unmatched_per_batch);
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0) ao.watchdog_interval_ms = static_cast<int>(watchdog_usec / 2000);
  return ao;
}

// Bursts leave freed memory behind (parser buffers, batches, RE2 DFA states): return it.
void AgentService::armTrim() {
  trim_timer_.expires_after(std::chrono::seconds(60));
  trim_timer_.async_wait([this](const boost::system::error_code& e) {
    if (e) return;
    malloc_trim(0);
    armTrim();
  });
}

void AgentService::armStop() {
  stop_signals_.async_wait([this](const boost::system::error_code& e, int) {
    if (e) return;
    agent_->stop();
    trim_timer_.cancel();
    if (shipper_) shipper_->stop();
    io_.stop();
  });
}

// SIGHUP: the rules again (a failed load keeps the old ones).
void AgentService::armHup() {
  hup_.async_wait([this](const boost::system::error_code& e, int) {
    if (e) return;
    auto reload = loadAgentRules(cfg_, /*at_start=*/false);
    if (!reload.note.empty()) log_.error("faultline-agent: {}", reload.note);
    auto& fresh = reload.result;
    if (!fresh.rules) {
      for (const auto& err : fresh.errors) log_.error("faultline-agent: rule reload: {}", err);
      log_.error("faultline-agent: rule reload failed, keeping the old rules");
    } else {
      agent_->reloadRules(leanRuleSet(*fresh.rules));
    }
    malloc_trim(0);
    armHup();
  });
}

}  // namespace faultline::agent

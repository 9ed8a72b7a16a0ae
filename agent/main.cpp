// faultline-agent: wiring only. Parses the configuration, loads the rules, builds the io_context,
// clock, sources, spool and shipper, and runs the loop until SIGTERM/SIGINT; SIGHUP reloads the
// rules. Every piece of logic lives in the faultline_agent library.
#include <malloc.h>
#include <sys/wait.h>
#include <unistd.h>
#include <systemd/sd-daemon.h>
#include <zmq.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>
#include <zmq.hpp>

#include "agent/agent.h"
#include "agent/config.h"
#include "common/uplink/shipper.h"
#include "agent/sources/file_source.h"
#include "agent/sources/journald_source.h"
#include "agent/sources/kmsg_source.h"
#include "agent/spool.h"
#include "agent/system_info.h"
#include "common/rule_cache.h"
#include "common/rule_set.h"
#include "common/time_zone.h"

namespace {

using namespace faultline;
using namespace faultline::agent;

int keygen(const std::string& dir) {
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

std::vector<std::string> ruleDirs(const AgentConfig& c) {
  std::vector<std::string> dirs;
  for (const auto& d : c.rules_dirs)
    if (std::filesystem::is_directory(d)) dirs.push_back(d);
  if (dirs.empty()) dirs.push_back(FAULTLINE_DEFAULT_RULES);  // running from the build tree
  if (!c.rules_override_dir.empty() && std::filesystem::is_directory(c.rules_override_dir))
    dirs.push_back(c.rules_override_dir);
  return dirs;
}

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

// The rules, from the cache when it holds them (a warm start). Else, at start-up, a child process
// builds the cache and the agent reads it back, so its heap is what a warm start leaves
// (anonymous RSS at 1,000 lines/s: 12.3 MB after a build in the agent itself, 6.9 MB); on a
// reload (threads running), a helper thread builds it (its malloc arena takes the garbage). When
// no cache can be written: built here, as without a cache.
common::CachedRuleLoad loadRules(const AgentConfig& cfg, bool at_start) {
  const auto dirs = ruleDirs(cfg);
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

}  // namespace

int main(int argc, char** argv) {
  auto parsed = parseCommandLine(argc, argv);
  if (parsed.exit_now) return parsed.exit_code;
  if (parsed.keygen) return keygen(parsed.keygen_dir);
  AgentConfig cfg = parsed.config;
  // Big blocks (the rule cache's bytes, read buffers, batches) are mapped and unmapped rather
  // than left in the heap between long-lived ones; threads other than main share one arena.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  mallopt(M_ARENA_MAX, 2);
  // --check-config checks the YAML itself and leaves the state directory (the cache) alone.
  auto cached = parsed.check_only ? common::loadRuleDirsCached(ruleDirs(cfg), "") : loadRules(cfg, /*at_start=*/true);
  if (!cached.note.empty()) std::fprintf(stderr, "faultline-agent: %s\n", cached.note.c_str());
  auto& rules = cached.result;
  for (const auto& e : rules.errors) parsed.errors.push_back(e);
  if (!parsed.errors.empty()) {
    for (const auto& e : parsed.errors) std::fprintf(stderr, "%s\n", e.c_str());
    std::fprintf(stderr, "faultline-agent: %zu configuration problem(s)\n", parsed.errors.size());
    return 2;
  }
  if (parsed.check_only) {
    std::printf("configuration ok: %zu rules (%s)\n", rules.rules->rules.size(), rules.rules->version.c_str());
    return 0;
  }
  if (cfg.hostname.empty()) cfg.hostname = hostName();
  if (cfg.agent_id.empty()) cfg.agent_id = cfg.hostname;
  std::string boot_id = readBootId(cfg.boot_id_file);
  const int64_t boot_time_ns = bootTimeNs();  // kmsg stamps and followed dmesg files are boot-relative

  SystemClock clock;
  Logger log(clock, cfg.log_rate_per_minute);
  boost::asio::io_context io;

  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(cfg.spoolPath()).parent_path(), ec);
  std::string error, note;
  SpoolOptions spool_opts;
  spool_opts.max_bytes = cfg.spool_max_bytes;
  spool_opts.synchronous_full = cfg.spool_synchronous == "full";
  auto spool = Spool::open(cfg.spoolPath(), spool_opts, &error, &note);
  if (!note.empty()) log.error("faultline-agent: spool unreadable, started a new one: {}", note);
  if (!spool) {
    std::fprintf(stderr, "faultline-agent: spool: %s\n", error.c_str());
    return 1;
  }

  std::vector<std::unique_ptr<Source>> sources;
  bool kmsg_carries_kernel = cfg.kernel_source == "kmsg" && cfg.kmsg;
  if (cfg.journald) {
    JournaldOptions o;
    o.directory = cfg.journal_dir;
    o.files = cfg.journal_files;
    o.from_head = cfg.journal_from_head;
    o.include_kernel = !kmsg_carries_kernel;
    sources.push_back(std::make_unique<JournaldSource>(io, o));
  }
  if (kmsg_carries_kernel) {
    KmsgOptions o;
    o.path = cfg.kmsg_path;
    o.boot_id = boot_id;
    o.boot_time_ns = boot_time_ns;
    sources.push_back(std::make_unique<KmsgSource>(io, o));
  }
  common::ParseOptions parse;
  parse.boot_id = boot_id;
  // Boot-relative stamps in followed files (a dmesg file) are placed through this boot's time,
  // as the kmsg source does; without it they stay untimed.
  if (boot_time_ns > 0) parse.boot_time_ns = boot_time_ns;
  parse.utc_offset_sec = cfg.utc_offset_set ? cfg.utc_offset_s : localUtcOffset();
  if (!cfg.utc_offset_set) parse.local_zone = systemZone();
  {
    time_t now = time(nullptr);
    struct tm tm{};
    gmtime_r(&now, &tm);
    parse.default_year = tm.tm_year + 1900;
  }
  auto makeFile = [&io, &cfg, parse](const std::string& path, common::LogFormat format, bool from_start) {
    FileOptions o;
    o.path = path;
    o.format = format;
    o.from_start = from_start;
    o.parse = parse;
    o.fallback_poll_ms = cfg.file_poll_ms;
    o.read_delay_ms = cfg.file_read_delay_ms;
    return std::make_unique<FileSource>(io, o);
  };
  if (!cfg.fabricmanager_log.empty())
    sources.push_back(makeFile(cfg.fabricmanager_log, common::LogFormat::kFabricManager, cfg.files_from_start));
  for (const auto& path : expandFileGlobs(cfg.file_globs))
    sources.push_back(makeFile(path, common::LogFormat::kUnknown, cfg.files_from_start));
  // Files that match later were created after the agent started watching: read them whole.
  SourceDiscovery discovery;
  if (!cfg.file_globs.empty()) {
    discovery = [&cfg, makeFile](const std::vector<std::string>& known) {
      std::vector<std::unique_ptr<Source>> fresh;
      for (const auto& path : expandFileGlobs(cfg.file_globs))
        if (std::find(known.begin(), known.end(), path) == known.end())
          fresh.push_back(makeFile(path, common::LogFormat::kUnknown, true));
      return fresh;
    };
  }

  zmq::context_t zmq_ctx(1);
  std::unique_ptr<Shipper> shipper;
  if (!cfg.endpoints.empty()) {
    ShipperOptions so;
    so.endpoints = cfg.endpoints;
    so.agent_id = cfg.agent_id;
    if (!cfg.curve_secret_key_file.empty()) {
      so.curve_secret_key = trim(readSmallFile(cfg.curve_secret_key_file, 4096).value_or(""));
      so.curve_server_key = cfg.curve_server_public_key;
    }
    so.ack_timeout_ns = int64_t{cfg.ack_timeout_ms} * 1'000'000;
    so.ack_timeout_max_ns = int64_t{cfg.ack_timeout_max_ms} * 1'000'000;
    so.max_in_flight = static_cast<size_t>(cfg.max_in_flight);
    so.critical_first = cfg.critical_first;
    so.rate_bytes_per_sec = cfg.rate_limit_bytes_per_sec;
    so.rate_burst_bytes = cfg.rate_burst_bytes;
    so.zstd = cfg.compression == "zstd";
    so.zstd_level = cfg.compression_level;
    so.key_file = cfg.hostname + ".pub";
    shipper = std::make_unique<Shipper>(io, zmq_ctx, clock, *spool, so, &log);
    if (!shipper->start(&error)) {
      std::fprintf(stderr, "faultline-agent: %s\n", error.c_str());
      return 1;
    }
  } else {
    log.warn("faultline-agent: no endpoints configured: symptoms stay in the spool");
  }

  AgentOptions ao;
  ao.agent_id = cfg.agent_id;
  ao.hostname = cfg.hostname;
  ao.boot_id = boot_id;
  ao.aggregate_window_ns = int64_t{cfg.aggregate_window_s} * 1'000'000'000;
  ao.batch_interval_ms = cfg.batch_interval_ms;
  ao.heartbeat_interval_ms = cfg.heartbeat_interval_s * 1000;
  ao.inventory_interval_ns = int64_t{cfg.inventory_interval_s} * 1'000'000'000;
  ao.inventory_every_heartbeats = cfg.inventory_every_heartbeats;
  ao.discovery_interval_ns = int64_t{cfg.file_glob_interval_s} * 1'000'000'000;
  ao.mine_unmatched = cfg.unmatched_templates;
  ao.unmatched.max_templates = static_cast<size_t>(cfg.unmatched_max_templates);
  ao.unmatched.max_per_batch = static_cast<size_t>(cfg.unmatched_per_batch);
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(0, &watchdog_usec) > 0) ao.watchdog_interval_ms = static_cast<int>(watchdog_usec / 2000);
  Notifier notify;
  if (getenv("NOTIFY_SOCKET")) notify = [](const std::string& s) { sd_notify(0, s.c_str()); };

  InventoryOptions inv_opts;
  inv_opts.nvidia_smi = cfg.nvidia_smi;
  inv_opts.sysfs_root = cfg.sysfs_root;
  InventoryCollector inventory(io, clock, inv_opts);

  // Only the lean copy stays: the full set (documentation, examples) is freed before the loop.
  auto lean_rules = leanRuleSet(*rules.rules);
  rules = {};
  Agent agent(io, clock, lean_rules, std::move(sources), *spool, shipper.get(), ao, log, notify, &inventory);
  if (discovery) agent.setSourceDiscovery(std::move(discovery));

  // Bursts leave freed memory behind (parser buffers, batches, RE2 DFA states): return it.
  boost::asio::steady_timer trim_timer(io);
  std::function<void()> armTrim = [&] {
    trim_timer.expires_after(std::chrono::seconds(60));
    trim_timer.async_wait([&](const boost::system::error_code& e) {
      if (e) return;
      malloc_trim(0);
      armTrim();
    });
  };
  armTrim();

  boost::asio::signal_set stop_signals(io, SIGTERM, SIGINT);
  stop_signals.async_wait([&](const boost::system::error_code& e, int) {
    if (e) return;
    agent.stop();
    trim_timer.cancel();
    if (shipper) shipper->stop();
    io.stop();
  });
  boost::asio::signal_set hup(io, SIGHUP);
  std::function<void()> armHup = [&] {
    hup.async_wait([&](const boost::system::error_code& e, int) {
      if (e) return;
      auto reload = loadRules(cfg, /*at_start=*/false);
      if (!reload.note.empty()) log.error("faultline-agent: {}", reload.note);
      auto& fresh = reload.result;
      if (!fresh.rules) {
        for (const auto& err : fresh.errors) log.error("faultline-agent: rule reload: {}", err);
        log.error("faultline-agent: rule reload failed, keeping the old rules");
      } else {
        agent.reloadRules(leanRuleSet(*fresh.rules));
      }
      malloc_trim(0);
      armHup();
    });
  };
  armHup();

  agent.start();
  // Loading the rules (YAML trees, RE2 compilation) peaks at about twice what stays live, and
  // the freed blocks sit between long-lived ones: hand those pages back to the kernel.
  malloc_trim(0);
  io.run();
  return 0;
}

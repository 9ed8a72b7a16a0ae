// The chaos run of the whole pipeline (issue 16; `make chaos`, ctest chaos_short): a central aggregator, a
// site aggregator relaying to it and real faultline-agent processes fed from the samples, while
// faults are injected at seeded random moments; at the end every symptom must be stored once at
// the site and at the central (per (node, rule) against the offline engine on the same bytes),
// every verdict must equal `faultline attribute`'s, and a table says what happened.
//
// Lanes (one agent each):
//   verdict  one per node of the journal-only samples: its journal text appended in chunks; the
//            sample jobs are reported at the end and judged (as tests/aggregator/core/agents_e2e)
//   kmsg     records from the kmsg samples, renumbered, through a FIFO standing in for /dev/kmsg:
//            each agent start replays the whole "ring buffer" (as the device does on open); the
//            numbering skips sequence numbers now and then, as a ring-buffer overrun does, and the
//            agent's reported `lost` must equal the numbers skipped, across all its restarts
//   fm       Fabric Manager logs, repeated; its agent runs under libfaketime and gets wall-clock
//            steps forward and back
//   journal  binary journal files (systemd-journal-remote) in a directory: each chunk a new file
//            (rotation), the oldest files deleted once read (vacuum), also while the agent is down
//   spool    journal-text symptom lines with unique stamps into an agent with the smallest spool
//            bound; the site is stopped under a burst, so the spool drops (lowest severity first)
//            and its counts must bound the gap exactly: at least what it dropped before a send
//            (certainly lost), at most that plus what it evicted in flight (may have arrived)
//   flood    (--flood-seconds) Fabric Manager lines at --flood-rate lines/s, one in 1000 a symptom
//
// Faults: SIGKILL of an agent / the site / the central (restarted on the same endpoint after a
// random delay), link cuts of the site or the central: SIGSTOP..SIGCONT (TCP stays up, nothing
// moves, acks time out) or, where nft works (root, CAP_NET_ADMIN), every packet to and from its
// ingest port on loopback dropped for a while (an own nft table, removed at the end); spool full,
// clock steps (libfaketime: the fm agent, with --site-clock-steps / --central-clock-steps the
// aggregators too), journal rotate and vacuum. The schedule and the
// data come from --seed; the moments are paced with the steady clock. All waits poll with
// deadlines. Exit status 0 only when nothing was lost or doubled, every verdict matched (at the
// central: the same verdict; a revision relayed as a reference carries the diagnosis it repeats)
// and the central lists every site node live.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "aggregator/jobs/sacct_poller.h"
#include "aggregator/offline/attribute.h"
#include "aggregator/offline/bundle.h"
#include "aggregator/store/store.h"
#include "common/log_record.h"
#include "common/parse/line_grammar.h"
#include "common/parse/stream_parser.h"
#include "common/rule_engine.h"
#include "common/rule_set.h"
#include "tests/aggregator/core/test_util.h"

extern char** environ;

using namespace faultline;
using namespace faultline::aggregator;
namespace fs = std::filesystem;
using Steady = std::chrono::steady_clock;
using Key = std::pair<std::string, std::string>;  // (node, rule)
using Counts = std::map<Key, uint64_t>;

namespace {

const std::string kSource = FAULTLINE_SOURCE_DIR;
const std::string kFaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";

struct Options {
  uint64_t seed = 1;
  double seconds = 25;        // the fault phase
  int min_kills = 0;          // the phase goes on until this many kills
  double fault_ms = 500;      // mean time between faults
  double flood_seconds = 0;   // 0: no flood lane
  uint64_t flood_rate = 100000;
  double drain_seconds = 90;  // deadline for the end state
  std::string keep;           // work directory kept here (else a temp dir, removed)
  bool disk_restarts = false;  // the disk lane's agent is also killed while its disk is full
  bool site_clock_steps = false;  // the site aggregator runs under libfaketime too
  bool central_clock_steps = false;  // the central aggregator too
};

using testing::readFile;
std::string slurp(const std::string& path) { return readFile(path); }
std::string trimmed(const std::string& s) { return s.substr(0, s.find_last_not_of("\n ") + 1); }
void append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
}
std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}
std::string tail(const std::string& path, size_t n = 3000) {
  std::string s = slurp(path);
  return s.size() > n ? s.substr(s.size() - n) : s;
}
uint64_t total(const Counts& c) {
  uint64_t n = 0;
  for (const auto& [k, v] : c) n += v;
  return n;
}

// ---- processes -------------------------------------------------------------------------------

struct Proc {
  std::string name;
  std::vector<std::string> args, env;  // env: extra NAME=value
  std::string log;
  std::function<void()> before_start;  // e.g. a fresh kmsg FIFO
  pid_t pid = -1;
  bool stopped = false;  // SIGSTOPped
  bool restart_pending = false;
  Steady::time_point restart_at{}, cont_at{};
  uint64_t peak_kb = 0;
  int starts = 0, crashes = 0, exits = 0;  // ended on their own: by a signal, with a status
  // packet-drop link cut: the nft chain holding its drop rules, while they are in place
  std::string nft_chain;
  bool dropped = false;
  Steady::time_point undrop_at{};

  void sampleRss() {
    if (pid <= 0) return;
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string l; std::getline(in, l);)
      if (l.rfind("VmHWM:", 0) == 0) peak_kb = std::max<uint64_t>(peak_kb, std::strtoull(l.c_str() + 6, nullptr, 10));
  }
  bool start() {
    if (before_start) before_start();
    std::vector<char*> argv, envp;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (char** e = environ; *e; ++e) envp.push_back(*e);
    for (const auto& e : env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) pid = -1;
    stopped = restart_pending = false;
    ++starts;
    return pid > 0;
  }
  void signal(int sig) {
    if (pid <= 0) return;
    sampleRss();
    if (stopped && sig != SIGCONT) ::kill(pid, SIGCONT);
    ::kill(pid, sig);
    if (sig == SIGKILL || sig == SIGTERM) {
      ::waitpid(pid, nullptr, 0);
      pid = -1;
      stopped = false;
    }
  }
  // Reaps a process that ended on its own (a crash, or an exit: e.g. no spool on a full disk):
  // counted, restarted by the caller (as systemd would).
  bool exitedOnItsOwn() {
    if (pid <= 0) return false;
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) != pid) return false;
    std::fprintf(stderr, "chaos: %s (pid %d) ended on its own: %s %d\n%s\n", name.c_str(), pid,
                 WIFSIGNALED(status) ? "signal" : "exit", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                 tail(log).c_str());
    pid = -1;
    ++(WIFSIGNALED(status) ? crashes : exits);
    return true;
  }
};

// ---- the offline side ------------------------------------------------------------------------

struct Offline {
  std::shared_ptr<const common::RuleSet> rules;
  std::unique_ptr<common::RuleEngine> engine;

  Offline() {
    auto loaded = common::loadRuleDirs({kSource + "/rules"});
    if (!loaded.rules) throw std::runtime_error("rules do not load");
    rules = loaded.rules;
    engine = std::make_unique<common::RuleEngine>(rules);
  }
  // What an agent following `text` as `format` extracts, by (node, rule).
  Counts scan(const std::string& text, common::LogFormat format, const std::string& host, const std::string& source,
              common::SourceKind kind) const {
    Counts c;
    common::MatchContext ctx;
    ctx.node = host;
    ctx.source = source;
    ctx.kind = kind;
    common::ParseOptions po;
    po.default_year = 2026;
    auto parser = common::makeStreamParser(format, po, [&](common::LogRecord&& r) {
      if (auto s = engine->extract(r, ctx)) c[{s->node, s->rule_id}] += s->count;
    });
    parser->feed(text);
    parser->finish();
    return c;
  }
  Counts journalEntry(const std::map<std::string, std::string>& fields, const std::string& host) const {
    Counts c;
    auto rec = common::recordFromJournalFields(fields);
    if (!rec) return c;
    common::MatchContext ctx;
    ctx.node = host;
    ctx.source = "journal";
    auto t = fields.find("_TRANSPORT");
    ctx.kind = t != fields.end() && t->second == "kernel" ? common::SourceKind::kKernel : common::SourceKind::kJournal;
    if (auto s = engine->extract(*rec, ctx)) c[{s->node, s->rule_id}] += s->count;
    return c;
  }
  common::Severity severityOf(const std::string& rule) const {
    for (const auto& r : rules->rules)
      if (r.id == rule) return r.severity;
    return common::Severity::kInfo;
  }
};

void add(Counts& into, const Counts& c, uint64_t times = 1) {
  for (const auto& [k, v] : c) into[k] += v * times;
}

// ---- lanes -----------------------------------------------------------------------------------

struct Lane {
  std::string kind, host, path;       // path: the file/FIFO/directory the agent reads
  std::vector<std::string> chunks;    // written in order over the feed phase
  size_t written = 0;
  Counts expected;                    // what the offline engine finds in everything written
  std::vector<Counts> chunk_expected; // journal: per chunk (vacuum waits for them)
  Proc* agent = nullptr;
};

struct Sample {
  std::string name, dir;
  nlohmann::json job;
  std::optional<common::Diagnosis> offline;
};

struct Table {
  std::map<std::string, uint64_t> faults;  // by kind
};

std::unique_ptr<Store> openStore(const std::string& path) {
  static SystemClock clock;
  StoreOptions o;
  o.read_only = true;
  std::string error;
  return Store::open(path, clock, o, &error);
}
Counts storedSince(const std::string& db, const std::string& node, int64_t since_ns);
Counts storedIn(const std::string& db) { return storedSince(db, "", 0); }
Counts storedSince(const std::string& db, const std::string& node, int64_t since_ns) {
  Counts c;
  auto store = openStore(db);
  if (!store) return c;
  SymptomFilter f;
  if (!node.empty()) f.nodes = {node};
  f.since_ns = since_ns;
  f.limit = 10'000'000;
  for (const auto& s : store->symptoms(f)) c[{s.symptom.node, s.symptom.rule_id}] += s.symptom.count;
  return c;
}
// One number from an agent's spool (read-only, beside the running agent: WAL).
uint64_t spoolQuery(const std::string& spool, const char* sql) {
  sqlite3* db = nullptr;
  uint64_t v = UINT64_MAX;
  if (sqlite3_open_v2(spool.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK) {
    sqlite3_stmt* st = nullptr;
    sqlite3_busy_timeout(db, 2000);
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
      v = static_cast<uint64_t>(sqlite3_column_int64(st, 0));
    sqlite3_finalize(st);
  }
  sqlite3_close(db);
  return v;
}

class Chaos {
 public:
  explicit Chaos(Options o) : opt_(std::move(o)), rng_(opt_.seed) {
    if (opt_.keep.empty()) {
      std::string tmpl = (fs::temp_directory_path() / "faultline-chaos-XXXXXX").string();
      dir_ = ::mkdtemp(tmpl.data());
    } else {
      dir_ = opt_.keep;
      fs::remove_all(dir_);
      fs::create_directories(dir_);
    }
  }
  ~Chaos() {
    for (auto& p : procs_) p->signal(SIGKILL);
    if (nft_ok_) runCommand("nft delete table inet " + nft_table_ + " 2>&1", 4096);
    if (disk_mounted_) runCommand("umount " + file("disk") + " 2>&1", 4096);
    if (opt_.keep.empty()) fs::remove_all(dir_);
  }
  int run();

 private:
  std::string file(const std::string& n) const { return dir_ + "/" + n; }
  Proc& newProc(const std::string& name) {
    procs_.push_back(std::make_unique<Proc>());
    procs_.back()->name = name;
    procs_.back()->log = file(name + ".log");
    return *procs_.back();
  }
  void keygen(const std::string& d, const std::string& name) {
    auto r = runCommand(std::string(FAULTLINE_CLI_BIN) + " keygen " + d + " --name " + name, 4096);
    if (r.status != 0) throw std::runtime_error("keygen failed");
  }
  double uniform(double a, double b) { return std::uniform_real_distribution<double>(a, b)(rng_); }
  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  void setUpAggregators();
  void startSite();
  void setUpVerdictLanes();
  void setUpKmsgLane();
  void setUpFmLane();
  void setUpJournalLane();
  void setUpSpoolLane();
  void setUpFloodLane();
  void setUpDiskLane();
  Lane fabricManagerLane(const std::string& kind);
  void fillDisk(bool fill);
  void setUpPacketDrops();
  void dropPackets(Proc& p, bool drop);
  Proc& addAgent(Lane& lane, std::vector<std::string> sources, uint64_t spool_max = 0);

  void feed(double fraction);
  void pumpKmsg();
  void flood(double now_s);
  void injectFault();
  void tickProcesses();
  void vacuumJournal(bool agent_down_only);
  bool converged(std::string* diff);
  bool reportJobs();
  bool verdictsEqual(std::string* diff);
  void printTable(bool counts_ok, bool verdicts_ok, const std::string& diff);

  Options opt_;
  std::mt19937_64 rng_;
  std::string dir_;
  Offline offline_;
  std::vector<std::unique_ptr<Proc>> procs_;
  Proc *central_ = nullptr, *site_ = nullptr;
  std::vector<Lane> lanes_;
  std::vector<Sample> samples_;
  std::string server_pub_;
  Table table_;
  // kmsg FIFO: what the ring buffer holds, the driver's end of the current FIFO and what it still
  // has to write into it
  std::string kmsg_ring_, kmsg_pending_;
  int kmsg_fd_ = -1;
  Lane* kmsg_lane_ = nullptr;
  uint64_t kmsg_skipped_ = 0;  // sequence numbers the kmsg lane's numbering skipped (overruns)
  uint64_t kmsg_lost_ = UINT64_MAX;  // what the kmsg agent reports lost (heartbeat, at the site)
  // packet drops: nft usable, this run's table
  bool nft_ok_ = false;
  std::string nft_table_;
  Lane* journal_lane_ = nullptr;
  Lane* spool_lane_ = nullptr;
  Lane* flood_lane_ = nullptr;
  Proc* fm_agent_ = nullptr;
  size_t journal_vacuumed_ = 0;  // chunk files deleted so far (the oldest first)
  // flood: lines written, symptoms per block of 1000 lines
  uint64_t flood_lines_ = 0;
  std::string flood_block_;
  Counts flood_block_counts_;
  double flood_start_s_ = 0;
  uint64_t kills_ = 0;
  std::function<std::string(bool burst)> spool_text_;  // the spool lane's next lines
  int64_t spool_t_ = 1'719'792'000;  // the stamp (s) of its next line
  // After the faults, once its spool is empty, the spool lane gets 20 more lines (well under the
  // bound): all of them must arrive (the agent still works; not every line may be dropped).
  int64_t canary_from_ns_ = 0;
  uint64_t spool_dropped_ = 0, spool_in_flight_ = 0, spool_lost_ = 0;
  size_t verdicts_judged_ = 0;
  bool jobs_reported_ = false;
  bool disk_mounted_ = false, disk_full_ = false;
  Steady::time_point disk_free_at_{};
  Lane* disk_lane_ = nullptr;
  // the Fabric Manager agent's clock as the site sees it: newest heartbeat stamp - arrival, max (s)
  double skew_max_s_ = 0;
  void observeClock();
  void scanSpoolLane();
};

// ---- setup -----------------------------------------------------------------------------------

void Chaos::setUpAggregators() {
  std::ofstream(file("token")) << "t0ken\n";
  keygen(file("site"), "server");
  keygen(file("central"), "central");
  fs::create_directories(file("agents.d"));
  fs::create_directories(file("central.d/relays"));
  fs::copy_file(file("site/server.pub"), file("central.d/relays/edge1.pub"));
  server_pub_ = trimmed(slurp(file("site/server.pub")));

  central_ = &newProc("central");
  central_->args = {FAULTLINE_AGGREGATOR_BIN, "--db", file("central.db"), "--port", "0", "--port-file",
                    file("central-port"), "--rules", kSource + "/rules", "--tick", "0.05", "--ingest-endpoint",
                    "tcp://127.0.0.1:*", "--ingest-endpoint-file", file("central-ingest"), "--curve-secret-key",
                    file("central/central.key"), "--allow-dir", file("central.d"),
                    // The samples' jobs ended in 2024: kept past the default retention, which would prune
                    // them at the next start (a restart after the jobs were reported lost them all).
                    "--job-retention-days", "36500", "--retention-days", "36500"};
  if (opt_.central_clock_steps && fs::exists(kFaketime)) {
    std::ofstream(file("central-faketime")) << "+0\n";
    central_->env = {"LD_PRELOAD=" + kFaketime, "FAKETIME_TIMESTAMP_FILE=" + file("central-faketime"),
                     "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  }
  if (!central_->start()) throw std::runtime_error("central does not start");
  if (!testing::pollUntil([&] { return !trimmed(slurp(file("central-ingest"))).empty(); }, std::chrono::seconds(20)))
    throw std::runtime_error("central: no ingest endpoint\n" + tail(central_->log));
  central_->args[12] = trimmed(slurp(file("central-ingest")));  // restarts bind the same port

  site_ = &newProc("site");
  site_->args = {FAULTLINE_AGGREGATOR_BIN, "--db", file("site.db"), "--port", "0", "--port-file", file("site-port"),
                 "--token-file", file("token"), "--rules", kSource + "/rules", "--tick", "0.05", "--ingest-endpoint",
                 "tcp://127.0.0.1:*", "--ingest-endpoint-file", file("site-ingest"), "--curve-secret-key",
                 file("site/server.key"), "--allow-dir", file("agents.d"), "--relay-upstream", central_->args[12],
                 "--relay-site", "edge1", "--relay-server-key", file("central/central.pub"), "--relay-symptoms",
                 "--relay-zstd", "--relay-interval", "0.1", "--relay-ack-timeout", "1", "--job-retention-days", "36500",
                 "--retention-days", "36500"};
  site_->before_start = [this] { fs::remove(file("site-port")); };  // a restart gets a new HTTP port
}

// The site reads the agents' keys when it starts: it starts after addAgent made them all.
void Chaos::startSite() {
  if (!site_->start()) throw std::runtime_error("site does not start");
  if (!testing::pollUntil([&] { return !trimmed(slurp(file("site-ingest"))).empty(); }, std::chrono::seconds(20)))
    throw std::runtime_error("site: no ingest endpoint\n" + tail(site_->log));
  site_->args[14] = trimmed(slurp(file("site-ingest")));
  for (auto& l : lanes_) std::replace(l.agent->args.begin(), l.agent->args.end(), std::string("@site@"), site_->args[14]);
}

Proc& Chaos::addAgent(Lane& lane, std::vector<std::string> sources, uint64_t spool_max) {
  std::string home = file("node-" + lane.host);
  std::string spool = home + "/spool.db";
  if (auto it = std::find(sources.begin(), sources.end(), "--spool-path"); it != sources.end()) {
    spool = *(it + 1);
    sources.erase(it, it + 2);
  }
  fs::create_directories(home);
  keygen(home, "agent");
  fs::copy_file(home + "/agent.pub", file("agents.d/" + lane.host + ".pub"));
  Proc& p = newProc("agent-" + lane.host);
  p.args = {FAULTLINE_AGENT_BIN};
  p.args.insert(p.args.end(), sources.begin(), sources.end());
  std::vector<std::string> rest{
      "--files-from-start", "true", "--file-poll-ms", "50", "--endpoints", "@site@", "--spool-path",
      spool, "--state-dir", home, "--batch-interval-ms", "50", "--aggregate-window-s", "0",
      "--ack-timeout-ms", "500", "--rules-dirs", kSource + "/rules", "--rules-override-dir", "",
      "--log-rate-per-minute", "600", "--hostname", lane.host, "--agent-id", lane.host, "--heartbeat-interval-s", "1",
      "--curve-secret-key-file", home + "/agent.key", "--curve-server-public-key", server_pub_, "--utc-offset-s", "0",
      "--nvidia-smi", ""};
  if (spool_max) rest.insert(rest.end(), {"--spool-max-bytes", std::to_string(spool_max)});
  p.args.insert(p.args.end(), rest.begin(), rest.end());
  lane.agent = &p;
  return p;
}

// The samples whose node logs are all journal (text/JSON/export), reduced to job.json, node logs
// and the job's output: what agents and the epilog can deliver. Their symptoms must all have a node.
void Chaos::setUpVerdictLanes() {
  std::set<std::string> hosts;
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(kSource + "/samples")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) {
    if (!fs::exists(d / "job.json") || !fs::is_directory(d / "nodes")) continue;
    bool usable = true;
    std::vector<std::pair<std::string, fs::path>> logs;  // host, journal file
    for (const auto& n : fs::directory_iterator(d / "nodes"))
      for (const auto& f : fs::directory_iterator(n.path())) {
        std::string fn = f.path().filename().string();
        if (fn == "node.json") continue;
        if (fn.rfind("journal", 0) != 0) usable = false;
        logs.emplace_back(n.path().filename().string(), f.path());
      }
    std::set<std::string> node_names;
    for (const auto& [h, f] : logs) usable = usable && node_names.insert(h).second && !hosts.count(h);
    if (!usable || logs.empty()) continue;
    Sample s;
    s.name = d.filename().string();
    s.dir = file("bundles/" + s.name);
    fs::create_directories(s.dir);
    fs::copy_file(d / "job.json", s.dir + "/job.json");
    for (const auto& f : fs::directory_iterator(d))
      if (f.path().filename().string().rfind("slurm-", 0) == 0 && f.path().extension() == ".out")
        fs::copy_file(f.path(), s.dir + "/" + f.path().filename().string());
    for (const auto& [h, f] : logs) {
      fs::create_directories(s.dir + "/nodes/" + h);
      fs::copy_file(f, s.dir + "/nodes/" + h + "/" + f.filename().string());
    }
    std::string error;
    auto b = offline::loadBundle(s.dir, *offline_.engine, &error);
    if (!b) throw std::runtime_error(s.name + ": " + error);
    if (std::any_of(b->symptoms.begin(), b->symptoms.end(), [](const auto& x) { return x.node.empty(); })) {
      fs::remove_all(s.dir);
      continue;
    }
    s.offline = offline::attributeBundle(s.dir, *offline_.engine, &error);
    if (!s.offline) throw std::runtime_error(s.name + ": " + error);
    s.job = nlohmann::json::parse(slurp(s.dir + "/job.json"));
    for (const auto& [h, f] : logs) {
      hosts.insert(h);
      Lane lane;
      lane.kind = "verdict";
      lane.host = h;
      lane.path = file("node-" + h + "/" + f.filename().string() + ".log");
      auto ls = lines(slurp(f.string()));
      const size_t n = 6;
      for (size_t i = 0; i < n; ++i) {
        std::string chunk;
        for (size_t j = ls.size() * i / n; j < ls.size() * (i + 1) / n; ++j) chunk += ls[j] + "\n";
        lane.chunks.push_back(chunk);
      }
      for (const auto& sym : b->symptoms)
        if (sym.source.find("/nodes/" + h + "/") != std::string::npos) lane.expected[{sym.node, sym.rule_id}] += sym.count;
      lanes_.push_back(std::move(lane));
    }
    samples_.push_back(std::move(s));
  }
}

// kmsg records from the samples, renumbered; each agent start gets a fresh FIFO holding the whole
// ring so far (the agent skips what its checkpoint says it delivered).
void Chaos::setUpKmsgLane() {
  std::vector<std::string> texts;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/samples"))
    if (e.path().filename() == "kmsg.txt")
      for (const auto& l : lines(slurp(e.path().string())))
        if (l[0] != ' ' && l.find(';') != std::string::npos) texts.push_back(l.substr(0, l.find(',')) + "|" + l.substr(l.find(';') + 1));
  std::sort(texts.begin(), texts.end());
  Lane lane;
  lane.kind = "kmsg";
  lane.host = "chaos-kmsg";
  lane.path = file("kmsg.fifo");
  uint64_t seq = 1;
  std::string all;
  for (int rep = 0; rep < 30; ++rep) {
    std::string chunk;
    for (const auto& t : texts) {
      // An overrun: records overwritten before the reader got them (never the first: a gap
      // shows only after a record).
      if (seq > 1 && uniform(0, 1) < 0.03) {
        const uint64_t skip = 1 + pick(40);
        seq += skip;
        kmsg_skipped_ += skip;
      }
      auto bar = t.find('|');
      chunk += t.substr(0, bar) + "," + std::to_string(seq) + "," + std::to_string(seq * 1000) + ",-;" + t.substr(bar + 1) + "\n";
      ++seq;
    }
    all += chunk;
    lane.chunks.push_back(chunk);
  }
  lane.expected = offline_.scan(all, common::LogFormat::kKmsg, lane.host, "kmsg", common::SourceKind::kKernel);
  lanes_.push_back(std::move(lane));
}

// The samples' Fabric Manager logs, 20 times over, for the lane `kind` (host chaos-<kind>).
// The samples' Fabric Manager logs, in path order, repeated. Only logs whose every line carries
// Fabric Manager's stamp: a line without one joins the record before it, and which record that
// is depends on where the reader stood (a restart, a chunk boundary), so the offline count
// could not say what the agent must store. Real bundles that quote FM lines without their stamps
// (as threads post them) are left out for that reason.
Lane Chaos::fabricManagerLane(const std::string& kind) {
  std::vector<fs::path> logs;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/samples"))
    if (e.path().filename() == "fabricmanager.log") logs.push_back(e.path());
  std::sort(logs.begin(), logs.end());
  std::string one;
  for (const auto& path : logs) {
    std::string text = slurp(path.string());
    bool stamped = !text.empty();
    for (const auto& l : lines(text)) {
      int64_t wall = 0;
      size_t len = 0;
      if (!l.empty() && !common::parse::parseFabricManagerStamp(l, &wall, &len)) stamped = false;
    }
    if (!stamped) continue;
    if (text.back() != '\n') text += '\n';
    one += text;
  }
  Lane lane;
  lane.kind = kind;
  lane.host = "chaos-" + kind;
  lane.path = file("node-" + lane.host + "/fabricmanager.log");
  for (int rep = 0; rep < 20; ++rep) lane.chunks.push_back(one);
  lane.expected = offline_.scan(one, common::LogFormat::kFabricManager, lane.host, lane.path,
                                common::SourceKind::kFabricManager);
  for (auto& [k, v] : lane.expected) v *= 20;
  return lane;
}

void Chaos::setUpFmLane() {
  lanes_.push_back(fabricManagerLane("fm"));
}

// Journal export entries (the samples' journal.export files, and the kmsg samples' texts as
// kernel-transport entries), restamped in order; chunk i becomes journal file i.
void Chaos::setUpJournalLane() {
  std::vector<std::map<std::string, std::string>> base;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/samples")) {
    if (e.path().filename() == "journal.export") {
      std::map<std::string, std::string> entry;
      for (const auto& l : lines(slurp(e.path().string()) + "\n\n")) {
        if (l.rfind("__CURSOR=", 0) == 0 && !entry.empty()) base.push_back(std::exchange(entry, {}));
        auto eq = l.find('=');
        if (eq != std::string::npos && l.rfind("__", 0) != 0) entry[l.substr(0, eq)] = l.substr(eq + 1);
      }
      if (!entry.empty()) base.push_back(entry);
    } else if (e.path().filename() == "kmsg.txt") {
      for (const auto& l : lines(slurp(e.path().string())))
        if (l[0] != ' ' && l.find(';') != std::string::npos)
          base.push_back({{"_TRANSPORT", "kernel"}, {"SYSLOG_IDENTIFIER", "kernel"}, {"PRIORITY", "3"},
                          {"MESSAGE", l.substr(l.find(';') + 1)}});
    }
  }
  Lane lane;
  lane.kind = "journal";
  lane.host = "chaos-journal";
  lane.path = file("journal");
  fs::create_directories(lane.path);
  fs::create_directories(file("journal-tmp"));
  uint64_t usec = 1'719'000'000'000'000, mono = 1'000'000;
  for (int chunk = 0; chunk < 24; ++chunk) {
    std::string text;
    Counts c;
    for (auto fields : base) {
      fields["_HOSTNAME"] = lane.host;
      fields["_BOOT_ID"] = "0123456789abcdef0123456789abcdef";
      usec += 1000;
      mono += 1000;
      text += "__REALTIME_TIMESTAMP=" + std::to_string(usec) + "\n__MONOTONIC_TIMESTAMP=" + std::to_string(mono) + "\n";
      for (const auto& [k, v] : fields) text += k + "=" + v + "\n";
      text += "\n";
      fields["__REALTIME_TIMESTAMP"] = std::to_string(usec);
      add(c, offline_.journalEntry(fields, lane.host));
    }
    lane.chunks.push_back(text);
    lane.chunk_expected.push_back(c);
    add(lane.expected, c);
  }
  // Each chunk becomes a journal file now (systemd-journal-remote takes a while to start: 8 at a
  // time); during the run a chunk is renamed into the directory (chunks then hold the file name).
  for (size_t i = 0; i < lane.chunks.size(); i += 8) {
    std::vector<std::pair<FILE*, std::string>> writers;
    for (size_t k = i; k < std::min(i + 8, lane.chunks.size()); ++k) {
      std::string out = file("journal-tmp/chunk-" + std::to_string(k) + ".journal");
      FILE* p = ::popen(("/lib/systemd/systemd-journal-remote --output=" + out + " - 2>/dev/null").c_str(), "w");
      if (!p) throw std::runtime_error("cannot run systemd-journal-remote");
      std::fwrite(lane.chunks[k].data(), 1, lane.chunks[k].size(), p);
      writers.emplace_back(p, out);
      lane.chunks[k] = out;
    }
    for (auto& [p, out] : writers)
      if (::pclose(p) != 0 || !fs::exists(out)) throw std::runtime_error("systemd-journal-remote failed for " + out);
  }
  lanes_.push_back(std::move(lane));
}

// Symptom lines of the journal-text samples, written steadily and in bursts while the site stops.
void Chaos::setUpSpoolLane() {
  std::vector<std::string> pool;
  for (const auto& e : fs::recursive_directory_iterator(kSource + "/samples")) {
    if (e.path().filename() != "journal.txt") continue;
    for (const auto& l : lines(slurp(e.path().string()))) {
      auto sp1 = l.find(' '), sp2 = l.find(' ', sp1 + 1);
      if (sp2 == std::string::npos) continue;
      std::string rest = l.substr(sp2 + 1);
      if (!offline_.scan("2024-07-01T00:00:00.000000+0000 h " + rest + "\n", common::LogFormat::kJournalShortIso, "h", "x",
                         common::SourceKind::kJournal).empty())
        pool.push_back(rest);
    }
  }
  std::sort(pool.begin(), pool.end());
  pool.erase(std::unique(pool.begin(), pool.end()), pool.end());
  // bursts are mostly of the less severe lines (the ones a full spool should give up first)
  std::vector<std::string> critical, rest;
  for (const auto& l : pool) {
    auto c = offline_.scan("2024-07-01T00:00:00.000000+0000 h " + l + "\n", common::LogFormat::kJournalShortIso, "h", "x",
                           common::SourceKind::kJournal);
    (offline_.severityOf(c.begin()->first.second) == common::Severity::kCritical ? critical : rest).push_back(l);
  }
  if (critical.empty() || rest.empty()) throw std::runtime_error("spool lane: no critical or no other symptom lines");
  Lane lane;
  lane.kind = "spool";
  lane.host = "chaos-spool";
  lane.path = file("node-chaos-spool/spool-lane.log");
  // 40 steady chunks of 20 lines from all severities, a second apart; the spool-full faults write
  // bursts of 300, ten a second (the agent merges a rule's lines of one second into one symptom of
  // count N: a drop must count N), one line in 20 critical.
  lane.chunks.assign(40, "");
  spool_text_ = [this, pool, critical, rest, &t = spool_t_, host = lane.host](bool burst) mutable {
    std::string out;
    for (int j = 0; j < (burst ? 300 : 20); ++j) {
      char buf[64];
      time_t tt = static_cast<time_t>(!burst || j % 10 == 9 ? t++ : t);
      struct tm tm{};
      gmtime_r(&tt, &tm);
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S.000000+0000", &tm);
      const auto& from = !burst ? pool : j % 20 == 0 ? critical : rest;
      out += std::string(buf) + " " + host + " " + from[pick(from.size())] + "\n";
    }
    return out;
  };
  lanes_.push_back(std::move(lane));
}

// The Fabric Manager logs again, into an agent whose spool is on a 4 MiB tmpfs that the "disk full"
// fault fills to the last byte and frees again. Mounting needs root (CAP_SYS_ADMIN): without it
// the lane is left out and the run says why.
void Chaos::setUpDiskLane() {
  fs::create_directories(file("disk"));
  auto r = runCommand("mount -t tmpfs -o size=4m faultline-chaos " + file("disk") + " 2>&1", 4096);
  if (r.status != 0) {
    std::printf("chaos: no disk-full lane: cannot mount a tmpfs (%s)\n", trimmed(r.out).c_str());
    return;
  }
  disk_mounted_ = true;
  lanes_.push_back(fabricManagerLane("disk"));
}

// Fills the tmpfs under the disk lane's spool to the last byte (ENOSPC), or frees it.
void Chaos::fillDisk(bool fill) {
  const std::string filler = file("disk/filler");
  if (!fill) {
    fs::remove(filler);
    return;
  }
  int fd = ::open(filler.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) return;
  std::string block(64 << 10, 'f');
  for (size_t size = block.size(); size > 0;) {
    ssize_t n = ::write(fd, block.data(), size);
    if (n < 0) size /= 2;  // ENOSPC: smaller writes take the last pages
  }
  ::close(fd);
}

// Link cuts by dropping packets on loopback, where nft works (root with CAP_NET_ADMIN; a CI
// container may lack it: then link cuts are SIGSTOPs only and the run says so). A table of this
// run's own with a base chain per aggregator on the input hook, which every loopback packet
// passes: a cut drops what goes to and comes from that aggregator's ingest port (the agents' links
// to the site, the site's relay link to the central); TCP stays up and retransmits.
void Chaos::setUpPacketDrops() {
  nft_table_ = "faultline_chaos_" + std::to_string(::getpid());
  std::string cmd = "nft add table inet " + nft_table_;
  for (const char* chain : {"site", "central"})
    cmd += " && nft add chain inet " + nft_table_ + " " + chain +
           " '{ type filter hook input priority 0; policy accept; }'";
  auto r = runCommand(cmd + " 2>&1", 4096);
  if (r.status != 0) {
    std::printf("chaos: link cuts by SIGSTOP only: nft does not work here (%s)\n", trimmed(r.out).c_str());
    runCommand("nft delete table inet " + nft_table_ + " >/dev/null 2>&1", 4096);
    return;
  }
  nft_ok_ = true;
  site_->nft_chain = "site";
  central_->nft_chain = "central";
}

void Chaos::dropPackets(Proc& p, bool drop) {
  const std::string& endpoint = &p == site_ ? site_->args[14] : central_->args[12];
  const std::string port = endpoint.substr(endpoint.rfind(':') + 1);
  const std::string at = "inet " + nft_table_ + " " + p.nft_chain;
  auto r = runCommand(drop ? "nft add rule " + at + " tcp dport " + port + " drop && nft add rule " + at + " tcp sport " +
                                 port + " drop 2>&1"
                           : "nft flush chain " + at + " 2>&1",
                      4096);
  if (r.status != 0) throw std::runtime_error("nft failed: " + trimmed(r.out));
  p.dropped = drop;
}

void Chaos::setUpFloodLane() {
  Lane lane;
  lane.kind = "flood";
  lane.host = "chaos-flood";
  lane.path = file("node-chaos-flood/fabricmanager.log");
  for (int i = 0; i < 999; ++i)
    flood_block_ += "[Mon Jul 01 2024 12:00:00] [INFO] [tid 4242] fabric manager routine status " + std::to_string(i) + "\n";
  flood_block_ += "[Mon Jul 01 2024 12:00:01] [ERROR] [tid 4242] detected NVSwitch fatal error 12020 on fid 0 on NVSwitch "
                  "pci bus id 00000000:06:00.0 physical id 9 port 17\n";
  flood_block_counts_ = offline_.scan(flood_block_, common::LogFormat::kFabricManager, lane.host, lane.path,
                                      common::SourceKind::kFabricManager);
  if (flood_block_counts_.empty()) throw std::runtime_error("the flood's symptom line matches no rule");
  lanes_.push_back(std::move(lane));
}

// ---- the run ---------------------------------------------------------------------------------

void Chaos::feed(double fraction) {
  for (auto& lane : lanes_) {
    if (lane.kind == "flood") continue;
    size_t due = std::min(lane.chunks.size(), static_cast<size_t>(fraction * lane.chunks.size()) + 1);
    for (; lane.written < due; ++lane.written) {
      const std::string& chunk = lane.chunks[lane.written];
      if (lane.kind == "kmsg") {
        kmsg_ring_ += chunk;
        kmsg_pending_ += chunk;
      } else if (lane.kind == "journal") {
        char name[64];
        std::snprintf(name, sizeof name, "/system@%04zu.journal", lane.written);
        fs::rename(chunk, lane.path + name);  // rotation: a new file appears in the directory
        ++table_.faults["journal rotate"];
      } else {
        append(lane.path, lane.kind == "spool" ? spool_text_(false) : chunk);
      }
    }
  }
  pumpKmsg();
}

void Chaos::pumpKmsg() {
  if (kmsg_fd_ < 0 || kmsg_pending_.empty()) return;
  ssize_t n = ::write(kmsg_fd_, kmsg_pending_.data(), std::min<size_t>(kmsg_pending_.size(), 65536));
  if (n > 0) kmsg_pending_.erase(0, static_cast<size_t>(n));
}

void Chaos::flood(double now_s) {
  if (!flood_lane_ || now_s < flood_start_s_ || now_s > flood_start_s_ + opt_.flood_seconds + 1) return;
  double elapsed = std::min(now_s - flood_start_s_, opt_.flood_seconds);
  uint64_t due = static_cast<uint64_t>(elapsed * static_cast<double>(opt_.flood_rate)) / 1000 * 1000;
  if (due <= flood_lines_) return;
  std::string out;
  for (; flood_lines_ < due; flood_lines_ += 1000) out += flood_block_;
  append(flood_lane_->path, out);
}

// Journal vacuum: deletes the oldest file once the site has stored everything in it and all
// before it (the agent's cursor is then at or past its end), keeping the newest two.
void Chaos::vacuumJournal(bool agent_down_only) {
  Lane& l = *journal_lane_;
  if (journal_vacuumed_ + 2 >= l.written) return;
  if (agent_down_only && l.agent->pid > 0) return;
  uint64_t want = 0;
  for (size_t i = 0; i <= journal_vacuumed_; ++i) want += total(l.chunk_expected[i]);
  uint64_t got = 0;
  auto store = openStore(file("site.db"));
  if (!store) return;
  SymptomFilter f;
  f.nodes = {l.host};
  f.limit = 10'000'000;
  for (const auto& s : store->symptoms(f)) got += s.symptom.count;
  if (got < want) return;
  char name[64];
  std::snprintf(name, sizeof name, "/system@%04zu.journal", journal_vacuumed_);
  fs::remove(l.path + name);
  ++journal_vacuumed_;
  ++table_.faults[agent_down_only ? "journal vacuum (agent down)" : "journal vacuum"];
}

// The spool lane's expected counts: the offline engine over the whole file as written.
void Chaos::scanSpoolLane() {
  std::string text = slurp(spool_lane_->path);
  auto format = common::detectFormat(std::string_view(text).substr(0, 65536));
  spool_lane_->expected = offline_.scan(text, format, spool_lane_->host, spool_lane_->path, common::sourceKindOf(format));
}

void Chaos::observeClock() {
  if (!fm_agent_) return;
  auto store = openStore(file("site.db"));
  if (!store) return;
  for (const auto& a : store->agents())
    if (a.agent_id == "chaos-fm" && a.last_heartbeat_ns > 0 && a.reported_ns > 0) {
      double skew = static_cast<double>(a.reported_ns - a.last_heartbeat_ns) / 1e9;
      skew_max_s_ = std::max(skew_max_s_, skew);
    }
}

void Chaos::injectFault() {
  double r = uniform(0, 1);
  auto now = Steady::now();
  auto later = [&](double a, double b) { return now + std::chrono::milliseconds(static_cast<int>(uniform(a, b))); };
  auto up = [](Proc* p) { return p->pid > 0 && !p->stopped; };
  if (r < 0.55) {
    std::vector<Proc*> live;
    for (auto& l : lanes_)
      if (l.agent && up(l.agent)) live.push_back(l.agent);
    if (live.empty()) return;
    Proc* p = live[pick(live.size())];
    p->signal(SIGKILL);
    p->restart_pending = true;
    p->restart_at = later(30, 400);
    ++kills_;
    ++table_.faults["SIGKILL agent"];
    if (p == journal_lane_->agent && uniform(0, 1) < 0.5) vacuumJournal(true);
  } else if (r < 0.77) {
    Proc* p = r < 0.67 ? site_ : central_;
    if (!up(p)) return;
    p->signal(SIGKILL);
    p->restart_pending = true;
    p->restart_at = later(50, p == site_ ? 800 : 1500);
    ++kills_;
    ++table_.faults[p == site_ ? "SIGKILL site" : "SIGKILL central"];
  } else if (r < 0.87) {
    // A link cut: the process stops (its TCP connections stay up, nothing moves, acks time out),
    // or (an aggregator, where nft works, half the time) its port drops every packet.
    Proc* p = r < 0.81 ? site_ : r < 0.84 ? central_ : lanes_[pick(lanes_.size())].agent;
    if (!up(p)) return;
    if (nft_ok_ && !p->nft_chain.empty() && uniform(0, 1) < 0.5) {
      if (p->dropped) return;
      dropPackets(*p, true);
      p->undrop_at = later(300, 4000);
      ++table_.faults[p == site_ ? "link cut site (packets dropped)" : "link cut central (packets dropped)"];
      return;
    }
    p->signal(SIGSTOP);
    p->stopped = true;
    p->cont_at = later(300, 2500);
    ++table_.faults[p == site_ ? "link cut site (SIGSTOP)" : p == central_ ? "link cut central (SIGSTOP)" : "link cut agent (SIGSTOP)"];
  } else if (r < 0.92) {
    if (!fm_agent_) return;
    // libfaketime re-reads the file on every clock call: the step takes effect at once. With
    // --site-clock-steps / --central-clock-steps an aggregator's clock is stepped too (not by
    // -1000 d: its retention would prune).
    static const char* steps[] = {"+2h", "-2h", "+1d", "-1d", "+0", "-1000d"};
    std::vector<std::string> who{"agent"};
    if (opt_.site_clock_steps) who.push_back("site");
    if (!central_->env.empty()) who.push_back("central");
    const std::string& w = who[pick(who.size())];
    const char* step = steps[pick(w == "agent" ? 6 : 5)];
    std::ofstream(file(w == "agent" ? "fm-faketime" : w + "-faketime")) << step << "\n";
    ++table_.faults[std::string(step[0] == '-' ? "clock step back" : "clock step forward") + " (" + w + ")"];
  } else if (r < 0.96) {
    // disk full: the disk lane's spool cannot grow until the filler goes again
    if (!disk_lane_ || disk_full_) return;
    // With --disk-restarts, half the time the agent dies first and restarts on the full disk (its
    // spool's WAL then has to be recovered where no byte is free).
    Proc* p = disk_lane_->agent;
    if (opt_.disk_restarts && up(p) && uniform(0, 1) < 0.5) {
      p->signal(SIGKILL);
      p->restart_pending = true;
      p->restart_at = later(30, 400);
      ++kills_;
      ++table_.faults["SIGKILL agent, restarted on a full disk"];
    }
    fillDisk(true);
    disk_full_ = true;
    disk_free_at_ = later(1000, 4000);
    ++table_.faults["disk full (tmpfs under a spool)"];
  } else {
    // spool full: the site stops while the spool lane writes a burst bigger than the bound
    if (!up(site_) || !up(spool_lane_->agent)) return;
    site_->signal(SIGSTOP);
    site_->stopped = true;
    site_->cont_at = later(1500, 3000);
    append(spool_lane_->path, spool_text_(true));
    ++table_.faults["spool full (burst, site stopped)"];
  }
}

void Chaos::tickProcesses() {
  auto now = Steady::now();
  if (disk_full_ && now >= disk_free_at_) {
    fillDisk(false);
    disk_full_ = false;
  }
  for (auto& p : procs_) {
    if (p->exitedOnItsOwn()) {
      p->restart_pending = true;
      p->restart_at = now;
    }
    if (p->stopped && now >= p->cont_at) {
      p->signal(SIGCONT);
      p->stopped = false;
    }
    if (p->dropped && now >= p->undrop_at) dropPackets(*p, false);
    if (p->restart_pending && now >= p->restart_at) p->start();
  }
}

bool Chaos::converged(std::string* diff) {
  Counts want;
  for (const auto& l : lanes_)
    if (l.kind != "spool") add(want, l.expected);
  std::string out;
  // Read in this order: the spool lane's last lines and the agent's counters, then the site, then
  // the central. Stores only grow, so each later read holds what an earlier one saw.
  uint64_t canary = 0;
  for (const auto& [k, v] : storedSince(file("site.db"), spool_lane_->host, canary_from_ns_)) canary += v;
  const std::string spool = file("node-chaos-spool/spool.db");
  spool_dropped_ = spoolQuery(spool, "SELECT value FROM counters WHERE name = 'dropped_symptoms'");
  spool_in_flight_ = spoolQuery(spool, "SELECT value FROM counters WHERE name = 'evicted_in_flight_symptoms'");
  const uint64_t unsent = spoolQuery(spool, "SELECT COUNT(*) FROM batches");
  Counts site = storedIn(file("site.db")), central = storedIn(file("central.db"));
  uint64_t spool_stored = 0;
  Counts site_rest;
  for (const auto& [k, v] : site) {
    if (k.first == spool_lane_->host) spool_stored += v;
    else site_rest[k] = v;
  }
  std::set<Key> keys;
  for (const auto& [k, v] : want) keys.insert(k);
  for (const auto& [k, v] : site_rest) keys.insert(k);
  for (const auto& k : keys) {
    uint64_t g = site_rest.count(k) ? site_rest.at(k) : 0, e = want.count(k) ? want.at(k) : 0;
    if (g != e) out += "site " + k.first + " " + k.second + ": stored " + std::to_string(g) + " expected " + std::to_string(e) + "\n";
  }
  // The spool lane loses what its full spool dropped before sending it (dropped_symptoms: certainly
  // lost), plus some of what it evicted after a send, unacknowledged (evicted_in_flight_symptoms:
  // such a batch may still have arrived and been stored), and nothing else:
  // stored == expected - dropped - (0 .. evicted in flight).
  const uint64_t spool_want = total(spool_lane_->expected);
  spool_lost_ = spool_want > spool_stored ? spool_want - spool_stored : 0;
  if (spool_dropped_ == UINT64_MAX || spool_in_flight_ == UINT64_MAX || unsent == UINT64_MAX)
    out += "spool lane: its spool could not be read\n";
  else if (unsent != 0) out += "spool lane: " + std::to_string(unsent) + " batches not yet acknowledged\n";
  // The kmsg agent's lost count (its heartbeat, at the site) is exactly the sequence numbers the
  // ring skipped: kept in its checkpoint, it neither forgets a gap nor counts one twice across
  // restarts.
  kmsg_lost_ = UINT64_MAX;
  if (auto store = openStore(file("site.db")))
    for (const auto& a : store->agents())
      if (a.agent_id == kmsg_lane_->host)
        for (const auto& src : a.sources)
          if (src.source == "kmsg") kmsg_lost_ = src.lost;
  if (kmsg_lost_ != kmsg_skipped_)
    out += "kmsg lane: the agent reports " + (kmsg_lost_ == UINT64_MAX ? std::string("nothing") : std::to_string(kmsg_lost_)) +
           " lost, the ring skipped " + std::to_string(kmsg_skipped_) + "\n";
  if (canary_from_ns_ == 0 || canary != 20) out += "spool lane: " + std::to_string(canary) + " of its last 20 lines stored\n";
  if (canary_from_ns_ == 0 && unsent == 0 && spool_lane_->agent->pid > 0) {
    canary_from_ns_ = spool_t_ * 1'000'000'000;
    append(spool_lane_->path, spool_text_(false));
    scanSpoolLane();
  }
  if (spool_lost_ < spool_dropped_ || spool_lost_ - spool_dropped_ > spool_in_flight_)
    out += "spool lane: " + std::to_string(spool_lost_) + " lost, counted " + std::to_string(spool_dropped_) +
           " dropped before a send and " + std::to_string(spool_in_flight_) + " evicted in flight\n";
  for (const auto& [k, v] : site)
    if (k.first == spool_lane_->host && v > spool_lane_->expected[k]) out += "spool lane " + k.second + " doubled\n";
  if (central != site) {
    uint64_t a = total(site), b = total(central);
    out += "central differs from site: " + std::to_string(b) + " vs " + std::to_string(a) + " occurrences\n";
  }
  *diff = out;
  return out.empty();
}

bool Chaos::reportJobs() {
  if (!testing::pollUntil([&] { return !trimmed(slurp(file("site-port"))).empty(); }, std::chrono::seconds(20))) return false;
  std::string url = "http://127.0.0.1:" + trimmed(slurp(file("site-port")));
  std::string cli = std::string(FAULTLINE_CLI_BIN) + " --server " + url + " --token-file " + file("token");
  for (const auto& s : samples_) {
    const auto& j = s.job;
    std::string cmd = cli + " job end " + j["job_id"].get<std::string>() + " --nodes '" + j["nodelist"].get<std::string>() +
                      "' --state " + j["state"].get<std::string>() + " --exit-code " + j.value("exit_code", "0:0") +
                      " --start-time " + j["start_time"].get<std::string>() + " --time " + j["end_time"].get<std::string>() +
                      (j.contains("ntasks_per_node") ? " --ntasks-per-node " + std::to_string(j["ntasks_per_node"].get<int>()) : "") +
                      " >/dev/null 2>&1";
    if (runCommand(cmd, 1 << 20).status != 0) {
      std::fprintf(stderr, "chaos: failed: %s\n", cmd.c_str());
      return false;
    }
    for (const auto& f : fs::directory_iterator(s.dir))
      if (f.path().extension() == ".out" &&
          runCommand(cli + " --rules " + kSource + "/rules job output " + j["job_id"].get<std::string>() + " " +
                         f.path().string() + " >/dev/null 2>&1",
                     1 << 20)
                  .status != 0)
        return false;
  }
  return true;
}

// Every failed sample job's newest verdict, at the site and (relayed) at the central, equals the
// offline attribution of the same bundle (coverage aside: it says what reached the aggregator).
bool Chaos::verdictsEqual(std::string* diff) {
  auto site = openStore(file("site.db")), central = openStore(file("central.db"));
  if (!site || !central) return false;
  std::string out;
  size_t judged = 0;
  for (const auto& s : samples_) {
    std::string id = s.job["job_id"].get<std::string>();
    auto row = site->job(id);
    if (!row) {
      out += id + ": no job\n";
      continue;
    }
    if (!row->failed()) continue;
    auto want = common::toJson(*s.offline);
    want.erase("coverage");
    // Templates of unmatched lines are mined offline only (agents do not ship them yet): the live
    // verdict lists none and names no lead node (docs/output-schema.md, "unrecognized"). Where the
    // offline one names a lead, its explanation says so: there the verdict itself must be the same.
    const bool offline_lead = !want["divergent_node"].is_null();
    want.erase("unrecognized");
    want.erase("divergent_node");
    for (auto [store, jid] : {std::pair{site.get(), id}, std::pair{central.get(), "edge1:" + id}}) {
      auto v = store->latestVerdict(jid);
      if (!v) {
        out += jid + ": no verdict\n";
        continue;
      }
      auto got = common::toJson(v->diagnosis);
      got.erase("coverage");
      got.erase("unrecognized");
      got.erase("divergent_node");
      // The central may hold a revision that repeats the verdict before it with that one's
      // diagnosis (relayed as a reference): there the verdict itself must be the same.
      auto verdictOf = [](const nlohmann::json& d) {
        std::vector<std::string> nodes;
        for (const auto& r : d["responsible_nodes"]) nodes.push_back(r.value("node", ""));
        std::sort(nodes.begin(), nodes.end());
        return nlohmann::json{d["terminal_state"], d["sub_domain"], d["cause"].is_object() ? d["cause"]["rule_id"] : nullptr,
                              nodes};
      };
      const bool same = store == site.get() && !offline_lead ? got == want : verdictOf(got) == verdictOf(want);
      if (!same) out += jid + ": verdict differs\n got " + got.dump() + "\n want " + want.dump() + "\n";
      else ++judged;
    }
  }
  verdicts_judged_ = judged;
  *diff = out;
  return out.empty();
}

void Chaos::printTable(bool counts_ok, bool verdicts_ok, const std::string& diff) {
  std::printf("\n== chaos run: seed %" PRIu64 ", %zu agents, %" PRIu64 " kills ==\n", opt_.seed, lanes_.size(), kills_);
  std::printf("%-36s %8s\n", "fault", "count");
  for (const auto& [k, v] : table_.faults) std::printf("%-36s %8" PRIu64 "\n", k.c_str(), v);
  std::printf("%-36s %8" PRIu64 "\n", "kills in all", kills_);
  Counts site = storedIn(file("site.db")), central = storedIn(file("central.db"));
  std::printf("\n%-10s %6s %12s %12s %12s %10s\n", "lane", "agents", "expected", "site", "central", "dropped");
  std::map<std::string, std::array<uint64_t, 4>> by_kind;
  std::map<std::string, int> agents;
  for (const auto& l : lanes_) {
    auto& row = by_kind[l.kind];
    ++agents[l.kind];
    row[0] += total(l.expected);
    for (const auto& [k, v] : site)
      if (k.first == l.host) row[1] += v;
    for (const auto& [k, v] : central)
      if (k.first == l.host) row[2] += v;
    if (l.kind == "spool") row[3] = spool_dropped_;
  }
  for (const auto& [k, r] : by_kind)
    std::printf("%-10s %6d %12" PRIu64 " %12" PRIu64 " %12" PRIu64 " %10" PRIu64 "\n", k.c_str(), agents[k], r[0], r[1],
                r[2], r[3]);
  // the spool lane's losses by severity (a full spool drops the least severe batches first)
  std::map<int, std::pair<uint64_t, uint64_t>> sev;  // severity -> (expected, stored)
  for (const auto& [k, v] : spool_lane_->expected) sev[static_cast<int>(offline_.severityOf(k.second))].first += v;
  for (const auto& [k, v] : site)
    if (k.first == spool_lane_->host) sev[static_cast<int>(offline_.severityOf(k.second))].second += v;
  static const char* names[] = {"info", "warning", "error", "critical"};
  std::printf("spool lane by severity (expected/stored):");
  for (const auto& [s, p] : sev) std::printf(" %s %" PRIu64 "/%" PRIu64, names[s], p.first, p.second);
  const uint64_t in_flight_lost = spool_lost_ >= spool_dropped_ ? spool_lost_ - spool_dropped_ : 0;
  std::printf("\nspool lane: %" PRIu64 " lost to the full spool: %" PRIu64 " dropped before a send, %" PRIu64
              " of the %" PRIu64 " evicted in flight (the other %" PRIu64 " arrived)",
              spool_lost_, spool_dropped_, in_flight_lost, spool_in_flight_,
              spool_in_flight_ >= in_flight_lost ? spool_in_flight_ - in_flight_lost : 0);
  std::printf("\nkmsg lane: %" PRIu64 " sequence numbers skipped (ring overruns), the agent reports %s lost",
              kmsg_skipped_, kmsg_lost_ == UINT64_MAX ? "nothing" : std::to_string(kmsg_lost_).c_str());
  std::printf("\nlink cuts: %s", nft_ok_ ? "SIGSTOP, and packets dropped on loopback (nft)" : "SIGSTOP only (no nft)");
  std::printf("\nsymptoms: %s\n", counts_ok ? "0 lost, 0 doubled (site and central, per node and rule; spool lane: losses all counted)" : "MISMATCH");
  if (!counts_ok) std::printf("%s", diff.c_str());
  size_t failed = 0;
  for (const auto& s : samples_)
    if (s.job["state"].get<std::string>() != "COMPLETED") ++failed;
  std::printf("verdicts equal to offline attribution: %zu of %zu (site + central, %zu failed jobs) %s\n",
              verdicts_judged_, 2 * failed, failed, verdicts_ok ? "" : "MISMATCH");
  std::printf("\n%-28s %12s %7s %6s %5s\n", "process", "peak RSS kB", "starts", "crash", "exit");
  Proc verdict;  // the verdict agents together: the highest peak, the sums
  int verdict_n = 0;
  for (const auto& p : procs_) {
    bool is_verdict = false;
    for (const auto& l : lanes_)
      if (l.agent == p.get() && l.kind == "verdict") is_verdict = true;
    if (is_verdict) {
      verdict.peak_kb = std::max(verdict.peak_kb, p->peak_kb);
      ++verdict_n;
      verdict.starts += p->starts;
      verdict.crashes += p->crashes;
      verdict.exits += p->exits;
      continue;
    }
    std::printf("%-28s %12" PRIu64 " %7d %6d %5d\n", p->name.c_str(), p->peak_kb, p->starts, p->crashes, p->exits);
  }
  std::printf("%-28s %12" PRIu64 " %7d %6d %5d\n", ("agent-verdict (max of " + std::to_string(verdict_n) + ")").c_str(),
              verdict.peak_kb, verdict.starts, verdict.crashes, verdict.exits);
  // An agent that could not open its spool and started a new one says so in its log.
  size_t fresh_spools = 0;
  for (const auto& l : lanes_) {
    std::string log = slurp(l.agent->log);
    for (size_t at = 0; (at = log.find("spool unreadable, started a new one", at)) != std::string::npos; ++at) {
      ++fresh_spools;
      std::printf("%s: %s\n", l.agent->name.c_str(), log.substr(at, log.find('\n', at) - at).c_str());
    }
  }
  std::printf("spools moved aside and started anew: %zu\n", fresh_spools);
  if (fm_agent_)
    std::printf("clock steps: the fm agent's newest heartbeat stamp ran up to %+.0f s ahead of the site's clock "
                "(the site keeps the newest stamp: backward steps do not show there)\n",
                skew_max_s_);
  if (flood_lane_)
    std::printf("flood: %" PRIu64 " lines in %.0f s into %s\n", flood_lines_, opt_.flood_seconds, flood_lane_->host.c_str());
}

int Chaos::run() {
  const auto t0 = Steady::now();
  setUpAggregators();
  setUpVerdictLanes();
  setUpKmsgLane();
  setUpFmLane();
  setUpJournalLane();
  setUpSpoolLane();
  setUpDiskLane();
  if (opt_.flood_seconds > 0) setUpFloodLane();
  for (auto& l : lanes_) {
    if (l.kind == "kmsg") kmsg_lane_ = &l;
    if (l.kind == "journal") journal_lane_ = &l;
    if (l.kind == "spool") spool_lane_ = &l;
    if (l.kind == "flood") flood_lane_ = &l;
    if (l.kind == "disk") disk_lane_ = &l;
  }
  for (auto& l : lanes_) {
    fs::create_directories(file("node-" + l.host));
    if (l.kind != "kmsg" && l.kind != "journal") std::ofstream(l.path, std::ios::app).flush();
    if (l.kind == "verdict" || l.kind == "spool") addAgent(l, {"--fabricmanager-log", "", "--file-globs", l.path}, l.kind == "spool" ? 65536 : 0);
    else if (l.kind == "fm" || l.kind == "flood") addAgent(l, {"--fabricmanager-log", l.path});
    else if (l.kind == "disk") addAgent(l, {"--fabricmanager-log", l.path, "--spool-path", file("disk/spool.db")});
    else if (l.kind == "journal")
      addAgent(l, {"--fabricmanager-log", "", "--journald", "true", "--journal-dir", l.path, "--journal-from-head", "true"});
    else if (l.kind == "kmsg") {
      Proc& p = addAgent(l, {"--fabricmanager-log", "", "--kmsg", "true", "--kmsg-path", l.path});
      p.before_start = [this] {
        if (kmsg_fd_ >= 0) ::close(kmsg_fd_);
        ::unlink(kmsg_lane_->path.c_str());
        ::mkfifo(kmsg_lane_->path.c_str(), 0600);
        kmsg_fd_ = ::open(kmsg_lane_->path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
        kmsg_pending_ = kmsg_ring_;  // the device replays its ring on open
      };
    }
    if (l.kind != "kmsg") l.agent->args.insert(l.agent->args.begin() + 1, {"--kmsg", "false"});
    if (l.kind != "journal") l.agent->args.insert(l.agent->args.begin() + 1, {"--journald", "false"});
  }
  for (auto& l : lanes_)
    if (l.kind == "fm") {
      if (fs::exists(kFaketime)) {
        std::ofstream(file("fm-faketime")) << "+0\n";
        l.agent->env = {"LD_PRELOAD=" + kFaketime, "FAKETIME_TIMESTAMP_FILE=" + file("fm-faketime"), "FAKETIME_NO_CACHE=1",
                        "FAKETIME_DONT_FAKE_MONOTONIC=1"};
        fm_agent_ = l.agent;
        if (opt_.site_clock_steps) {
          std::ofstream(file("site-faketime")) << "+0\n";
          site_->env = {"LD_PRELOAD=" + kFaketime, "FAKETIME_TIMESTAMP_FILE=" + file("site-faketime"),
                        "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"};
        }
      } else {
        std::printf("chaos: %s missing (Debian libfaketime): no clock steps\n", kFaketime.c_str());
      }
    }
  startSite();
  setUpPacketDrops();
  for (auto& l : lanes_)
    if (!l.agent->start()) throw std::runtime_error("cannot start " + l.agent->name);
  // The faults begin once every agent runs (its heartbeat at the site): starting 27 agents on a
  // busy 2-core machine takes seconds.
  const bool all_up = testing::pollUntil(
      [&] {
        auto store = openStore(file("site.db"));
        if (!store) return false;
        size_t beating = 0;
        for (const auto& a : store->agents()) beating += a.last_heartbeat_ns > 0;
        return beating == lanes_.size();
      },
      std::chrono::seconds(120));
  if (!all_up) throw std::runtime_error("not every agent sent a heartbeat within 120 s");
  std::printf("chaos: %zu samples, %zu agents, seed %" PRIu64 ", setup %.1f s, work dir %s\n", samples_.size(),
              lanes_.size(), opt_.seed, std::chrono::duration<double>(Steady::now() - t0).count(), dir_.c_str());
  std::fflush(stdout);

  // The fault phase.
  const auto start = Steady::now();
  const double feed_s = opt_.seconds * 0.8;
  flood_start_s_ = opt_.seconds * 0.2;
  auto next_fault = start + std::chrono::milliseconds(200);
  auto next_vacuum = start, next_rss = start;
  while (true) {
    const auto now = Steady::now();
    const double t = std::chrono::duration<double>(now - start).count();
    if (t >= opt_.seconds && kills_ >= static_cast<uint64_t>(opt_.min_kills) &&
        (!flood_lane_ || t > flood_start_s_ + opt_.flood_seconds))
      break;
    feed(std::min(1.0, t / feed_s));
    flood(t);
    tickProcesses();
    if (now >= next_fault) {
      injectFault();
      next_fault = now + std::chrono::milliseconds(static_cast<int>(uniform(0.2, 1.8) * opt_.fault_ms));
    }
    if (now >= next_vacuum) {
      vacuumJournal(false);
      observeClock();
      next_vacuum = now + std::chrono::milliseconds(500);
    }
    // The jobs end while the faults go on (the site up: the CLI would wait on a stopped one); their
    // verdicts are judged, and judged again as late symptoms arrive.
    if (!jobs_reported_ && t >= 0.85 * opt_.seconds && site_->pid > 0 && !site_->stopped) jobs_reported_ = reportJobs();
    if (now >= next_rss) {
      for (auto& p : procs_) p->sampleRss();
      next_rss = now + std::chrono::milliseconds(200);
    }
    ::poll(nullptr, 0, 5);  // pacing of the schedule, not a wait for a result
  }

  // Faults end: everything runs, the clock is right, the rest of the logs is written.
  for (auto& p : procs_) {
    if (p->stopped) {
      p->signal(SIGCONT);
      p->stopped = false;
    }
    if (p->dropped) dropPackets(*p, false);
    if (p->pid <= 0) p->start();
  }
  if (fm_agent_) std::ofstream(file("fm-faketime")) << "+0\n";
  if (opt_.site_clock_steps && fm_agent_) std::ofstream(file("site-faketime")) << "+0\n";
  if (!central_->env.empty()) std::ofstream(file("central-faketime")) << "+0\n";
  if (disk_full_) fillDisk(false);
  disk_full_ = false;
  feed(1.0);
  scanSpoolLane();
  if (flood_lane_) add(flood_lane_->expected, flood_block_counts_, flood_lines_ / 1000);
  std::printf("chaos: fault phase over after %.1f s, %" PRIu64 " kills; draining\n",
              std::chrono::duration<double>(Steady::now() - start).count(), kills_);
  std::fflush(stdout);

  const auto deadline = Steady::now() + std::chrono::milliseconds(static_cast<int>(opt_.drain_seconds * 1000));
  std::string diff;
  bool counts_ok = false;
  auto next_check = Steady::now();
  while (Steady::now() < deadline) {
    pumpKmsg();
    tickProcesses();
    if (Steady::now() >= next_check) {
      for (auto& p : procs_) p->sampleRss();
      if ((counts_ok = converged(&diff))) break;
      next_check = Steady::now() + std::chrono::milliseconds(250);
    }
    ::poll(nullptr, 0, 5);
  }
  const double drained_s = std::chrono::duration<double>(Steady::now() - start).count();
  bool verdicts_ok = false;
  std::string vdiff;
  if (counts_ok) {
    while (!jobs_reported_ && Steady::now() < deadline + std::chrono::seconds(30)) jobs_reported_ = reportJobs();
    verdicts_ok = jobs_reported_ && testing::pollUntil([&] { return verdictsEqual(&vdiff); }, std::chrono::seconds(60));
  }
  // The end state holds after the verdicts too (nothing stored twice or taken away since).
  if (counts_ok) {
    std::string late;
    if (!converged(&late)) {
      counts_ok = false;
      diff = "after the verdicts:\n" + late;
    }
  }
  // Site nodes at the central: every lane's agent runs, so the central lists its host live (the
  // relay carries the site's live nodes with every batch, and alone every 30 s): no node falsely
  // SILENT after the outages. Not judged when a clock was stepped (stamps from another clock).
  std::string silent;
  const bool judge_live = !opt_.site_clock_steps && !opt_.central_clock_steps;
  const bool live_ok = !judge_live || testing::pollUntil([&] {
    auto central = openStore(file("central.db"));
    if (!central) return false;
    const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::system_clock::now().time_since_epoch()).count();
    silent.clear();
    for (const auto& l : lanes_) {
      auto n = central->node(l.host);
      if (!n || now - n->last_heartbeat_ns > 90'000'000'000) silent += " " + l.host;
    }
    return silent.empty();
  }, std::chrono::seconds(45));
  for (auto& p : procs_) p->sampleRss();
  int crashes = 0;
  for (auto& p : procs_) crashes += p->crashes;
  printTable(counts_ok, verdicts_ok, diff);
  std::printf("site nodes live at the central: %s\n",
              !judge_live ? "not judged (a clock was stepped)" : live_ok ? "all" : ("SILENT:" + silent).c_str());
  if (!vdiff.empty()) std::printf("%s", vdiff.substr(0, 6000).c_str());
  std::printf("drained after %.1f s of run; total %.1f s\n", drained_s,
              std::chrono::duration<double>(Steady::now() - t0).count());
  if (!counts_ok || !verdicts_ok) {
    std::printf("--- site log tail ---\n%s\n--- central log tail ---\n%s\n", tail(site_->log).c_str(),
                tail(central_->log).c_str());
    if (!opt_.keep.empty()) std::printf("work dir kept: %s\n", dir_.c_str());
  }
  for (auto& l : lanes_) l.agent->signal(SIGTERM);
  site_->signal(SIGTERM);
  central_->signal(SIGTERM);
  // Memory stays bounded: an agent under any of this (the flood too) within 100 MiB, an
  // aggregator within 512 MiB (peaks today: ~30 MB and ~35 MB).
  bool bounded = true;
  for (const auto& p : procs_) {
    const bool aggregator = p.get() == site_ || p.get() == central_;
    if (p->peak_kb > (aggregator ? 512u : 100u) * 1024) {
      std::printf("chaos: %s peaked at %" PRIu64 " kB\n", p->name.c_str(), p->peak_kb);
      bounded = false;
    }
  }
  bool ok = counts_ok && verdicts_ok && live_ok && bounded && crashes == 0 && kills_ >= static_cast<uint64_t>(opt_.min_kills);
  std::printf("chaos: %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i], v = argv[i + 1];
    if (k == "--seed") o.seed = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--seconds") o.seconds = std::atof(v.c_str());
    else if (k == "--min-kills") o.min_kills = std::atoi(v.c_str());
    else if (k == "--fault-ms") o.fault_ms = std::atof(v.c_str());
    else if (k == "--flood-seconds") o.flood_seconds = std::atof(v.c_str());
    else if (k == "--flood-rate") o.flood_rate = std::strtoull(v.c_str(), nullptr, 10);
    else if (k == "--drain-seconds") o.drain_seconds = std::atof(v.c_str());
    else if (k == "--keep") o.keep = v;
    else if (k == "--disk-restarts") o.disk_restarts = v == "1" || v == "true";
    else if (k == "--site-clock-steps") o.site_clock_steps = v == "1" || v == "true";
    else if (k == "--central-clock-steps") o.central_clock_steps = v == "1" || v == "true";
    else {
      std::fprintf(stderr, "chaos_driver: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  ::signal(SIGPIPE, SIG_IGN);
  try {
    Chaos chaos(o);
    return chaos.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chaos_driver: %s\n", e.what());
    return 1;
  }
}

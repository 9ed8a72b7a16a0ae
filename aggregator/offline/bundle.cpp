#include "aggregator/offline/bundle.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "aggregator/offline/kube_job.h"
#include "common/error_lexicon.h"
#include "common/journal/journal_file_reader.h"
#include "common/symptom_aggregator.h"

namespace faultline::offline {

namespace fs = std::filesystem;
using common::CoverageEntry;
using common::LogFormat;
using common::LogRecord;
using common::Symptom;

namespace {

std::optional<std::string> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string readHead(const std::string& path, size_t n) {
  std::string head(n, '\0');
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  ssize_t got = ::read(fd, head.data(), n);
  ::close(fd);
  head.resize(got > 0 ? static_cast<size_t>(got) : 0);
  return head;
}

bool validZoneName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s.front() == '/' || s.find("..") != std::string::npos) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '_' || c == '-' || c == '+')) return false;
  return true;
}

NodeInfo parseNodeJson(const std::string& text, std::string* warning) {
  NodeInfo info;
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    *warning = "node.json is not a JSON object";
    return info;
  }
  if (j.contains("boot_time") && j["boot_time"].is_string())
    info.boot_time_ns = common::parseTimestampNs(j["boot_time"].get<std::string>());
  info.boot_id = j.value("boot_id", "");
  // "timezone": a tz database name or an offset; "utc_offset": an offset or seconds east of UTC.
  for (const char* key : {"timezone", "utc_offset"}) {
    if (info.zone || !j.contains(key)) continue;
    const auto& v = j[key];
    std::string spec = v.is_string() ? v.get<std::string>() : v.is_number() ? v.dump() : "";
    if (spec.empty()) continue;
    std::string err;
    info.zone = resolveTimeZone(spec, &err);
    if (info.zone) info.zone_source = fmt::format("node.json {}", key);
    else *warning = fmt::format("node.json {} '{}': {}", key, spec, err);
  }
  if (j.contains("gpus") && j["gpus"].is_array()) {
    info.gpu_count = static_cast<int>(j["gpus"].size());
    for (const auto& g : j["gpus"]) {
      if (!g.is_object()) continue;
      GpuInfo gi;
      gi.index = g.value("index", -1);
      gi.pci = common::normalizePciId(g.value("pci_bus_id", ""));
      gi.uuid = g.value("uuid", "");
      gi.serial = g.value("serial", "");
      info.gpus.push_back(gi);
    }
  }
  if (j.contains("nvswitches") && j["nvswitches"].is_number_integer()) info.nvswitch = j["nvswitches"].get<int>() > 0;
  if (j.contains("nvswitch") && j["nvswitch"].is_boolean()) info.nvswitch = j["nvswitch"].get<bool>();
  if (j.contains("ip") && j["ip"].is_string()) info.addresses.push_back(j["ip"].get<std::string>());
  if (j.contains("addresses") && j["addresses"].is_array())
    for (const auto& a : j["addresses"])
      if (a.is_string()) info.addresses.push_back(a.get<std::string>());
  if (j.contains("local_rank_to_gpu_index") && j["local_rank_to_gpu_index"].is_object())
    for (const auto& [k, v] : j["local_rank_to_gpu_index"].items())
      if (v.is_number_integer()) info.local_rank_to_gpu[std::atoi(k.c_str())] = v.get<int>();
  return info;
}

// Journals first: they carry both clocks and so reveal the boot time for raw dmesg files.
int formatOrder(LogFormat f) {
  switch (f) {
    case LogFormat::kJournalBinary:
    case LogFormat::kJournalExport:
    case LogFormat::kJournalJson:
    case LogFormat::kJournalShortIso:
    case LogFormat::kSyslog:
      return 0;
    default:
      return 1;
  }
}

struct FileScan {
  FileScan(const common::RuleEngine& e, common::MatchContext c, common::SymptomAggregator* a,
           std::vector<Symptom>* d, common::UnmatchedLines* u = nullptr, std::string sole = {})
      : engine(e), ctx(std::move(c)), agg(a), direct(d), unmatched(u), sole_node(std::move(sole)) {}
  const common::RuleEngine& engine;
  common::MatchContext ctx;
  common::SymptomAggregator* agg;
  std::vector<Symptom>* direct;  // when not aggregating
  common::UnmatchedLines* unmatched;  // records no rule matched go here, when set
  std::string sole_node;              // a one-node job's node: where job-wide lines belong
  // Boot-time evidence: UTC time minus time since boot, from records that have both.
  std::optional<int64_t> boot_estimate;
  int64_t last_ns = 0;  // the latest timed record handed on (where the logs stop)

  void onRecord(LogRecord&& rec) {
    if (rec.time_known) last_ns = std::max(last_ns, rec.time_ns);
    // Untimed records (tracebacks in rank logs) stay untimed: borrowing a neighbour's time
    // could put an echo of a fault minutes before the fault itself.
    if (rec.time_known && rec.monotonic_ns >= 0 && !boot_estimate)
      boot_estimate = rec.time_ns - rec.monotonic_ns;
    std::optional<Symptom> s;
    if (!rec.rule_literals_absent) s = engine.extract(rec, ctx);
    if (!s) {
      if (unmatched) unmatched->add(rec, nodeOf(rec));
      return;
    }
    if (agg) agg->add(std::move(*s));
    else direct->push_back(std::move(*s));
  }

  // The node a record no rule matched was read from: the file's, else its rank's, else the
  // one-node job's; "" when unknown.
  std::string nodeOf(const LogRecord& rec) const {
    if (!ctx.node.empty()) return ctx.node;
    if (rec.rank >= 0 && ctx.node_of_rank) {
      std::string n = ctx.node_of_rank(rec.rank);
      if (!n.empty()) return n;
    }
    return sole_node;
  }
};

// `zone_note` says where popts' zone came from; it lands in the coverage entry when the file had
// node-local stamps.
CoverageEntry scanOne(const std::string& path, LogFormat format, const common::ParseOptions& popts,
                      FileScan& scan, size_t chunk, const std::string& zone_note = "") {
  CoverageEntry cov;
  cov.source = path;
  cov.format = std::string(common::formatName(format));
  if (scan.unmatched) scan.unmatched->beginSource(scan.ctx.kind);
  if (format == LogFormat::kJournalBinary) {
    auto r = common::readJournalFiles({path}, [&](LogRecord&& rec) { scan.onRecord(std::move(rec)); });
    cov.records = r.entries;
    cov.skipped = r.skipped;
    if (!r.error.empty()) {
      cov.status = r.entries ? "partial" : "error";
      cov.reason = r.error;
    }
    if (scan.unmatched) scan.unmatched->endSource(r.entries);
    return cov;
  }
  // The rules' literals are searched over the raw bytes first: only records holding one (and the
  // first with both clocks, for boot_estimate) reach onRecord; all are parsed and counted.
  common::ParseOptions fast = popts;
  fast.literals = scan.engine.literalScanner();
  if (scan.unmatched) fast.error_words = common::errorWordScanner();
  auto parser = common::makeStreamParser(format, fast, [&](LogRecord&& rec) { scan.onRecord(std::move(rec)); });
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    cov.status = "error";
    cov.reason = fmt::format("cannot open: {}", std::strerror(errno));
    return cov;
  }
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::string buf(chunk, '\0');
  while (true) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      cov.status = "partial";
      cov.reason = fmt::format("read error: {}", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    parser->feed(std::string_view(buf.data(), static_cast<size_t>(n)));
  }
  ::close(fd);
  parser->finish();
  const auto& rep = parser->report();
  if (scan.unmatched) scan.unmatched->endSource(rep.lines);
  cov.records = rep.records;
  cov.skipped = rep.skipped;
  if (rep.local_stamps > 0) {
    const std::string zone = popts.local_zone ? popts.local_zone->name()
                                              : common::TimeZone::formatOffset(popts.utc_offset_sec);
    cov.clock = zone_note.empty() ? zone : fmt::format("{} ({})", zone, zone_note);
  }
  std::vector<std::string> reasons;
  if (rep.binary) reasons.push_back(fmt::format("{} binary/garbage lines", rep.binary));
  if (rep.oversized) reasons.push_back(fmt::format("{} oversized lines", rep.oversized));
  if (rep.malformed) reasons.push_back(fmt::format("{} malformed lines", rep.malformed));
  if (rep.truncated) reasons.push_back("truncated last line");
  if (!reasons.empty()) {
    if (cov.status == "ok") cov.status = "partial";
    std::string joined;
    for (const auto& r : reasons) joined += (joined.empty() ? "" : ", ") + r;
    if (!rep.notes.empty()) joined += " (first: " + rep.notes.front() + ")";
    cov.reason = cov.reason.empty() ? joined : cov.reason + "; " + joined;
  }
  if (rep.records == 0 && rep.lines > 0 && cov.status != "error") {
    cov.status = "error";
    if (cov.reason.empty()) cov.reason = "no readable records";
  }
  return cov;
}

LogFormat detectFile(const std::string& path) {
  std::string head = readHead(path, 64 << 10);
  if (common::isJournalFileHeader(head)) return LogFormat::kJournalBinary;
  return common::detectFormat(head);
}

// A GPU fault whose line names no GPU (CUDA's "uncorrectable ECC error encountered" in a rank's
// traceback) on a node with exactly one GPU in its inventory is that GPU's.
bool gpuFault(const Symptom& s) {
  return s.sub_domain == common::SubDomain::kHardware &&
         (s.category.rfind("gpu", 0) == 0 || s.category == "cuda" || s.category == "nvml");
}

void annotateDevices(std::vector<Symptom>& symptoms, const std::map<std::string, NodeInfo>& nodes,
                     const std::vector<std::string>& job_nodes) {
  for (auto& s : symptoms) {
    // A job-wide log's line of a one-node job is that node's (the correlator places it there).
    auto it = nodes.find(s.node.empty() && job_nodes.size() == 1 ? job_nodes.front() : s.node);
    if (it == nodes.end()) continue;
    if (s.device.empty() && it->second.gpus.size() == 1 && gpuFault(s)) {
      s.device = it->second.gpus.front().pci;
      s.fields["device_from"] = "the node's only GPU";
    }
    if (s.device.empty()) continue;
    for (const auto& g : it->second.gpus) {
      if (g.pci != s.device) continue;
      s.fields["gpu_index"] = std::to_string(g.index);
      if (!g.uuid.empty()) s.fields["gpu_uuid"] = g.uuid;
      if (!g.serial.empty()) s.fields["gpu_serial"] = g.serial;
      std::string ranks;
      for (const auto& [lr, gi] : it->second.local_rank_to_gpu)
        if (gi == g.index) ranks += (ranks.empty() ? "" : ",") + std::to_string(lr);
      if (!ranks.empty()) s.fields["local_ranks"] = ranks;
    }
  }
}

std::vector<std::string> listFiles(const fs::path& dir, bool recursive) {
  std::vector<std::string> out;
  std::error_code ec;
  if (recursive) {
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec))
      if (it->is_regular_file()) out.push_back(it->path().string());
  } else {
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_regular_file()) out.push_back(it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The Kubernetes objects' records (events, terminated containers, pod statuses) on the pods'
// nodes, and the pods' logs (BUNDLE/pods/*: `kubectl logs --timestamps [--prefix] [--previous]`)
// read as logs of the node each pod ran on; a log of a pod that no object places stays job-wide.
void addKubeEvidence(const fs::path& root, const KubeJob& kube, const common::RuleEngine& engine, Bundle& b,
                     common::SymptomAggregator& agg, size_t chunk, common::UnmatchedLines* unmatched) {
  b.coverage.insert(b.coverage.end(), kube.coverage.begin(), kube.coverage.end());
  for (const auto& kr : kube.records) {
    common::MatchContext ctx{kr.node, kr.source, common::SourceKind::kJournal, {}};
    if (auto s = engine.extract(kr.record, ctx)) agg.add(std::move(*s));
  }
  const fs::path pods = root / "pods";
  const common::JobInfo& job = b.job;
  for (const auto& f : listFiles(pods, true)) {
    const std::string rel = fs::relative(f, pods).string();
    const std::string pod_name = podOfLogFile(kube, rel, readHead(f, 512));
    const KubePod* pod = kube.pod(pod_name);
    const std::string node = pod ? pod->node : "";
    LogFormat format = detectFile(f);
    common::ParseOptions popts;
    popts.default_year = job.start_ns ? common::yearOfNs(job.start_ns) : 1970;
    FileScan scan{engine, {node, f, common::sourceKindOf(format), [&job](int r) { return job.nodeOfRank(r); }},
                  &agg, nullptr, unmatched};
    auto cov = scanOne(f, format, popts, scan, chunk);
    cov.node = node;
    b.last_record_ns = std::max(b.last_record_ns, scan.last_ns);
    if (!node.empty() && cov.records > 0 && (cov.status == "ok" || cov.status == "partial"))
      b.covered_by_kind[common::sourceKindOf(format)].insert(node);
    if (!pod) {
      const std::string why = pod_name.empty() ? "no pod named by the file's name or [pod/...] prefix"
                                               : fmt::format("pod {} is in no kube/ object: read as a job-wide log", pod_name);
      cov.reason = cov.reason.empty() ? why : cov.reason + "; " + why;
    }
    b.coverage.push_back(std::move(cov));
  }
}

}  // namespace

std::shared_ptr<const common::TimeZone> resolveTimeZone(const std::string& spec, std::string* error,
                                                        const std::string& zoneinfo_dir) {
  if (auto off = common::parseUtcOffset(spec))
    return std::make_shared<const common::TimeZone>(common::TimeZone::fixed(*off));
  bool numeric = !spec.empty();
  for (size_t i = 0; i < spec.size(); ++i)
    numeric = numeric && (std::isdigit(static_cast<unsigned char>(spec[i])) || (i == 0 && spec[i] == '-'));
  if (numeric && spec != "-") {
    long v = std::strtol(spec.c_str(), nullptr, 10);
    if (v >= -14 && v <= 14) v *= 3600;
    if (v < -14 * 3600 || v > 14 * 3600) {
      *error = "offset out of range";
      return nullptr;
    }
    return std::make_shared<const common::TimeZone>(common::TimeZone::fixed(static_cast<int>(v)));
  }
  if (!validZoneName(spec)) {
    *error = "neither an offset nor a tz database name";
    return nullptr;
  }
  auto bytes = slurp(fs::path(zoneinfo_dir) / spec);
  if (!bytes) {
    *error = fmt::format("no zone '{}' in {}", spec, zoneinfo_dir);
    return nullptr;
  }
  auto zone = common::TimeZone::fromTzif(*bytes, spec, error);
  if (!zone) return nullptr;
  return std::make_shared<const common::TimeZone>(std::move(*zone));
}

std::shared_ptr<const common::TimeZone> systemTimeZone(const std::string& path) {
  auto bytes = slurp(path);
  if (!bytes) return nullptr;
  std::string error;
  auto zone = common::TimeZone::fromTzif(*bytes, "system zone (" + path + ")", &error);
  if (!zone) return nullptr;
  return std::make_shared<const common::TimeZone>(std::move(*zone));
}

ScanResult scanFile(const std::string& path, const std::string& node, const common::RuleEngine& engine,
                    const common::ParseOptions* parse_options, bool aggregate, common::UnmatchedLines* unmatched) {
  ScanResult result;
  common::SymptomAggregator agg;
  LogFormat format = detectFile(path);
  FileScan scan{engine, {node, path, common::sourceKindOf(format), {}}, aggregate ? &agg : nullptr,
                &result.symptoms, unmatched};
  common::ParseOptions popts = parse_options ? *parse_options : common::ParseOptions{};
  result.coverage = scanOne(path, format, popts, scan, 256 << 10);
  result.coverage.node = node;
  if (aggregate) result.symptoms = agg.drainAll();
  return result;
}

ScanResult scanJobLog(const std::string& path, const std::string& node,
                      std::function<std::string(int)> node_of_rank, const common::RuleEngine& engine,
                      const common::ParseOptions& parse_options, const BundleOptions& options,
                      common::UnmatchedLines* unmatched, const std::string& sole_node) {
  ScanResult result;
  common::SymptomAggregator agg(options.aggregation_window_ns);
  LogFormat format = detectFile(path);
  FileScan scan{engine, {node, path, common::sourceKindOf(format), std::move(node_of_rank)}, &agg, nullptr,
                unmatched, sole_node};
  result.coverage = scanOne(path, format, parse_options, scan, options.read_chunk);
  result.coverage.node = node;
  result.symptoms = agg.drainAll();
  return result;
}

namespace {

// Files of a bundle that are not logs.
const std::set<std::string> kNotLogs = {"job.json",       "sacct.json", "expected.json",
                                        "first_run.json", "README.md",  "node.json"};

// The job's description: job.json, else sacct.json, else the Kubernetes objects (kube/*.json),
// which are loaded in every case for the pods' nodes and ranks and the events (kube_job.h).
// false + *error when none describes the job.
bool describeJob(const fs::path& root, const std::string& dir, Bundle& b, std::optional<KubeJob>* kube,
                 std::string* error) {
  bool described = true;
  if (auto text = slurp(root / "job.json")) {
    auto job = common::parseJobJson(*text, error);
    if (!job) return false;
    b.job = std::move(*job);
  } else if (auto sacct = slurp(root / "sacct.json")) {
    auto job = common::parseSacctJson(*sacct, "", error);
    if (!job) return false;
    b.job = std::move(*job);
  } else {
    described = false;
  }
  std::error_code ec;
  if (fs::is_directory(root / "kube", ec)) {
    std::string kube_error;
    *kube = loadKubeDir((root / "kube").string(), &kube_error);
    if (!*kube && !described) {
      *error = fmt::format("{}: {}", dir, kube_error);
      return false;
    }
    if (*kube && !described) b.job = (*kube)->job, described = true;
  }
  if (!described) *error = fmt::format("{}: no job.json, sacct.json or kube/", dir);
  return described;
}

// One bundle's scan: what every file is read with, and the symptoms of them all aggregated.
class BundleScan {
 public:
  BundleScan(const fs::path& root, const common::RuleEngine& engine, const BundleOptions& options, Bundle& b)
      : root_(root), engine_(engine), options_(options), b_(b), agg_(options.aggregation_window_ns),
        job_hosts_(std::make_shared<const common::HostSet>(b.job.nodes.begin(), b.job.nodes.end())) {
    if (b.job.start_ns) default_year_ = common::yearOfNs(b.job.start_ns);
    if (options.mine_unmatched) unmatched_.emplace(options.unmatched);
    // Node-local stamps of nodes whose node.json names no zone are read in the job's zone, if the
    // job states one, else as UTC; the coverage entry of each such file says which.
    if (!b.job.timezone.empty()) {
      std::string err;
      job_zone_ = resolveTimeZone(b.job.timezone, &err, options.zoneinfo_dir);
      if (job_zone_) job_zone_note_ = "job's zone from job.json";
      else b.coverage.push_back({"", (root / "job.json").string(), "job.json", 0, 1, "error",
                                 fmt::format("timezone '{}': {}", b.job.timezone, err)});
    }
  }

  // Every node folder (nodes/NODE), in name order.
  void scanNodes() {
    std::error_code ec;
    std::vector<std::string> node_names;
    if (fs::is_directory(root_ / "nodes", ec))
      for (auto it = fs::directory_iterator(root_ / "nodes", ec); !ec && it != fs::directory_iterator(); it.increment(ec))
        if (it->is_directory()) node_names.push_back(it->path().filename().string());
    std::sort(node_names.begin(), node_names.end());
    for (const auto& node : node_names) scanNode(node);
  }

  // Job-wide logs: ranks map to nodes through the job's layout.
  void scanJobLogs() {
    const std::string sole_node = b_.job.nodes.size() == 1 ? b_.job.nodes.front() : std::string();
    for (const auto& f : listFiles(root_, false)) {
      if (kNotLogs.count(fs::path(f).filename().string())) continue;
      LogFormat format = detectFile(f);
      common::ParseOptions popts;
      popts.default_year = default_year_;
      popts.local_zone = job_zone_;
      popts.known_hosts = job_hosts_;
      const common::JobInfo& job = b_.job;
      FileScan scan{engine_, {"", f, common::sourceKindOf(format), [&job](int r) { return job.nodeOfRank(r); }},
                    &agg_, nullptr, um(), sole_node};
      auto cov = scanOne(f, format, popts, scan, options_.read_chunk, job_zone_note_);
      b_.coverage.push_back(std::move(cov));
      b_.last_record_ns = std::max(b_.last_record_ns, scan.last_ns);
    }
  }

  void scanKube(const KubeJob& kube) { addKubeEvidence(root_, kube, engine_, b_, agg_, options_.read_chunk, um()); }

  // A job node without a folder or any record is "missing"; the symptoms, their devices and the
  // unmatched lines' templates into the bundle.
  void finish() {
    for (const auto& n : b_.job.nodes)
      if (!b_.nodes.count(n) && std::none_of(b_.coverage.begin(), b_.coverage.end(),
                                             [&n](const CoverageEntry& c) { return c.node == n && c.records > 0; }))
        b_.coverage.push_back({n, "", "", 0, 0, "missing", "no logs collected for this node"});
    b_.symptoms = agg_.drainAll();
    annotateDevices(b_.symptoms, b_.nodes, b_.job.nodes);
    if (unmatched_) b_.unmatched = unmatched_->templates();
  }

 private:
  common::UnmatchedLines* um() { return unmatched_ ? &*unmatched_ : nullptr; }

  // A node's folder: its node.json, then its logs in format order (a boot time one gives the next).
  void scanNode(const std::string& node) {
    fs::path ndir = root_ / "nodes" / node;
    NodeInfo info;
    if (auto text = slurp(ndir / "node.json")) {
      std::string warning;
      info = parseNodeJson(*text, &warning);
      if (!warning.empty())
        b_.coverage.push_back({node, (ndir / "node.json").string(), "node.json", 0, 1, "error", warning});
    }
    std::vector<std::pair<LogFormat, std::string>> files;
    for (const auto& f : listFiles(ndir, true)) {
      if (kNotLogs.count(fs::path(f).filename().string())) continue;
      files.emplace_back(detectFile(f), f);
    }
    std::stable_sort(files.begin(), files.end(),
                     [](const auto& a, const auto& b) { return formatOrder(a.first) < formatOrder(b.first); });
    std::optional<int64_t> boot = info.boot_time_ns;
    if (files.empty()) b_.coverage.push_back({node, "", "", 0, 0, "missing", "no logs in the node's folder"});
    for (const auto& [format, path] : files) {
      common::ParseOptions popts;
      popts.boot_time_ns = boot;
      popts.boot_id = info.boot_id;
      popts.default_year = default_year_;
      popts.local_zone = info.zone ? info.zone : job_zone_;
      popts.known_hosts = job_hosts_;
      FileScan scan{engine_, {node, path, common::sourceKindOf(format), {}}, &agg_, nullptr, um()};
      auto cov = scanOne(path, format, popts, scan, options_.read_chunk, info.zone ? info.zone_source : job_zone_note_);
      cov.node = node;
      if (cov.records > 0 && (cov.status == "ok" || cov.status == "partial"))
        b_.covered_by_kind[common::sourceKindOf(format)].insert(node);
      if (!boot && scan.boot_estimate) boot = scan.boot_estimate;
      b_.last_record_ns = std::max(b_.last_record_ns, scan.last_ns);
      b_.coverage.push_back(std::move(cov));
    }
    b_.nodes.emplace(node, std::move(info));
  }

  const fs::path& root_;
  const common::RuleEngine& engine_;
  const BundleOptions& options_;
  Bundle& b_;
  int default_year_ = 1970;
  common::SymptomAggregator agg_;
  std::optional<common::UnmatchedLines> unmatched_;
  std::shared_ptr<const common::TimeZone> job_zone_;
  std::string job_zone_note_ = "no zone in node.json or job.json: UTC assumed";
  const std::shared_ptr<const common::HostSet> job_hosts_;
};

}  // namespace

std::optional<Bundle> loadBundle(const std::string& dir, const common::RuleEngine& engine, std::string* error,
                                 const BundleOptions& options) {
  fs::path root(dir);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    *error = fmt::format("{}: not a directory", dir);
    return std::nullopt;
  }
  Bundle b;
  std::optional<KubeJob> kube;
  if (!describeJob(root, dir, b, &kube, error)) return std::nullopt;
  BundleScan scan(root, engine, options, b);
  scan.scanNodes();
  scan.scanJobLogs();
  if (kube) scan.scanKube(*kube);
  scan.finish();
  return b;
}

}  // namespace faultline::offline

#include "aggregator/cli/remote.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>

#include "aggregator/http/api.h"
#include "aggregator/http/client.h"
#include "aggregator/jobs/job_events.h"
#include "aggregator/offline/bundle.h"
#include "aggregator/query/render.h"
#include "aggregator/store/store.h"
#include "common/diagnosis.h"
#include "common/hostlist.h"
#include "common/job.h"

namespace faultline::cli {

namespace {

using aggregator::HttpResult;
using nlohmann::json;

constexpr int kOk = 0, kNotFound = 1, kUsage = 2, kUnreachable = 3;
constexpr const char* kDefaultServer = "http://127.0.0.1:8470";
constexpr const char* kLocalToken = "local-db-write";

}  // namespace

std::optional<std::string> readSecretFile(const std::string& path, const std::string& what, std::string* error) {
  std::ifstream in(path);
  if (!in) {
    *error = "cannot read " + what + " " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) {
    *error = what + " " + path + " is empty";
    return std::nullopt;
  }
  return line;
}

namespace {

// The bearer token: --token, $FAULTLINE_TOKEN, or the first line of --token-file. nullopt (and
// *error) when a token file was named but cannot be read or is empty: sending no token would
// only come back as the server's "missing bearer token".
std::optional<std::string> readToken(const RemoteOptions& o, std::string* error) {
  if (!o.token.empty()) return o.token;
  if (const char* env = std::getenv("FAULTLINE_TOKEN")) return env;
  if (o.token_file.empty()) return "";
  return readSecretFile(o.token_file, "the token file", error);
}

std::string caFile(const RemoteOptions& o) {
  if (!o.ca_file.empty()) return o.ca_file;
  const char* env = std::getenv("FAULTLINE_CA_FILE");
  return env ? env : "";
}

// One request, either over HTTP or against the SQLite file through the same API routing.
std::optional<HttpResult> call(const RemoteOptions& o, const std::string& method, const std::string& target,
                               const std::string& body, int* rc) {
  std::string error;
  if (!o.db.empty()) {
    aggregator::SystemClock clock;
    aggregator::StoreOptions so;
    so.read_only = method == "GET";
    auto store = aggregator::Store::open(o.db, clock, so, &error);
    if (!store) {
      std::fprintf(stderr, "faultline: %s\n", error.c_str());
      *rc = kUnreachable;
      return std::nullopt;
    }
    aggregator::Metrics metrics;
    // Without a running engine a job end is only recorded; the aggregator's next tick judges it.
    aggregator::Api api(*store, nullptr, metrics, clock, aggregator::ApiOptions{kLocalToken, 90 * aggregator::kSecondNs});
    auto r = api.handle({method, target, std::string("Bearer ") + kLocalToken, body});
    return HttpResult{r.status, r.body};
  }
  std::string server = o.server;
  if (server.empty()) server = std::getenv("FAULTLINE_SERVER") ? std::getenv("FAULTLINE_SERVER") : kDefaultServer;
  // The token goes with reads too: an aggregator beyond loopback may require one for them.
  auto token = readToken(o, &error);
  if (!token) {
    std::fprintf(stderr, "faultline: %s\n", error.c_str());
    *rc = kUsage;
    return std::nullopt;
  }
  auto r = aggregator::httpCall(server, method, target, body, *token,
                                std::chrono::milliseconds(static_cast<int64_t>(o.timeout_sec * 1000)), &error,
                                caFile(o));
  if (!r) {
    std::fprintf(stderr, "faultline: %s\n", error.c_str());
    *rc = kUnreachable;
  }
  return r;
}

// GET -> parsed JSON; prints the API's error and sets *rc on failure.
std::optional<json> getJson(const RemoteOptions& o, const std::string& target, int* rc) {
  auto r = call(o, "GET", target, "", rc);
  if (!r) return std::nullopt;
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    std::string why = j.is_object() && j.contains("error") ? j["error"].get<std::string>() : r->body;
    std::fprintf(stderr, "faultline: %s\n", why.c_str());
    *rc = r->status == 404 ? kNotFound : r->status == 400 ? kUsage : kUnreachable;
    return std::nullopt;
  }
  if (j.is_discarded()) {
    std::fprintf(stderr, "faultline: the aggregator answered something that is not JSON\n");
    *rc = kUnreachable;
    return std::nullopt;
  }
  return j;
}

std::string query(std::vector<std::pair<std::string, std::string>> params) {
  std::string q;
  for (const auto& [k, v] : params)
    if (!v.empty()) q += (q.empty() ? "?" : "&") + k + "=" + aggregator::urlEncode(v);
  return q;
}

int print(const RemoteOptions& o, const json& j, std::string (*render)(const json&)) {
  if (o.json) std::cout << j.dump(2) << "\n";
  else std::cout << render(j);
  return kOk;
}

// Time option: a timestamp or seconds since the epoch, passed on as ISO-8601.
std::optional<std::string> timeArg(const std::string& s) {
  if (s.empty()) return std::string();
  auto t = common::parseTimestampNs(s);
  if (!t) return std::nullopt;
  return common::formatTimeNs(*t);
}

int postEvent(const RemoteOptions& o, const std::string& id, bool end, const json& body, json* answer = nullptr) {
  int rc = kOk;
  auto r = call(o, "POST", "/jobs/" + aggregator::urlEncode(id) + (end ? "/end" : "/start"), body.dump(), &rc);
  if (!r) return rc;
  json j = json::parse(r->body, nullptr, false);
  if (r->status != 200) {
    std::fprintf(stderr, "faultline: job %s: %s\n", id.c_str(),
                 j.is_object() && j.contains("error") ? j["error"].get<std::string>().c_str() : r->body.c_str());
    return r->status == 400 || r->status == 401 || r->status == 403 ? kUsage
           : r->status == 404                                         ? kNotFound
                                                                      : kUnreachable;
  }
  if (o.json) std::cout << j.dump(2) << "\n";
  if (answer) *answer = std::move(j);
  return kOk;
}

int cmdJobEvent(const RemoteOptions& o, bool end) {
  json body = json::object();
  if (!o.nodelist.empty()) body["nodes"] = o.nodelist;
  if (!o.state.empty()) body["state"] = o.state;
  if (!o.exit_code.empty()) body["exit_code"] = o.exit_code;
  auto t = timeArg(o.time), st = timeArg(o.start_time);
  if (!t || !st) {
    std::fprintf(stderr, "faultline: bad --time/--start-time (ISO-8601 or seconds since the epoch)\n");
    return kUsage;
  }
  if (!t->empty()) body["time"] = *t;
  if (!st->empty()) body["start_time"] = *st;
  if (o.ntasks_per_node > 0) body["ntasks_per_node"] = o.ntasks_per_node;
  if (!o.job_name.empty()) body["name"] = o.job_name;
  if (!o.job_user.empty()) body["user"] = o.job_user;
  if (!o.job_partition.empty()) body["partition"] = o.job_partition;
  json answer;
  int rc = postEvent(o, o.job_id, end, body, &answer);
  // Say what was recorded (the Slurm scripts discard it; a person running the command sees it).
  if (rc == kOk && !o.json && answer.is_object()) {
    std::string line = fmt::format("job {}: {} recorded, state {}", o.job_id, end ? "end" : "start",
                                   answer.value("state", std::string("?")));
    if (answer.contains("verdict") && answer["verdict"].is_object())
      line += fmt::format("; verdict revision {} ({}): {}", answer["verdict"].value("revision", 0),
                          answer["verdict"].value("status", std::string()),
                          answer["verdict"].value("sub_domain", std::string()));
    std::printf("%s\n", line.c_str());
  }
  return rc;
}

// Above the aggregator's per-upload bound, cascade goes first: roots and context are what a
// verdict needs. What is left out is said in the coverage, never silently.
void capSymptoms(std::vector<common::Symptom>& symptoms, common::CoverageEntry& coverage) {
  if (symptoms.size() <= aggregator::kMaxJobOutputSymptoms) return;
  std::stable_sort(symptoms.begin(), symptoms.end(), [](const auto& a, const auto& b) {
    return (a.role == common::Role::kCascade) < (b.role == common::Role::kCascade);
  });
  size_t dropped = symptoms.size() - aggregator::kMaxJobOutputSymptoms;
  symptoms.resize(aggregator::kMaxJobOutputSymptoms);
  coverage.status = "partial";
  coverage.reason += fmt::format("{}{} symptoms above the upload bound left out", coverage.reason.empty() ? "" : "; ",
                                 dropped);
}

// What the aggregator fills in itself stays off the wire: the file's path (the body's
// `source`) and every value that is its default ("", false, 0, count 1, empty lists).
json compactSymptom(json j, const std::string& source) {
  if (j.value("source", "") == source) j.erase("source");
  for (auto it = j.begin(); it != j.end();) {
    const json& v = it.value();
    bool dflt = (v.is_string() && v.get_ref<const std::string&>().empty()) || (v.is_boolean() && !v.get<bool>()) ||
                ((v.is_array() || v.is_object()) && v.empty()) ||
                (v.is_number_integer() && v.get<int64_t>() == (it.key() == "count" ? 1 : 0));
    it = dflt ? j.erase(it) : std::next(it);
  }
  return j;
}

int fileYear(const std::string& path) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(path, ec);
  if (ec) return 1970;
  auto sys = std::chrono::file_clock::to_sys(t);
  return common::yearOfNs(std::chrono::duration_cast<std::chrono::nanoseconds>(sys.time_since_epoch()).count());
}

int cmdJobImport(const RemoteOptions& o) {
  std::ifstream in(o.import_file);
  if (!in) {
    std::fprintf(stderr, "faultline: cannot read %s\n", o.import_file.c_str());
    return kUsage;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::vector<std::string> errors;
  auto updates = aggregator::jobUpdatesFromSacct(ss.str(), &errors);
  for (const auto& e : errors) std::fprintf(stderr, "faultline: %s\n", e.c_str());
  size_t ok = 0;
  int rc = errors.empty() ? kOk : kUsage;
  for (const auto& u : updates) {
    bool ended = !aggregator::isActiveJobState(u.state);
    json body{{"state", u.state}, {"exit_code", u.exit_code}};
    if (!u.nodelist.empty()) body["nodes"] = u.nodelist;
    else if (!u.nodes.empty()) body["nodes"] = u.nodes;
    if (ended && u.end_ns) body["time"] = common::formatTimeNs(u.end_ns);
    if (!ended && u.start_ns) body["time"] = common::formatTimeNs(u.start_ns);
    if (ended && u.start_ns) body["start_time"] = common::formatTimeNs(u.start_ns);
    RemoteOptions quiet = o;
    quiet.json = false;
    int r = postEvent(quiet, u.job_id, ended, body);
    if (r == kOk) ++ok;
    else rc = r;
    if (r == kUnreachable) break;
  }
  if (o.json) std::cout << json{{"imported", ok}, {"errors", errors}}.dump(2) << "\n";
  else std::printf("imported %zu job(s) from %s\n", ok, o.import_file.c_str());
  return rc;
}

int cmdJob(const RemoteOptions& o) {
  int rc = kOk;
  auto job = getJson(o, "/jobs/" + aggregator::urlEncode(o.job_id), &rc);
  if (!job) return rc;
  if (o.history) return print(o, *job, aggregator::renderJobHistory);
  if ((*job)["verdict"].is_null()) {
    if (o.json) std::cout << job->dump(2) << "\n";
    else
      std::printf("job %s: %s, %s\n", o.job_id.c_str(), job->value("state", "").c_str(),
                  (*job)["terminal_state"] == "success" ? "completed: nothing to diagnose"
                  : (*job)["terminal_state"].is_null() ? "still running"
                                                       : "no verdict yet");
    return (*job)["terminal_state"] == "success" ? kOk : kNotFound;
  }
  auto diag = getJson(o, "/jobs/" + aggregator::urlEncode(o.job_id) + "/diagnosis", &rc);
  if (!diag) return rc;
  if (o.json) {
    std::cout << diag->dump(2) << "\n";
    return kOk;
  }
  std::string error;
  auto d = common::diagnosisFromJson(*diag, &error);
  if (!d) {
    std::fprintf(stderr, "faultline: unreadable diagnosis: %s\n", error.c_str());
    return kUnreachable;
  }
  std::cout << common::renderReport(*d);
  const auto& v = (*diag)["verdict"];
  std::printf("verdict: revision %d, %s (%s), made %s\n", v.value("revision", 0), v.value("status", "").c_str(),
              v.value("reason", "").c_str(), v.value("created", "").c_str());
  return kOk;
}

// The job's layout, which places ranks on nodes: from the flags, else from the aggregator. kOk, or
// the exit code to end with.
int outputJobLayout(const RemoteOptions& o, common::JobInfo& job) {
  job.job_id = o.job_id;
  if (!o.nodelist.empty()) {
    std::string error;
    auto nodes = common::expandHostlist(o.nodelist, &error);
    if (!nodes) {
      std::fprintf(stderr, "faultline: --nodes: %s\n", error.c_str());
      return kUsage;
    }
    job.nodes = std::move(*nodes);
  } else {
    int rc = kOk;
    auto r = call(o, "GET", "/jobs/" + aggregator::urlEncode(o.job_id), "", &rc);
    if (!r) return rc;
    json j = json::parse(r->body, nullptr, false);
    // 404: the job's end is not recorded yet (the epilogs race). Its ranks stay unplaced here and
    // the verdict places them through the layout the job has by then.
    if (r->status == 200 && j.is_object()) {
      if (j.contains("nodes") && j["nodes"].is_array())
        for (const auto& n : j["nodes"])
          if (n.is_string()) job.nodes.push_back(n.get<std::string>());
      if (j.contains("ntasks_per_node") && j["ntasks_per_node"].is_number_integer())
        job.ntasks_per_node = j["ntasks_per_node"].get<int>();
      if (j.contains("start") && j["start"].is_string())
        job.start_ns = common::parseTimestampNs(j["start"].get<std::string>()).value_or(0);
    }
  }
  if (o.ntasks_per_node > 0) job.ntasks_per_node = o.ntasks_per_node;
  if (auto st = timeArg(o.start_time); st && !st->empty()) job.start_ns = common::parseTimestampNs(*st).value_or(0);
  common::deriveRanks(job);
  return kOk;
}

// One output file scanned (*scan) and made the upload's body: its symptoms (capped) and the error
// lines no rule matched, as templates (issue 30: the aggregator judges them with the agents').
json outputUploadBody(const std::string& file, const std::string& source, const RemoteOptions& o,
                      const common::JobInfo& job, const common::RuleEngine& engine, offline::ScanResult* scan) {
  std::function<std::string(int)> node_of_rank;
  if (!job.ranks.empty()) node_of_rank = [&job](int r) { return job.nodeOfRank(r); };
  common::ParseOptions popts;
  // Lines without a year (syslog style) take the job's start year, as `attribute` does.
  popts.default_year = job.start_ns ? common::yearOfNs(job.start_ns) : fileYear(file);
  // The job's output was written on this cluster: zone-less stamps are in its local time.
  popts.local_zone = offline::systemTimeZone();
  popts.known_hosts = std::make_shared<const common::HostSet>(job.nodes.begin(), job.nodes.end());
  common::UnmatchedLines unmatched;
  *scan = offline::scanJobLog(file, o.output_node, node_of_rank, engine, popts, {}, &unmatched,
                              job.nodes.size() == 1 ? job.nodes.front() : "");
  for (auto& s : scan->symptoms) s.source = source;
  scan->coverage.source = source;
  capSymptoms(scan->symptoms, scan->coverage);
  auto templates = unmatched.templates();
  if (templates.size() > aggregator::kMaxOutputTemplates) templates.resize(aggregator::kMaxOutputTemplates);
  json body{{"source", source},
            {"coverage", common::toJson(scan->coverage)},
            {"symptoms", json::array()},
            {"unmatched", aggregator::outputTemplatesToJson(templates)}};
  for (const auto& s : scan->symptoms) body["symptoms"].push_back(compactSymptom(aggregator::symptomToJson(s), source));
  return body;
}

}  // namespace

int runJobOutput(const RemoteOptions& o, const common::RuleEngine& engine) {
  common::JobInfo job;
  if (int rc = outputJobLayout(o, job); rc != kOk) return rc;
  int rc = kOk;
  json results = json::array();
  for (const auto& file : o.output_files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(file, ec)) {
      std::fprintf(stderr, "faultline: %s: not a readable file\n", file.c_str());
      rc = kUsage;
      continue;
    }
    const std::string source = std::filesystem::absolute(file, ec).lexically_normal().string();
    offline::ScanResult scan;
    const json body = outputUploadBody(file, source, o, job, engine, &scan);
    int call_rc = kOk;
    const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
    auto r = call(o, "POST", "/jobs/" + aggregator::urlEncode(o.job_id) + "/output", payload, &call_rc);
    if (!r) return call_rc;
    json j = json::parse(r->body, nullptr, false);
    if (r->status != 200) {
      std::fprintf(stderr, "faultline: job %s: %s: %s\n", o.job_id.c_str(), file.c_str(),
                   j.is_object() && j.contains("error") ? j["error"].get<std::string>().c_str() : r->body.c_str());
      rc = r->status == 400 || r->status == 401 || r->status == 403 || r->status == 413 ? kUsage : kUnreachable;
      continue;
    }
    j["file"] = file;
    j["records"] = scan.coverage.records;
    j["coverage_status"] = scan.coverage.status;
    j["bytes_read"] = std::filesystem::file_size(file, ec);
    j["bytes_sent"] = payload.size();
    if (!o.json) {
      std::printf("%s: %llu records (%s), %zu symptoms stored for job %s", file.c_str(),
                  static_cast<unsigned long long>(scan.coverage.records), scan.coverage.status.c_str(),
                  scan.symptoms.size(), o.job_id.c_str());
      if (j["verdict"].is_object())
        std::printf("; verdict revision %d: %s (%s)", j["verdict"].value("revision", 0),
                    j["verdict"].value("sub_domain", "").c_str(), j["verdict"].value("reason", "").c_str());
      std::printf("\n");
    }
    results.push_back(std::move(j));
  }
  if (o.json) std::cout << results.dump(2) << "\n";
  return rc;
}

void addRemoteCommands(CLI::App& app, RemoteOptions& o) {
  app.add_option("--server", o.server, "aggregator URL, http:// or https:// (default $FAULTLINE_SERVER or http://127.0.0.1:8470)");
  app.add_option("--db", o.db, "read/write the aggregator's SQLite file directly instead of --server");
  app.add_option("--token-file", o.token_file, "file holding the bearer token for job events (and for reads, when the aggregator requires one)");
  app.add_option("--token", o.token, "bearer token for job events and reads (or $FAULTLINE_TOKEN)");
  app.add_option("--timeout", o.timeout_sec, "seconds to wait for the aggregator");
  app.add_option("--ca-file", o.ca_file,
                 "PEM CA certificate an https:// --server's certificate must chain to (or $FAULTLINE_CA_FILE; "
                 "default: the system's trusted CAs)");

  auto json_flag = [&](CLI::App* c) { c->add_flag("--json", o.json, "print JSON (the HTTP API's documents)"); };
  auto since = [&](CLI::App* c, const char* what) { c->add_option("--since", o.since, what); };

  o.cmds.jobs = app.add_subcommand("jobs", "list jobs known to the aggregator, newest first");
  since(o.cmds.jobs, "ended (or started) after: 7d, 24h, 30m or a timestamp");
  o.cmds.jobs->add_option("--state", o.state, "fail, timeout, node_fail, ..., failed (any failure), running, success");
  o.cmds.jobs->add_option("--sub-domain", o.sub_domain, "verdict sub-domain: hardware, network, ...");
  o.cmds.jobs->add_option("--node", o.node, "jobs that ran on this node");
  o.cmds.jobs->add_option("--limit", o.limit, "at most this many");
  json_flag(o.cmds.jobs);

  o.cmds.job = app.add_subcommand("job", "one job's diagnosis (same report as `attribute`), or job events");
  o.cmds.job->add_option("id", o.job_id, "job id");
  o.cmds.job->add_flag("--history", o.history, "list every revision of the verdict");
  json_flag(o.cmds.job);
  o.cmds.job_start = o.cmds.job->add_subcommand("start", "record that a job started (Slurm prolog)");
  o.cmds.job_end = o.cmds.job->add_subcommand("end", "record that a job ended (Slurm epilog)");
  for (auto* c : {o.cmds.job_start, o.cmds.job_end}) {
    c->add_option("id", o.job_id, "job id")->required();
    c->add_option("--nodes", o.nodelist, "Slurm host list, e.g. gpu-[01-16]");
    c->add_option("--time", o.time, "when (ISO-8601 or epoch seconds; default now)");
    c->add_option("--state", o.state, "Slurm state word (start: RUNNING; end: from --exit-code)");
    json_flag(c);
  }
  for (auto* c : {o.cmds.job_start, o.cmds.job_end}) {
    c->add_option("--ntasks-per-node", o.ntasks_per_node, "tasks per node (block layout: places ranks on nodes)");
    // The workload: a failed job's error lines that its earlier successful runs also printed are
    // not unusual (docs/aggregator.md, "Unrecognized error lines").
    c->add_option("--name", o.job_name, "job name (Slurm's SLURM_JOB_NAME)");
    c->add_option("--user", o.job_user, "job user (SLURM_JOB_USER)");
    c->add_option("--partition", o.job_partition, "job partition (SLURM_JOB_PARTITION)");
  }
  o.cmds.job_end->add_option("--exit-code", o.exit_code, "exit:signal, e.g. 1:0");
  o.cmds.job_end->add_option("--start-time", o.start_time, "when the job started, if not recorded");
  o.cmds.job_import = o.cmds.job->add_subcommand("import", "record every job of a `sacct --json` capture");
  o.cmds.job_import->add_option("file", o.import_file, "sacct --json output")->required();
  json_flag(o.cmds.job_import);
  o.cmds.job_output = o.cmds.job->add_subcommand(
      "output", "extract the symptoms of a job's output file (slurm-%j.out) here and send them (Slurm epilog)");
  o.cmds.job_output->add_option("id", o.job_id, "job id")->required();
  o.cmds.job_output->add_option("file", o.output_files, "job-wide log files: the job's stdout/stderr")->required();
  o.cmds.job_output->add_option("--nodes", o.nodelist, "the job's Slurm host list (default: as the aggregator knows it)");
  o.cmds.job_output->add_option("--ntasks-per-node", o.ntasks_per_node, "tasks per node (default: as the aggregator knows it)");
  o.cmds.job_output->add_option("--start-time", o.start_time, "job start (year for lines that print none)");
  o.cmds.job_output->add_option("--node", o.output_node, "the file is this one node's log, not the job's");
  json_flag(o.cmds.job_output);

  o.cmds.nodes = app.add_subcommand("nodes", "nodes and their agents; --rank: the fleet's suspects");
  o.cmds.nodes->add_flag("--rank", o.rank, "rank nodes/devices repeatedly responsible across jobs");
  since(o.cmds.nodes, "window for --rank (default 7d)");
  o.cmds.nodes->add_option("--min-jobs", o.min_jobs, "with --rank: only suspects blamed in this many jobs");
  json_flag(o.cmds.nodes);

  o.cmds.node = app.add_subcommand("node", "one node: agent, sources, jobs, history, suspicion ranking");
  o.cmds.node->add_option("host", o.host, "hostname")->required();
  since(o.cmds.node, "window (default 7d)");
  json_flag(o.cmds.node);

  o.cmds.symptoms = app.add_subcommand("symptoms", "stored symptoms, newest first");
  o.cmds.symptoms->add_option("--node", o.nodes, "node (repeatable)");
  o.cmds.symptoms->add_option("--rule", o.rule, "rule id, or a prefix ending in *");
  since(o.cmds.symptoms, "7d, 24h, 30m or a timestamp");
  o.cmds.symptoms->add_option("--limit", o.limit, "at most this many (default 1000)");
  json_flag(o.cmds.symptoms);

  o.cmds.agents = app.add_subcommand("agents", "agents: last heartbeat, versions, per-source status");
  json_flag(o.cmds.agents);
  o.cmds.agents->add_flag("--refusals", o.refusals,
                          "only the identities the ingest endpoint refused (unknown key, wrong server key, ...)");
}

int runRemoteCommands(CLI::App&, RemoteOptions& o) {
  int rc = kOk;
  std::string limit = o.limit ? std::to_string(o.limit) : "";
  if (*o.cmds.job_start) return cmdJobEvent(o, false);
  if (*o.cmds.job_end) return cmdJobEvent(o, true);
  if (*o.cmds.job_import) return cmdJobImport(o);
  if (*o.cmds.job) {
    if (o.job_id.empty()) {
      std::fprintf(stderr, "faultline: job: give a job id, or start|end|import|output\n");
      return kUsage;
    }
    return cmdJob(o);
  }
  if (*o.cmds.jobs) {
    auto j = getJson(o, "/jobs" + query({{"since", o.since}, {"state", o.state}, {"sub_domain", o.sub_domain},
                                          {"node", o.node}, {"limit", limit}}),
                     &rc);
    return j ? print(o, *j, aggregator::renderJobs) : rc;
  }
  if (*o.cmds.nodes) {
    if (o.rank) {
      auto j = getJson(o, "/nodes" + query({{"rank", "1"}, {"since", o.since.empty() ? "7d" : o.since},
                                            {"min_jobs", std::to_string(o.min_jobs)}}),
                       &rc);
      return j ? print(o, *j, aggregator::renderFleet) : rc;
    }
    auto j = getJson(o, "/nodes", &rc);
    return j ? print(o, *j, aggregator::renderNodes) : rc;
  }
  if (*o.cmds.node) {
    auto j = getJson(o, "/nodes/" + aggregator::urlEncode(o.host) + query({{"since", o.since}}), &rc);
    return j ? print(o, *j, aggregator::renderNode) : rc;
  }
  if (*o.cmds.symptoms) {
    std::string q = query({{"rule", o.rule}, {"since", o.since}, {"limit", limit}});
    for (const auto& n : o.nodes) q += (q.empty() ? "?" : "&") + std::string("node=") + aggregator::urlEncode(n);
    auto j = getJson(o, "/symptoms" + q, &rc);
    return j ? print(o, *j, aggregator::renderSymptoms) : rc;
  }
  if (*o.cmds.agents) {
    if (o.refusals) {
      auto r = getJson(o, "/agents/refusals", &rc);
      return r ? print(o, *r, aggregator::renderRefusals) : rc;
    }
    auto j = getJson(o, "/agents", &rc);
    if (!j) return rc;
    if (o.json) return print(o, *j, aggregator::renderAgents);
    std::cout << aggregator::renderAgents(*j);
    // Why an agent may be missing from the table (an aggregator without ingest answers 404).
    int refusals_rc = kOk;
    if (auto r = call(o, "GET", "/agents/refusals", "", &refusals_rc); r && r->status == 200) {
      json refusals = json::parse(r->body, nullptr, false);
      if (refusals.is_object() && !refusals.value("refusals", json::array()).empty())
        std::cout << "\n" << aggregator::renderRefusals(refusals);
    }
    return kOk;
  }
  return -1;
}

}  // namespace faultline::cli

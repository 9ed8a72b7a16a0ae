// Kubernetes objects -> the job, its pods and records (docs/bundle-format.md, "Kubernetes jobs").
//
// Which object describes the job: a JobSet, else a PyTorchJob, else a batch Job (the Kueue
// Workload then only refines the state), else a Workload alone, else the pods. Its state is read
// from its conditions and refined by the Workload's eviction and the pods' disruptions and
// container terminations into the Slurm-like words the correlator knows (mapStateWords below).
#include "aggregator/offline/kube_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace faultline::offline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr std::string_view kCompletionIndex = "batch.kubernetes.io/job-completion-index";

std::string str(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* key : path) {
    if (!cur->is_object()) return "";
    auto it = cur->find(key);
    if (it == cur->end()) return "";
    cur = &*it;
  }
  if (cur->is_string()) return cur->get<std::string>();
  if (cur->is_number_integer()) return std::to_string(cur->get<int64_t>());
  return "";
}

// A label or annotation of the object (labels first).
std::string meta(const json& obj, std::string_view key) {
  for (const char* where : {"labels", "annotations"}) {
    std::string v = str(obj, {"metadata", where, std::string(key).c_str()});
    if (!v.empty()) return v;
  }
  return "";
}

int toInt(const std::string& s, int fallback = -1) {
  if (s.empty() || s.size() > 9) return fallback;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return fallback;
  return std::stoi(s);
}

int64_t timeOf(const std::string& s) {
  if (s.empty()) return 0;
  auto t = common::parseTimestampNs(s);
  return t ? *t : 0;
}

// The condition of `type` whose status is "True", or nullptr.
const json* trueCondition(const json& obj, std::string_view type) {
  auto st = obj.find("status");
  if (st == obj.end() || !st->is_object()) return nullptr;
  auto conds = st->find("conditions");
  if (conds == st->end() || !conds->is_array()) return nullptr;
  for (const auto& c : *conds)
    if (c.is_object() && str(c, {"type"}) == type && str(c, {"status"}) == "True") return &c;
  return nullptr;
}

std::string nsName(const json& obj) {
  std::string ns = str(obj, {"metadata", "namespace"});
  return (ns.empty() ? "default" : ns) + "/" + str(obj, {"metadata", "name"});
}

std::string kindOf(const json& item, const std::string& list_kind) {
  std::string k = str(item, {"kind"});
  if (!k.empty()) return k;
  if (list_kind.size() > 4 && list_kind.compare(list_kind.size() - 4, 4, "List") == 0 &&
      list_kind != "List")
    return list_kind.substr(0, list_kind.size() - 4);
  if (item.contains("involvedObject")) return "Event";
  return "";
}

struct Objects {
  std::vector<json> jobsets, pytorchjobs, workloads, jobs, pods, events;
  std::vector<std::string> event_files;
};

// The terminal word of the describing object's own conditions; "" when it has none yet.
std::string stateOfObject(const std::string& kind, const json& obj, int64_t* end_ns) {
  auto at = [&](const json* c, const char* word) {
    if (end_ns && !*end_ns) *end_ns = timeOf(str(*c, {"lastTransitionTime"}));
    return std::string(word);
  };
  if (kind == "JobSet") {
    if (const json* c = trueCondition(obj, "Completed")) return at(c, "COMPLETED");
    if (const json* c = trueCondition(obj, "Failed")) return at(c, "FAILED");
    std::string terminal = str(obj, {"status", "terminalState"});
    if (terminal == "Completed") return "COMPLETED";
    if (terminal == "Failed") return "FAILED";
  } else if (kind == "PyTorchJob") {
    if (const json* c = trueCondition(obj, "Succeeded")) return at(c, "COMPLETED");
    if (const json* c = trueCondition(obj, "Failed")) return at(c, "FAILED");
  } else if (kind == "Job") {
    if (const json* c = trueCondition(obj, "Complete")) return at(c, "COMPLETED");
    if (const json* c = trueCondition(obj, "Failed"))
      return at(c, str(*c, {"reason"}) == "DeadlineExceeded" ? "TIMEOUT" : "FAILED");
  } else if (kind == "Workload") {
    if (const json* c = trueCondition(obj, "Finished"))
      return at(c, str(*c, {"reason"}) == "Succeeded" ? "COMPLETED" : "FAILED");
  }
  return "";
}

// Kueue's eviction of the Workload: preempted by a higher-priority workload, deactivated, or
// timed out waiting for its pods.
std::string workloadEviction(const json& wl) {
  if (trueCondition(wl, "Preempted")) return "PREEMPTED";
  if (const json* c = trueCondition(wl, "Evicted")) {
    std::string r = str(*c, {"reason"});
    if (r == "Preempted") return "PREEMPTED";
    if (r == "InactiveWorkload") return "CANCELLED";
    return "FAILED";
  }
  return "";
}

struct Terminated {
  std::string container, reason, message;
  int exit_code = 0;
  int signal = 0;
  int64_t finished_ns = 0;
};

std::vector<Terminated> terminations(const json& pod) {
  std::vector<Terminated> out;
  for (const char* list : {"initContainerStatuses", "containerStatuses"}) {
    auto st = pod.find("status");
    if (st == pod.end() || !st->is_object() || !st->contains(list) || !(*st)[list].is_array())
      continue;
    for (const auto& cs : (*st)[list]) {
      if (!cs.is_object()) continue;
      for (const char* which : {"lastState", "state"}) {
        auto w = cs.find(which);
        if (w == cs.end() || !w->is_object() || !w->contains("terminated")) continue;
        const json& t = (*w)["terminated"];
        if (!t.is_object()) continue;
        Terminated term;
        term.container = str(cs, {"name"});
        term.reason = str(t, {"reason"});
        term.message = str(t, {"message"});
        term.exit_code = t.value("exitCode", 0);
        term.signal = t.value("signal", 0);
        term.finished_ns = timeOf(str(t, {"finishedAt"}));
        out.push_back(std::move(term));
      }
    }
  }
  return out;
}

// Pods per Job of each replicated job (spec.replicatedJobs[].template.spec completions or
// parallelism), in order, with the replicas: the offset of a replicated job's first pod.
struct ReplicatedJob {
  std::string name;
  int replicas = 1;
  int pods_per_job = 0;
};

std::vector<ReplicatedJob> replicatedJobs(const json& js) {
  std::vector<ReplicatedJob> out;
  auto spec = js.find("spec");
  if (spec == js.end() || !spec->is_object() || !spec->contains("replicatedJobs")) return out;
  for (const auto& rj : (*spec)["replicatedJobs"]) {
    if (!rj.is_object()) continue;
    ReplicatedJob r;
    r.name = str(rj, {"name"});
    r.replicas = rj.value("replicas", 1);
    r.pods_per_job = toInt(str(rj, {"template", "spec", "completions"}), 0);
    if (!r.pods_per_job) r.pods_per_job = toInt(str(rj, {"template", "spec", "parallelism"}), 1);
    out.push_back(r);
  }
  return out;
}

int podIndex(const std::string& kind, const json& top, const json& pod,
             const std::vector<ReplicatedJob>& rjs) {
  const int completion = toInt(meta(pod, kCompletionIndex));
  if (kind == "JobSet") {
    const std::string rj_name = meta(pod, "jobset.sigs.k8s.io/replicatedjob-name");
    const int job_index = toInt(meta(pod, "jobset.sigs.k8s.io/job-index"));
    int offset = 0;
    for (const auto& rj : rjs) {
      if (rj.name == rj_name && job_index >= 0 && completion >= 0)
        return offset + job_index * rj.pods_per_job + completion;
      offset += rj.replicas * rj.pods_per_job;
    }
    // No spec to count with: the global job index alone orders one-pod Jobs.
    const int global = toInt(meta(pod, "jobset.sigs.k8s.io/job-global-index"));
    return completion <= 0 ? global : -1;
  }
  if (kind == "PyTorchJob") {
    std::string type = meta(pod, "training.kubeflow.org/replica-type");
    std::transform(type.begin(), type.end(), type.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    const int idx = toInt(meta(pod, "training.kubeflow.org/replica-index"));
    const bool has_master = top.contains("spec") && top["spec"].is_object() &&
                            top["spec"].contains("pytorchReplicaSpecs") &&
                            top["spec"]["pytorchReplicaSpecs"].contains("Master");
    if (type == "master") return idx < 0 ? 0 : idx;
    if (type == "worker" && idx >= 0) return idx + (has_master ? 1 : 0);
    return -1;
  }
  return completion;
}

// Whether the pod belongs to the describing object: excluded only when it carries that kind's
// owner label naming another object (a namespace-wide `kubectl get pods` has other jobs' pods).
bool podOfJob(const std::string& kind, const json& top, const std::set<std::string>& job_names,
              const json& pod) {
  const std::string name = str(top, {"metadata", "name"});
  auto other = [&](std::string_view label, const std::string& want) {
    const std::string v = meta(pod, label);
    return !v.empty() && v != want;
  };
  if (kind == "JobSet") return !other("jobset.sigs.k8s.io/jobset-name", name);
  if (kind == "PyTorchJob") return !other("training.kubeflow.org/job-name", name);
  if (kind == "Job" && !job_names.empty()) {
    std::string v = meta(pod, "batch.kubernetes.io/job-name");
    if (v.empty()) v = meta(pod, "job-name");
    return v.empty() || job_names.count(v);
  }
  return true;
}

// A resource quantity ("6815744Ki", "16Gi", "1.5G", "500m") in base units; nullopt if not one.
std::optional<double> quantity(std::string_view q) {
  size_t i = 0;
  while (i < q.size() && (std::isdigit(static_cast<unsigned char>(q[i])) || q[i] == '.')) ++i;
  if (i == 0) return std::nullopt;
  double v = std::strtod(std::string(q.substr(0, i)).c_str(), nullptr);
  static const std::map<std::string_view, double> kSuffix = {{"", 1},
                                                             {"m", 1e-3},
                                                             {"k", 1e3},
                                                             {"M", 1e6},
                                                             {"G", 1e9},
                                                             {"T", 1e12},
                                                             {"Ki", 1024.0},
                                                             {"Mi", 1048576.0},
                                                             {"Gi", 1073741824.0},
                                                             {"Ti", 1099511627776.0}};
  auto it = kSuffix.find(q.substr(i));
  if (it == kSuffix.end()) return std::nullopt;
  return v * it->second;
}

// The kubelet's eviction message names the evicted pod's container that used the most of the
// resource, with its usage and request ("Container %s was using %s, request is %s, ..."). A
// container within its request did not cause the node's pressure: others on the node did, and the
// node's operators must act (docs/bundle-format.md); the note lets a rule say so.
std::string evictionNote(std::string_view msg) {
  const size_t using_at = msg.find(" was using ");
  const size_t request_at = msg.find(", request is ", using_at);
  if (using_at == std::string_view::npos || request_at == std::string_view::npos) return "";
  const std::string_view usage = msg.substr(using_at + 11, request_at - using_at - 11);
  std::string_view request = msg.substr(request_at + 13);
  request = request.substr(0, request.find(','));
  auto u = quantity(usage);
  auto r = quantity(request);
  if (!u || !r || *r <= 0) return "";
  return *u <= *r ? " [faultline: usage within its request]"
                  : " [faultline: usage above its request]";
}

common::LogRecord makeRecord(int64_t t, const std::string& host, const std::string& ident,
                             int priority, std::string text, uint64_t line) {
  common::LogRecord r;
  r.time_ns = t;
  r.time_known = t != 0;
  r.host = host;
  r.ident = ident;
  r.priority = priority;
  r.text = std::move(text);
  r.line = line;
  return r;
}

}  // namespace

const KubePod* KubeJob::pod(std::string_view n) const {
  for (const auto& p : pods)
    if (p.name == n) return &p;
  return nullptr;
}

namespace {

// The files' objects sorted by kind; one coverage entry per file.
void readObjectFiles(const std::vector<std::pair<std::string, std::string>>& files, KubeJob& kj, Objects& objs) {
  for (const auto& [path, text] : files) {
    common::CoverageEntry cov{"", path, "kubectl json", 0, 0, "ok", ""};
    json doc;
    try {
      doc = json::parse(text);
    } catch (const json::parse_error& e) {
      cov.status = "error";
      cov.reason = fmt::format("not JSON (kubectl get -o json output expected): {}", e.what());
      kj.coverage.push_back(std::move(cov));
      continue;
    }
    if (!doc.is_object()) {
      cov.status = "error";
      cov.reason = "not a Kubernetes object or List";
      kj.coverage.push_back(std::move(cov));
      continue;
    }
    const std::string list_kind = str(doc, {"kind"});
    std::vector<const json*> items;
    if (doc.contains("items") && doc["items"].is_array())
      for (const auto& it : doc["items"]) items.push_back(&it);
    else
      items.push_back(&doc);
    std::map<std::string, int> ignored;
    for (const json* it : items) {
      if (!it->is_object() || str(*it, {"metadata", "name"}).empty()) {
        ++ignored["items without metadata.name"];
        continue;
      }
      const std::string kind = kindOf(*it, list_kind);
      std::vector<json>* bucket = kind == "JobSet"       ? &objs.jobsets
                                  : kind == "PyTorchJob" ? &objs.pytorchjobs
                                  : kind == "Workload"   ? &objs.workloads
                                  : kind == "Job"        ? &objs.jobs
                                  : kind == "Pod"        ? &objs.pods
                                  : kind == "Event"      ? &objs.events
                                                         : nullptr;
      if (!bucket) {
        ++ignored[kind.empty() ? "objects of no kind" : kind + " objects"];
        continue;
      }
      bucket->push_back(*it);
      if (kind == "Event") objs.event_files.push_back(path);
      ++cov.records;
    }
    std::string why;
    for (const auto& [what, n] : ignored) {
      cov.skipped += n;
      why += fmt::format("{}{} {} ignored", why.empty() ? "" : ", ", n, what);
    }
    if (!why.empty()) {
      cov.reason = why;
      if (cov.records == 0) cov.status = "error";
    }
    kj.coverage.push_back(std::move(cov));
  }
}

// The object that describes the job: a JobSet, else a PyTorchJob, a Job, a Workload, a Pod.
const json* describingObject(const Objects& objs, KubeJob& kj) {
  const json* top = nullptr;
  if (!objs.jobsets.empty())
    kj.kind = "JobSet", top = &objs.jobsets.front();
  else if (!objs.pytorchjobs.empty())
    kj.kind = "PyTorchJob", top = &objs.pytorchjobs.front();
  else if (!objs.jobs.empty())
    kj.kind = "Job", top = &objs.jobs.front();
  else if (!objs.workloads.empty())
    kj.kind = "Workload", top = &objs.workloads.front();
  else if (!objs.pods.empty())
    kj.kind = "Pod", top = &objs.pods.front();
  return top;
}

// The job's pods (membership, index, node); the job's nodes and ranks in index order.
std::vector<const json*> readPods(const Objects& objs, const json& top_ref, KubeJob& kj) {
  const json* top = &top_ref;
  common::JobInfo& job = kj.job;
  std::set<std::string> job_names;
  for (const auto& j : objs.jobs) job_names.insert(str(j, {"metadata", "name"}));
  const auto rjs = kj.kind == "JobSet" ? replicatedJobs(*top) : std::vector<ReplicatedJob>{};
  std::vector<const json*> pods;
  for (const auto& p : objs.pods) {
    if (!podOfJob(kj.kind, *top, job_names, p)) continue;
    pods.push_back(&p);
    KubePod kp;
    kp.ns = str(p, {"metadata", "namespace"});
    kp.name = str(p, {"metadata", "name"});
    kp.uid = str(p, {"metadata", "uid"});
    kp.node = str(p, {"spec", "nodeName"});
    kp.index = podIndex(kj.kind, *top, p, rjs);
    kj.pods.push_back(std::move(kp));
  }
  std::vector<const KubePod*> ordered;
  for (const auto& p : kj.pods) ordered.push_back(&p);
  std::stable_sort(ordered.begin(), ordered.end(), [](const KubePod* a, const KubePod* b) {
    return (a->index < 0 ? INT32_MAX : a->index) < (b->index < 0 ? INT32_MAX : b->index);
  });
  for (const KubePod* p : ordered) {
    if (p->node.empty()) continue;
    if (std::find(job.nodes.begin(), job.nodes.end(), p->node) == job.nodes.end())
      job.nodes.push_back(p->node);
    if (p->index >= 0) job.ranks.push_back({p->node, p->index, p->index});
  }
  return pods;
}

// The job's state and exit code from the object's conditions, the Workload's eviction and the
// pods' phases and terminations; *end_ns the latest termination (or the object's end).
void readState(const Objects& objs, const json& top_ref, const std::vector<const json*>& pods, KubeJob& kj,
               int64_t* end_ns_out) {
  const json* top = &top_ref;
  common::JobInfo& job = kj.job;
  int64_t& end_ns = *end_ns_out;
  std::string state = stateOfObject(kj.kind, *top, &end_ns);
  for (const auto& j : objs.jobs)  // a JobSet's child Job may say more (DeadlineExceeded)
    if (kj.kind == "JobSet" && state == "FAILED" && stateOfObject("Job", j, nullptr) == "TIMEOUT")
      state = "TIMEOUT";
  for (const auto& wl : objs.workloads) {
    if (state.empty()) state = stateOfObject("Workload", wl, &end_ns);
    const std::string ev = workloadEviction(wl);
    if (!ev.empty() && state != "COMPLETED") state = ev;
  }
  bool any_failed = false, all_succeeded = !pods.empty();
  std::string disruption, exit_code;
  bool oom = false;
  for (const json* p : pods) {
    const std::string phase = str(*p, {"status", "phase"});
    any_failed = any_failed || phase == "Failed";
    all_succeeded = all_succeeded && phase == "Succeeded";
    if (const json* c = trueCondition(*p, "DisruptionTarget")) {
      const std::string r = str(*c, {"reason"});
      if (r == "PreemptionByScheduler" || r == "PreemptionByKubeScheduler")
        disruption = "PREEMPTED";
      else if ((r == "DeletionByTaintManager" || r == "DeletionByPodGC") && disruption.empty())
        disruption = "NODE_FAIL";
    }
    for (const auto& t : terminations(*p)) {
      oom = oom || t.reason == "OOMKilled";
      if (exit_code.empty() && t.exit_code != 0)
        exit_code = fmt::format("{}:{}", t.exit_code, t.signal);
      end_ns = std::max(end_ns, t.finished_ns);
    }
  }
  if (state.empty()) state = any_failed ? "FAILED" : all_succeeded ? "COMPLETED" : "RUNNING";
  if (state == "FAILED" && !disruption.empty()) state = disruption;
  if (state == "FAILED" && oom) state = "OUT_OF_MEMORY";
  job.state = state;
  job.exit_code = exit_code.empty() ? (state == "COMPLETED" ? "0:0" : "") : exit_code;
}

void readTimes(const json& top_ref, const std::vector<const json*>& pods, int64_t end_ns, common::JobInfo& job) {
  const json* top = &top_ref;
  job.start_ns = timeOf(str(*top, {"status", "startTime"}));
  if (!job.start_ns)
    for (const json* p : pods) {
      const int64_t t = timeOf(str(*p, {"status", "startTime"}));
      if (t && (!job.start_ns || t < job.start_ns)) job.start_ns = t;
    }
  if (!job.start_ns) job.start_ns = timeOf(str(*top, {"metadata", "creationTimestamp"}));
  const int64_t completion = timeOf(str(*top, {"status", "completionTime"}));
  job.end_ns = completion ? completion : end_ns;
  const int deadline = toInt(str(*top, {"spec", "activeDeadlineSeconds"}), 0);
  if (deadline > 0) job.time_limit_sec = deadline;
}

// Records: the pods' own terminal statuses.
void podStatusRecords(const std::vector<const json*>& pods, KubeJob& kj) {
  uint64_t line = 0;
  const std::string pods_source = "kube: pod status";
  for (const json* p : pods) {
    const std::string name = str(*p, {"metadata", "name"});
    const std::string node = str(*p, {"spec", "nodeName"});
    const std::string reason = str(*p, {"status", "reason"});
    if (!reason.empty()) {
      int64_t t = 0;
      for (const char* type : {"DisruptionTarget", "Ready"})
        if (!t) {
          auto st = p->find("status");
          if (st != p->end() && st->contains("conditions") && (*st)["conditions"].is_array())
            for (const auto& c : (*st)["conditions"])
              if (str(c, {"type"}) == type) t = timeOf(str(c, {"lastTransitionTime"}));
        }
      if (!t) t = timeOf(str(*p, {"status", "startTime"}));
      const std::string message = str(*p, {"status", "message"});
      kj.records.push_back(
          {node, pods_source,
           makeRecord(t, node, "kubelet", 4,
                      fmt::format("pod/{} status: reason: {}, message: {}{}", name, reason, message,
                                  reason == "Evicted" ? evictionNote(message) : ""),
                      ++line)});
    }
    for (const auto& t : terminations(*p)) {
      if (t.reason == "Completed" && t.exit_code == 0) continue;
      std::string text = fmt::format("pod/{} container {} terminated: reason: {}, exit code: {}",
                                     name, t.container, t.reason, t.exit_code);
      if (t.signal) text += fmt::format(", signal: {}", t.signal);
      if (!t.message.empty()) text += ", message: " + t.message;
      kj.records.push_back(
          {node, pods_source,
           makeRecord(t.finished_ns, node, "kubelet", 3, std::move(text), ++line)});
    }
  }
}

// Records: events about the job's objects, pods and nodes; events about other objects are not the
// job's and are counted as skipped where they were read.
void eventRecords(const Objects& objs, KubeJob& kj) {
  const common::JobInfo& job = kj.job;
  std::set<std::string> names;
  for (const auto* list : {&objs.jobsets, &objs.pytorchjobs, &objs.workloads, &objs.jobs})
    for (const auto& o : *list) names.insert(str(o, {"metadata", "name"}));
  std::map<std::string, uint64_t> other_events;
  for (size_t i = 0; i < objs.events.size(); ++i) {
    const json& ev = objs.events[i];
    const std::string kind = str(ev, {"involvedObject", "kind"});
    const std::string obj = str(ev, {"involvedObject", "name"});
    std::string node = str(ev, {"source", "host"});
    bool ours = false;
    if (kind == "Pod") {
      const KubePod* kp = kj.pod(obj);
      ours = kp != nullptr || objs.pods.empty();
      if (kp && !kp->node.empty()) node = kp->node;
    } else if (kind == "Node") {
      ours = std::find(job.nodes.begin(), job.nodes.end(), obj) != job.nodes.end();
      node = obj;
    } else {
      ours = names.count(obj) > 0;
    }
    if (!ours) {
      ++other_events[objs.event_files[i]];
      continue;
    }
    std::string component = str(ev, {"source", "component"});
    if (component.empty()) component = str(ev, {"reportingComponent"});
    int64_t t = timeOf(str(ev, {"firstTimestamp"}));
    if (!t) t = timeOf(str(ev, {"eventTime"}));
    if (!t) t = timeOf(str(ev, {"lastTimestamp"}));
    const std::string type = str(ev, {"type"});
    const std::string reason = str(ev, {"reason"});
    const std::string message = str(ev, {"message"});
    kj.records.push_back(
        {node, objs.event_files[i],
         makeRecord(t, node, component, type == "Warning" ? 4 : 6,
                    fmt::format("{} {} {}/{} ({}): {}{}", type, reason, kind, obj, component,
                                message, reason == "Evicted" ? evictionNote(message) : ""),
                    i + 1)});
  }
  for (auto& cov : kj.coverage) {
    auto it = other_events.find(cov.source);
    if (it == other_events.end()) continue;
    cov.records -= it->second;
    cov.skipped += it->second;
    cov.reason +=
        fmt::format("{}{} events about other objects", cov.reason.empty() ? "" : ", ", it->second);
  }
}

}  // namespace

std::optional<KubeJob> parseKubeObjects(
    const std::vector<std::pair<std::string, std::string>>& files, std::string* error) {
  KubeJob kj;
  Objects objs;
  readObjectFiles(files, kj, objs);
  const json* top = describingObject(objs, kj);
  if (!top) {
    *error = "kube/: no JobSet, PyTorchJob, Job, Workload or Pod object (kubectl get ... -o json)";
    return std::nullopt;
  }
  kj.name = nsName(*top);
  common::JobInfo& job = kj.job;
  job.job_id = str(*top, {"metadata", "uid"});
  if (job.job_id.empty()) {
    job.job_id = kj.name;
    std::replace(job.job_id.begin(), job.job_id.end(), '/', '_');
  }
  const auto pods = readPods(objs, *top, kj);
  int64_t end_ns = 0;
  readState(objs, *top, pods, kj, &end_ns);
  readTimes(*top, pods, end_ns, job);
  podStatusRecords(pods, kj);
  eventRecords(objs, kj);
  return kj;
}

std::optional<KubeJob> loadKubeDir(const std::string& dir, std::string* error) {
  std::vector<std::string> paths;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    if (it->is_regular_file() && it->path().extension() == ".json")
      paths.push_back(it->path().string());
  std::sort(paths.begin(), paths.end());
  std::vector<std::pair<std::string, std::string>> files;
  for (const auto& p : paths) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    files.emplace_back(p, ss.str());
  }
  return parseKubeObjects(files, error);
}

std::string podOfLogFile(const KubeJob& kube, const std::string& rel_path, std::string_view head) {
  // kubectl logs --prefix: "[pod/NAME/CONTAINER] ..."
  if (head.rfind("[pod/", 0) == 0) {
    const size_t slash = head.find('/', 5);
    const size_t close = head.find(']');
    if (slash != std::string_view::npos && close != std::string_view::npos && slash < close)
      return std::string(head.substr(5, slash - 5));
  }
  const fs::path rel(rel_path);
  auto it = rel.begin();
  if (it != rel.end() && std::next(it) != rel.end()) return it->string();  // pods/NAME/...
  const std::string file = rel.filename().string();
  for (size_t cut = file.find_first_of("_."); cut != std::string::npos;
       cut = file.find_first_of("_.", cut + 1))
    if (kube.pod(std::string_view(file).substr(0, cut))) return file.substr(0, cut);
  return "";
}

}  // namespace faultline::offline

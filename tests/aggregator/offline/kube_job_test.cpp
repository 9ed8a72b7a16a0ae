// Kubernetes objects as a job description: the describing object, the state mapping, nodes and
// ranks from pods, records from statuses and events, the pod of a log file, and bad input.
#include "aggregator/offline/kube_job.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aggregator/offline/attribute.h"
#include "aggregator/offline/bundle.h"
#include "common/rule_set.h"

using namespace faultline;
using nlohmann::json;
using offline::KubeJob;
using offline::parseKubeObjects;

namespace {

json kubeCond(const std::string& type, const std::string& reason = "",
              const std::string& t = "2024-06-01T11:00:00Z") {
  return {{"type", type},
          {"status", "True"},
          {"reason", reason},
          {"message", ""},
          {"lastTransitionTime", t}};
}

json kubePod(const std::string& name, const std::string& node, json labels,
             const std::string& phase = "Failed") {
  return {{"kind", "Pod"},
          {"metadata",
           {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name}, {"labels", labels}}},
          {"spec", {{"nodeName", node}}},
          {"status", {{"phase", phase}, {"startTime", "2024-06-01T10:00:05Z"}}}};
}

json kubeList(std::vector<json> items) {
  return {{"kind", "List"}, {"apiVersion", "v1"}, {"items", items}};
}

std::optional<KubeJob> kubeParse(std::vector<std::pair<std::string, json>> docs,
                                 std::string* error) {
  std::vector<std::pair<std::string, std::string>> files;
  for (auto& [path, j] : docs) files.emplace_back(path, j.dump());
  return parseKubeObjects(files, error);
}

json jobsetLabels(int job_index, int completion) {
  return {{"jobset.sigs.k8s.io/jobset-name", "train"},
          {"jobset.sigs.k8s.io/replicatedjob-name", "workers"},
          {"jobset.sigs.k8s.io/job-index", std::to_string(job_index)},
          {"batch.kubernetes.io/job-completion-index", std::to_string(completion)}};
}

json trainJobSet(std::vector<json> conditions) {
  return {{"kind", "JobSet"},
          {"metadata",
           {{"name", "train"},
            {"namespace", "ml"},
            {"uid", "0b6f4c1e-6a2d-4f7e-9f0a-3c5d8e1b2a47"},
            {"creationTimestamp", "2024-06-01T10:00:00Z"}}},
          {"spec",
           {{"replicatedJobs",
             json::array({{{"name", "workers"},
                           {"replicas", 2},
                           {"template", {{"spec", {{"parallelism", 2}, {"completions", 2}}}}}}})}}},
          {"status", {{"conditions", conditions}}}};
}

}  // namespace

TEST_CASE("kube: a JobSet's id, state, nodes and ranks", "[kube]") {
  std::string error;
  auto kj = kubeParse({{"kube/jobset.json",
                        trainJobSet({kubeCond("Failed", "FailedJobs", "2024-06-01T11:00:00Z")})},
                       {"kube/pods.json",
                        kubeList({kubePod("train-workers-1-1-aaaaa", "gpu-b04", jobsetLabels(1, 1)),
                                  kubePod("train-workers-0-0-bbbbb", "gpu-b01", jobsetLabels(0, 0)),
                                  kubePod("train-workers-0-1-ccccc", "gpu-b02", jobsetLabels(0, 1)),
                                  kubePod("train-workers-1-0-ddddd", "gpu-b03", jobsetLabels(1, 0)),
                                  // another JobSet's pod in the same namespace listing
                                  kubePod("other-workers-0-0-eeeee", "gpu-b09",
                                          {{"jobset.sigs.k8s.io/jobset-name", "other"}})})}},
                      &error);
  REQUIRE(kj);
  CHECK(kj->kind == "JobSet");
  CHECK(kj->name == "ml/train");
  CHECK(kj->job.job_id == "0b6f4c1e-6a2d-4f7e-9f0a-3c5d8e1b2a47");
  CHECK(kj->job.state == "FAILED");
  CHECK(common::terminalStateOf(kj->job.state) == "fail");
  CHECK(kj->job.nodes == std::vector<std::string>{"gpu-b01", "gpu-b02", "gpu-b03", "gpu-b04"});
  CHECK(kj->job.nodeOfRank(0) == "gpu-b01");
  CHECK(kj->job.nodeOfRank(3) == "gpu-b04");  // job 1 x 2 pods per Job + completion 1
  CHECK(kj->job.start_ns == *common::parseTimestampNs("2024-06-01T10:00:05Z"));
  CHECK(kj->job.end_ns == *common::parseTimestampNs("2024-06-01T11:00:00Z"));
  CHECK(kj->pod("other-workers-0-0-eeeee") == nullptr);
  REQUIRE(kj->coverage.size() == 2);
  CHECK(kj->coverage[1].records == 5);
}

TEST_CASE("kube: conditions, the Workload and the pods map to Slurm-like states", "[kube]") {
  std::string error;
  auto stateOf = [&](std::vector<std::pair<std::string, json>> docs) {
    auto kj = kubeParse(std::move(docs), &error);
    REQUIRE(kj);
    return kj->job.state;
  };
  const json pod = kubeList({kubePod("train-workers-0-0-a", "gpu-b01", jobsetLabels(0, 0))});
  CHECK(stateOf({{"a", trainJobSet({kubeCond("Completed")})}, {"b", pod}}) == "COMPLETED");
  // Kueue evicted the Workload to admit a higher-priority one.
  json wl = {{"kind", "Workload"},
             {"metadata", {{"name", "jobset-train-1"}, {"namespace", "ml"}}},
             {"status", {{"conditions", {kubeCond("Evicted", "Preempted")}}}}};
  CHECK(stateOf({{"a", trainJobSet({kubeCond("Failed")})}, {"b", pod}, {"c", wl}}) == "PREEMPTED");
  // A Job past its activeDeadlineSeconds.
  json job = {{"kind", "Job"},
              {"metadata", {{"name", "t"}, {"namespace", "ml"}, {"uid", "u1"}}},
              {"spec", {{"activeDeadlineSeconds", 3600}}},
              {"status",
               {{"startTime", "2024-06-01T10:00:00Z"},
                {"conditions", {kubeCond("Failed", "DeadlineExceeded")}}}}};
  auto kj = kubeParse({{"a", job}}, &error);
  REQUIRE(kj);
  CHECK(kj->job.state == "TIMEOUT");
  CHECK(kj->job.time_limit_sec == 3600);
  // An OOMKilled container: OUT_OF_MEMORY, its exit code, a record for the rules.
  json oom = kubePod("t-0-x", "gpu-c01", {{"job-name", "t"}});
  json terminated = {
      {"exitCode", 137}, {"reason", "OOMKilled"}, {"finishedAt", "2024-06-01T10:30:00Z"}};
  json status = {{"name", "trainer"}, {"state", {{"terminated", terminated}}}};
  oom["status"]["containerStatuses"] = json::array({status});
  job["status"]["conditions"] = {kubeCond("Failed", "BackoffLimitExceeded")};
  kj = kubeParse({{"a", job}, {"b", kubeList({oom})}}, &error);
  REQUIRE(kj);
  CHECK(kj->job.state == "OUT_OF_MEMORY");
  CHECK(kj->job.exit_code == "137:0");
  REQUIRE(kj->records.size() == 1);
  CHECK(kj->records[0].node == "gpu-c01");
  CHECK(kj->records[0].record.text ==
        "pod/t-0-x container trainer terminated: reason: OOMKilled, exit code: 137");
  CHECK(kj->records[0].record.time_ns == *common::parseTimestampNs("2024-06-01T10:30:00Z"));
  // A pod deleted because its node went away.
  json lost = kubePod("t-0-y", "gpu-c02", {{"job-name", "t"}});
  lost["status"]["conditions"] = {kubeCond("DisruptionTarget", "DeletionByTaintManager")};
  CHECK(stateOf({{"a", job}, {"b", kubeList({lost})}}) == "NODE_FAIL");
  // Only pods: their phases.
  CHECK(stateOf({{"a", kubeList({kubePod("p", "n1", json::object(), "Succeeded")})}}) ==
        "COMPLETED");
  CHECK(stateOf({{"a", kubeList({kubePod("p", "n1", json::object(), "Running")})}}) == "RUNNING");
}

TEST_CASE("kube: a PyTorchJob's master is rank 0, worker i is rank i+1", "[kube]") {
  std::string error;
  json pj = {
      {"kind", "PyTorchJob"},
      {"metadata", {{"name", "bert"}, {"namespace", "nlp"}, {"uid", "u-pj"}}},
      {"spec",
       {{"pytorchReplicaSpecs", {{"Master", {{"replicas", 1}}}, {"Worker", {{"replicas", 2}}}}}}},
      {"status", {{"conditions", {kubeCond("Succeeded")}}}}};
  auto lbl = [](const std::string& type, int i) {
    return json{{"training.kubeflow.org/job-name", "bert"},
                {"training.kubeflow.org/replica-type", type},
                {"training.kubeflow.org/replica-index", std::to_string(i)}};
  };
  auto kj = kubeParse({{"a", pj},
                       {"b", kubeList({kubePod("bert-worker-1", "n3", lbl("worker", 1)),
                                       kubePod("bert-master-0", "n1", lbl("Master", 0)),
                                       kubePod("bert-worker-0", "n2", lbl("worker", 0))})}},
                      &error);
  REQUIRE(kj);
  CHECK(kj->job.state == "COMPLETED");
  CHECK(kj->job.exit_code == "0:0");
  CHECK(kj->job.nodes == std::vector<std::string>{"n1", "n2", "n3"});
  CHECK(kj->job.nodeOfRank(2) == "n3");
}

TEST_CASE("kube: events become records on the pods' nodes, other objects' events are counted",
          "[kube]") {
  std::string error;
  auto ev = [](const std::string& kind, const std::string& name, const std::string& reason,
               const std::string& msg, const std::string& host) {
    return json{{"kind", "Event"},
                {"metadata", {{"name", name + ".17f"}, {"namespace", "ml"}}},
                {"involvedObject", {{"kind", kind}, {"name", name}}},
                {"reason", reason},
                {"message", msg},
                {"type", "Warning"},
                {"source", {{"component", "kubelet"}, {"host", host}}},
                {"firstTimestamp", "2024-06-01T10:20:00Z"},
                {"lastTimestamp", "2024-06-01T10:21:00Z"}};
  };
  auto kj =
      kubeParse({{"kube/jobset.json", trainJobSet({kubeCond("Failed")})},
                 {"kube/pods.json",
                  kubeList({kubePod("train-workers-0-0-a", "gpu-b01", jobsetLabels(0, 0))})},
                 {"kube/events.json",
                  kubeList({ev("Pod", "train-workers-0-0-a", "Evicted",
                               "The node was low on resource: memory. ", ""),
                            ev("Pod", "unrelated-pod", "BackOff",
                               "Back-off restarting failed container", "gpu-z01"),
                            ev("Node", "gpu-b01", "SystemOOM",
                               "System OOM encountered, victim process: python, pid: 7", "gpu-b01"),
                            ev("Node", "gpu-z09", "NodeNotReady",
                               "Node gpu-z09 status is now: NodeNotReady", "gpu-z09")})}},
                &error);
  REQUIRE(kj);
  std::vector<std::string> texts;
  for (const auto& r : kj->records) texts.push_back(r.node + " " + r.record.text);
  CHECK(texts ==
        std::vector<std::string>{"gpu-b01 Warning Evicted Pod/train-workers-0-0-a (kubelet): The "
                                 "node was low on resource: memory. ",
                                 "gpu-b01 Warning SystemOOM Node/gpu-b01 (kubelet): System OOM "
                                 "encountered, victim process: python, pid: 7"});
  CHECK(kj->records[0].record.time_ns ==
        *common::parseTimestampNs("2024-06-01T10:20:00Z"));  // the first time
  CHECK(kj->records[0].record.priority == 4);
  REQUIRE(kj->coverage.size() == 3);
  CHECK(kj->coverage[2].records == 2);
  CHECK(kj->coverage[2].skipped == 2);
  CHECK(kj->coverage[2].reason == "2 events about other objects");
}

TEST_CASE("kube: a broken file is a coverage error and the others still describe the job",
          "[kube]") {
  std::string error;
  std::vector<std::pair<std::string, std::string>> files = {
      {"kube/events.json", "{\"kind\": \"List\", \"items\": [{\"kind\": \"Event\", "},  // truncated
      {"kube/jobset.json", trainJobSet({kubeCond("Failed")}).dump()},
      {"kube/configmaps.json",
       kubeList({{{"kind", "ConfigMap"}, {"metadata", {{"name", "c"}}}}}).dump()}};
  auto kj = parseKubeObjects(files, &error);
  REQUIRE(kj);
  CHECK(kj->job.state == "FAILED");
  REQUIRE(kj->coverage.size() == 3);
  CHECK(kj->coverage[0].status == "error");
  CHECK(kj->coverage[0].reason.rfind("not JSON", 0) == 0);
  CHECK(kj->coverage[1].status == "ok");
  CHECK(kj->coverage[2].status == "error");
  CHECK(kj->coverage[2].reason == "1 ConfigMap objects ignored");
  // Nothing that describes a job: an error that says what was expected.
  CHECK_FALSE(parseKubeObjects({files[0], files[2]}, &error));
  CHECK(error.find("no JobSet") != std::string::npos);
}

TEST_CASE("kube: the pod of a kubectl logs file", "[kube]") {
  std::string error;
  auto kj = kubeParse({{"a", kubeList({kubePod("train-0", "n1", json::object()),
                                       kubePod("train-1.x", "n2", json::object())})}},
                      &error);
  REQUIRE(kj);
  CHECK(offline::podOfLogFile(*kj, "any.log",
                              "[pod/train-1.x/trainer] 2024-06-01T10:00:00Z hi\n") == "train-1.x");
  CHECK(offline::podOfLogFile(*kj, "train-0/trainer.log", "2024-06-01T10:00:00Z hi\n") ==
        "train-0");
  CHECK(offline::podOfLogFile(*kj, "train-0_trainer.log", "") == "train-0");
  CHECK(offline::podOfLogFile(*kj, "train-1.x.previous.log", "") == "train-1.x");
  CHECK(offline::podOfLogFile(*kj, "train-9_trainer.log", "") == "");
}

TEST_CASE("kube: an eviction says whether the container stayed within its request", "[kube]") {
  std::string error;
  auto evicted = [](const std::string& name, const std::string& usage) {
    json p = kubePod(name, "gpu-e02", json::object());
    p["status"]["reason"] = "Evicted";
    p["status"]["message"] =
        "The node was low on resource: memory. Threshold quantity: 100Mi, available: 88412Ki. "
        "Container indexer was using " +
        usage + ", request is 16Gi, has larger consumption of memory. ";
    return p;
  };
  auto kj = kubeParse({{"a", kubeList({evicted("within", "6815744Ki"), evicted("above", "17Gi"),
                                       evicted("odd", "lots")})}},
                      &error);
  REQUIRE(kj);
  REQUIRE(kj->records.size() == 3);
  CHECK(kj->records[0].record.text.size() > 40);
  CHECK(kj->records[0].record.text.rfind(" [faultline: usage within its request]") ==
        kj->records[0].record.text.size() - 38);
  CHECK(kj->records[1].record.text.find("[faultline: usage above its request]") !=
        std::string::npos);
  CHECK(kj->records[2].record.text.find("[faultline:") ==
        std::string::npos);  // no quantity: no note
}

namespace {

struct KubeBundleDir {
  std::filesystem::path path;
  KubeBundleDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "faultline-kube-XXXXXX").string();
    path = ::mkdtemp(tmpl.data());
  }
  ~KubeBundleDir() { std::filesystem::remove_all(path); }
  void put(const std::string& rel, const std::string& content) const {
    std::filesystem::create_directories((path / rel).parent_path());
    std::ofstream(path / rel, std::ios::binary) << content;
  }
};

const common::RuleEngine& kubeEngine() {
  static auto rules = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"}).rules;
  static common::RuleEngine e(rules);
  return e;
}

}  // namespace

TEST_CASE("kube bundle: broken files are coverage, pod logs land on the pods' nodes",
          "[kube][bundle]") {
  KubeBundleDir dir;
  json pod = kubePod("train-workers-0-0-a", "gpu-b01", jobsetLabels(0, 0));
  json term = {{"exitCode", 137}, {"reason", "OOMKilled"}, {"finishedAt", "2024-06-01T10:30:00Z"}};
  pod["status"]["containerStatuses"] =
      json::array({json{{"name", "trainer"}, {"state", {{"terminated", term}}}}});
  dir.put("kube/jobset.json",
          trainJobSet({kubeCond("Failed", "FailedJobs", "2024-06-01T10:31:00Z")}).dump());
  dir.put("kube/pods.json",
          kubeList({pod, kubePod("train-workers-0-1-b", "gpu-b02", jobsetLabels(0, 1))}).dump());
  dir.put("kube/events.json", "{\"kind\": \"List\", \"items\": [");  // cut off
  dir.put("pods/train-workers-0-1-b_trainer.log",
          "[pod/train-workers-0-1-b/trainer] 2024-06-01T10:30:20.000000001Z [rank1]: "
          "ncclRemoteError: A call failed "
          "possibly due to a network error or a remote process exiting prematurely.\n");
  dir.put("pods/unknown-pod_trainer.log", "2024-06-01T10:30:21Z hello\n");
  std::string error;
  auto b = offline::loadBundle(dir.path.string(), kubeEngine(), &error);
  REQUIRE(b);
  CHECK(b->job.state == "OUT_OF_MEMORY");
  CHECK(b->job.nodes == std::vector<std::string>{"gpu-b01", "gpu-b02"});
  bool events_error = false, pod_log_on_node = false, unknown_noted = false, missing_b02 = false;
  for (const auto& c : b->coverage) {
    events_error |= c.source.find("events.json") != std::string::npos && c.status == "error";
    pod_log_on_node |= c.source.find("train-workers-0-1-b_trainer.log") != std::string::npos &&
                       c.node == "gpu-b02" && c.records == 1;
    unknown_noted |= c.source.find("unknown-pod") != std::string::npos && c.node.empty() &&
                     c.reason.find("no pod named") != std::string::npos;
    missing_b02 |= c.node == "gpu-b02" && c.status == "missing";
  }
  CHECK(events_error);
  CHECK(pod_log_on_node);
  CHECK(unknown_noted);
  CHECK_FALSE(missing_b02);  // its pod's log was read
  auto d = offline::attributeBundle(dir.path.string(), kubeEngine(), &error);
  REQUIRE(d);
  CHECK(d->terminal_state == "out_of_memory");
  REQUIRE_FALSE(d->responsible.empty());
  CHECK(d->responsible.front().node == "gpu-b01");

  // Only a broken kube/ file and no job.json: nothing describes the job.
  KubeBundleDir bad;
  bad.put("kube/jobset.json", "not json");
  CHECK_FALSE(offline::loadBundle(bad.path.string(), kubeEngine(), &error));
  CHECK(error.find("no JobSet") != std::string::npos);
}

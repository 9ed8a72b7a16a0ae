// A Kubernetes job described by the objects an operator collects with kubectl
// (docs/bundle-format.md, "Kubernetes jobs"): a JobSet, batch Jobs, a Kueue Workload or a
// Kubeflow PyTorchJob, their pods and the namespace's events, each file the JSON output of
// `kubectl get ... -o json` (one object or a List).
//
// Pure: parseKubeObjects() reads texts handed in and no clock or file; loadKubeDir() only reads
// the folder's files and hands them on. Never throws: a file that is not JSON or holds nothing
// known becomes a coverage entry with the reason, and the other files still count.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/diagnosis.h"
#include "common/job.h"
#include "common/log_record.h"

namespace faultline::offline {

struct KubePod {
  std::string ns;
  std::string name;
  std::string uid;
  std::string node;  // spec.nodeName; "" when never scheduled
  int index = -1;    // the pod's rank: JobSet global job index x pods per Job + completion index,
                     // PyTorchJob master 0 / worker i+1, or the completion index alone; -1: none
};

// A record made from an object (an event, a container's or pod's terminal status), for the rule
// engine, with the node it belongs to ("" when none: a pod that was never scheduled).
struct KubeRecord {
  std::string node;
  std::string source;  // the file it came from
  common::LogRecord record;
};

struct KubeJob {
  common::JobInfo job;
  std::string kind;  // the object that describes the job: JobSet, PyTorchJob, Workload, Job, Pod
  std::string name;  // its NAMESPACE/NAME (the job id is its uid)
  std::vector<KubePod> pods;
  std::vector<KubeRecord> records;
  std::vector<common::CoverageEntry> coverage;  // one per file

  const KubePod* pod(std::string_view name) const;
};

// Files as (path, text). Returns nullopt with *error when no file describes a job (no JobSet,
// Job, Workload, PyTorchJob and no pod); malformed files are coverage entries, not errors.
std::optional<KubeJob> parseKubeObjects(
    const std::vector<std::pair<std::string, std::string>>& files, std::string* error);

// Every *.json file of `dir` (sorted by name), through parseKubeObjects.
std::optional<KubeJob> loadKubeDir(const std::string& dir, std::string* error);

// The pod a `kubectl logs` file belongs to: the "[pod/NAME/CONTAINER] " prefix of its first line
// (kubectl logs --prefix), else the folder below pods/ (pods/NAME/CONTAINER.log), else the file
// name up to its first '_' or '.' that names a known pod (NAME_CONTAINER.log, NAME.log,
// NAME.previous.log). "" when none fits.
std::string podOfLogFile(const KubeJob& kube, const std::string& rel_path, std::string_view head);

}  // namespace faultline::offline

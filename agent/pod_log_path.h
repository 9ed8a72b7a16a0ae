// What the kubelet's log path says about a container's output file:
// /var/log/pods/NAMESPACE_POD_UID/CONTAINER/N.log (N: the container's restart count), rotated by
// the container runtime to N.log.YYYYMMDD-hhmmss (and .gz). Namespace and pod names are DNS names
// and a UID has no '_', so the folder splits unambiguously at its two '_'.
//
// Pure; no I/O. The agent adds these as fields (pod, namespace, container, pod_uid, restart) to the
// symptoms of a followed pod log, so the aggregator and an operator can tell which pod and which
// container of a job wrote the line (docs/kubernetes.md).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace faultline::agent {

struct PodLogPath {
  std::string ns;
  std::string pod;
  std::string uid;
  std::string container;
  int restart = -1;      // N of N.log; -1 when the file name has no number
  bool rotated = false;  // N.log.<stamp>[.gz]
};

// nullopt when the path is not below a pods/NAMESPACE_POD_UID/CONTAINER/ folder.
std::optional<PodLogPath> parsePodLogPath(std::string_view path);

// The symptom fields of a pod log: {pod, namespace, container, pod_uid, restart}.
std::map<std::string, std::string> podLogFields(const PodLogPath& p);

}  // namespace faultline::agent

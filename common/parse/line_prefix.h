// Prefixes that launchers and orchestrators put in front of every line they re-emit.
//
// A job's output often reaches an operator through another program: mpirun --tag-output
// ("[1,13]<stdout>:"), pdsh / clush / DeepSpeed's multi-node runner ("gpu-a01: ", "10.0.0.7: "),
// container runtimes (CRI "2024-06-01T10:00:00.123Z stderr F "), kubectl logs --prefix
// ("[pod/train-0/pytorch] "), Open MPI's own lines ("[gpu-a01:48211] "), docker compose ("trainer-1  | "), talosctl dmesg ("10.0.0.7: kern:
// warning: [<RFC 3339>]: "), Ray and SkyPilot
// ("(RayTrainWorker pid=812, ip=10.0.0.7) ", "(worker1, rank=1, pid=2345, ip=...) "). Rules
// match the message, so these are removed, keeping the rank or host they name. Pure functions, no allocation.
#pragma once

#include <string_view>

#include "common/parse/stream_parser.h"

namespace faultline::common::parse {

struct LinePrefix {
  int rank = -1;          // rank named by the prefix, -1 when none
  std::string_view host;  // host named by the prefix (a view into the line), "" when none
};

// Removes one launcher prefix from the start of *s. `known_hosts` (may be null; e.g. the job's nodes) lets a
// "host: " prefix name any host; without it only host names of the usual shapes ("gpu-a01",
// "node017", "worker-3", dotted names, IPv4 addresses) are taken. Returns false when *s starts
// with none of the known prefixes.
bool stripLauncherPrefix(std::string_view* s, const HostSet* known_hosts, LinePrefix* out);

// After a time stamp: the CRI log's "stdout F " / "stderr P " stream tag. Logging levels
// ("- trainer - ERROR - ") stay in the text: rules may match on them, and a traceback under
// such a prefix is followed by its shape (sameShape). Returns true when something was removed.
bool stripAfterStamp(std::string_view* s);

// Same shape: equal length, equal bytes except that any digit matches any digit. Used to follow
// a prefix learned from a traceback's first line through the lines after it.
bool sameShape(std::string_view a, std::string_view b);

}  // namespace faultline::common::parse

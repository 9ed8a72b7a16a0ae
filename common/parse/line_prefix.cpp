#include "common/parse/line_prefix.h"

#include <algorithm>

#include "common/parse/text_util.h"

namespace faultline::common::parse {
namespace {

constexpr int kMaxRank = 10'000'000;

bool isLower(char c) { return c >= 'a' && c <= 'z'; }
bool isAlnum(char c) { return isLower(c) || (c >= 'A' && c <= 'Z') || isDigit(c); }

void eatOneSpace(std::string_view* s) {
  if (!s->empty() && s->front() == ' ') s->remove_prefix(1);
}

bool isIpv4(std::string_view t) {
  int parts = 0;
  size_t i = 0;
  while (i <= t.size()) {
    size_t start = i;
    while (i < t.size() && isDigit(t[i])) ++i;
    if (i == start || i - start > 3) return false;
    ++parts;
    if (i == t.size()) break;
    if (t[i] != '.') return false;
    ++i;
  }
  return parts == 4;
}

// "gpu-a01", "node017", "worker-3", "dgx-h100-041", "ip-10-0-1-23.ec2.internal": lower case,
// starts with a letter, its first label ends in a digit and has a '-' or two trailing digits.
// Words that end a message prefix ("RuntimeError", "python3", "ib0", "nvme0n1") do not fit.
bool isHostShaped(std::string_view t) {
  if (t.empty() || t.size() > 64) return false;
  if (isIpv4(t)) return true;
  const std::string_view label = t.substr(0, t.find('.'));
  if (label.empty() || !isLower(label.front()) || !isDigit(label.back())) return false;
  bool dash = false;
  for (char c : label) {
    if (c == '-') dash = true;
    else if (!isLower(c) && !isDigit(c)) return false;
  }
  for (char c : t.substr(label.size()))
    if (c != '.' && c != '-' && !isLower(c) && !isDigit(c)) return false;
  size_t trailing = 0;
  while (trailing < label.size() && isDigit(label[label.size() - 1 - trailing])) ++trailing;
  return dash || trailing >= 2;
}

// mpirun --tag-output / Horovod: "[1,13]<stdout>:" (Open MPI 4 writes the text right after the
// colon, PRRTE-based Open MPI 5 a space).
bool mpiTag(std::string_view* s, LinePrefix* out) {
  std::string_view t = *s;
  if (t.size() < 12 || t[0] != '[') return false;
  size_t i = 1;
  uint64_t job = 0, rank = 0;
  if (!readUint(t, &i, &job) || i >= t.size() || t[i] != ',') return false;
  ++i;
  if (!readUint(t, &i, &rank) || rank > kMaxRank || i >= t.size() || t[i] != ']') return false;
  ++i;
  for (std::string_view tag : {"<stdout>:", "<stderr>:", "<stddiag>:"}) {
    if (t.compare(i, tag.size(), tag) == 0) {
      s->remove_prefix(i + tag.size());
      eatOneSpace(s);
      out->rank = static_cast<int>(rank);
      return true;
    }
  }
  return false;
}

// Open MPI's own output (opal_output, ORTE/PRRTE help aggregation, the BTLs' verbose lines):
// "[HOST:PID] " with the process's host name, e.g. "[gpu-a01:48211] pml_ucx.c:419 Error: ...".
bool opalTag(std::string_view* s, const HostSet* known_hosts, LinePrefix* out) {
  std::string_view t = *s;
  const size_t colon = t.find(':');
  if (t.size() < 6 || t[0] != '[' || colon == std::string_view::npos || colon < 2 || colon > 80) return false;
  const std::string_view host = t.substr(1, colon - 1);
  for (char c : host)
    if (!(isAlnum(c) || c == '-' || c == '.' || c == '_')) return false;
  size_t i = colon + 1;
  uint64_t pid = 0;
  if (!readUint(t, &i, &pid) || i - colon - 1 > 7 || i + 1 >= t.size() || t[i] != ']' || t[i + 1] != ' ') return false;
  const bool known = known_hosts && known_hosts->count(host) > 0;
  if (!known && !isHostShaped(host)) return false;
  out->host = host;
  s->remove_prefix(i + 2);
  return true;
}

// kubectl logs --prefix: "[pod/NAME/CONTAINER] ".
bool kubectlTag(std::string_view* s) {
  if (!startsWith(*s, "[pod/")) return false;
  const size_t close = s->find("] ");
  if (close == std::string_view::npos || close > 300 || s->substr(0, close).find(' ') != std::string_view::npos)
    return false;
  s->remove_prefix(close + 2);
  return true;
}

// Ray / SkyPilot: "(RayTrainWorker pid=812, ip=10.0.0.7) ", "(pid=812) ",
// "(worker1, rank=1, pid=2345, ip=10.0.0.2) ".
bool rayTag(std::string_view* s, LinePrefix* out) {
  if (s->empty() || s->front() != '(') return false;
  const size_t close = s->find(')');
  if (close == std::string_view::npos || close > 200) return false;
  const std::string_view inner = s->substr(1, close - 1);
  if (inner.find('(') != std::string_view::npos) return false;
  const size_t pid = inner.find("pid=");
  if (pid == std::string_view::npos || (pid > 0 && inner[pid - 1] != ' ' && inner[pid - 1] != ',')) return false;
  const size_t rank_at = inner.find("rank=");
  if (rank_at != std::string_view::npos) {
    size_t i = rank_at + 5;
    uint64_t r = 0;
    if (readUint(inner, &i, &r) && r <= kMaxRank) out->rank = static_cast<int>(r);
  }
  s->remove_prefix(close + 1);
  eatOneSpace(s);
  return true;
}

// pdsh / clush / DeepSpeed's pdsh runner: "HOST: " (or "HOST:" at the end of a line).
bool hostTag(std::string_view* s, const HostSet* known_hosts, LinePrefix* out) {
  const size_t limit = std::min<size_t>(s->size(), 80);
  size_t i = 0;
  while (i < limit && (isAlnum((*s)[i]) || (*s)[i] == '-' || (*s)[i] == '.' || (*s)[i] == '_')) ++i;
  if (i == 0 || i >= s->size() || (*s)[i] != ':') return false;
  if (i + 1 < s->size() && (*s)[i + 1] != ' ') return false;
  const std::string_view host = s->substr(0, i);
  const bool known = known_hosts && known_hosts->count(host) > 0;
  if (!known && !isHostShaped(host)) return false;
  out->host = host;
  s->remove_prefix(std::min(i + 2, s->size()));
  return true;
}

// talosctl dmesg / logs: "kern: warning: " (facility, right-aligned level) before the stamp.
bool facilityLevelTag(std::string_view* s) {
  static constexpr std::string_view kFacilities[] = {"kern", "user", "daemon", "auth", "syslog", "local0",
                                                     "local1", "local2", "local3", "local4", "local5",
                                                     "local6", "local7"};
  static constexpr std::string_view kLevels[] = {"emerg", "alert", "crit", "err", "warning", "warn",
                                                 "notice", "info", "debug"};
  const size_t colon = s->find(':');
  if (colon == std::string_view::npos || colon > 8) return false;
  if (std::find(std::begin(kFacilities), std::end(kFacilities), s->substr(0, colon)) == std::end(kFacilities))
    return false;
  size_t i = colon + 1;
  while (i < s->size() && (*s)[i] == ' ') ++i;
  const size_t level_end = s->find(':', i);
  if (level_end == std::string_view::npos || i == colon + 1) return false;
  if (std::find(std::begin(kLevels), std::end(kLevels), s->substr(i, level_end - i)) == std::end(kLevels))
    return false;
  s->remove_prefix(level_end + 1);
  eatOneSpace(s);
  return true;
}

// docker compose: "trainer-1  | " (the service name padded to the widest one).
bool composeTag(std::string_view* s) {
  const size_t limit = std::min<size_t>(s->size(), 80);
  size_t i = 0;
  while (i < limit && (isAlnum((*s)[i]) || (*s)[i] == '-' || (*s)[i] == '_' || (*s)[i] == '.')) ++i;
  if (i == 0) return false;
  size_t j = i;
  while (j < limit && (*s)[j] == ' ') ++j;
  if (j == i || j + 1 >= s->size() || (*s)[j] != '|' || (*s)[j + 1] != ' ') return false;
  s->remove_prefix(j + 2);
  return true;
}

}  // namespace

bool stripLauncherPrefix(std::string_view* s, const HostSet* known_hosts, LinePrefix* out) {
  if (s->empty()) return false;
  switch (s->front()) {
    case '[':
      return mpiTag(s, out) || kubectlTag(s) || opalTag(s, known_hosts, out);
    case '(':
      return rayTag(s, out);
    default:
      return facilityLevelTag(s) || hostTag(s, known_hosts, out) || composeTag(s);
  }
}

bool stripAfterStamp(std::string_view* s) {
  std::string_view t = *s;
  // CRI (containerd, CRI-O) log lines: "<stamp> stdout F <text>", P for a partial line.
  for (std::string_view tag : {"stdout F ", "stderr F ", "stdout P ", "stderr P "}) {
    if (startsWith(t, tag)) {
      s->remove_prefix(tag.size());
      return true;
    }
  }
  return false;
}

bool sameShape(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i] && !(isDigit(a[i]) && isDigit(b[i]))) return false;
  return true;
}

}  // namespace faultline::common::parse

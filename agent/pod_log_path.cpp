#include "agent/pod_log_path.h"

#include <cctype>
#include <vector>

namespace faultline::agent {

namespace {

bool dnsName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  for (char c : s)
    if (!(std::islower(static_cast<unsigned char>(c)) ||
          std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.'))
      return false;
  return true;
}

}  // namespace

std::optional<PodLogPath> parsePodLogPath(std::string_view path) {
  // The last three components: NAMESPACE_POD_UID / CONTAINER / FILE, under a "pods" folder.
  std::vector<std::string_view> parts;
  size_t end = path.size();
  while (parts.size() < 4 && end > 0) {
    const size_t slash = path.rfind('/', end - 1);
    const size_t begin = slash == std::string_view::npos ? 0 : slash + 1;
    parts.push_back(path.substr(begin, end - begin));
    if (slash == std::string_view::npos) break;
    end = slash;
  }
  if (parts.size() < 4 || parts[3] != "pods") return std::nullopt;
  const std::string_view file = parts[0], container = parts[1], dir = parts[2];
  const size_t u1 = dir.find('_');
  const size_t u2 = u1 == std::string_view::npos ? u1 : dir.find('_', u1 + 1);
  if (u2 == std::string_view::npos || dir.find('_', u2 + 1) != std::string_view::npos)
    return std::nullopt;
  PodLogPath p;
  p.ns = std::string(dir.substr(0, u1));
  p.pod = std::string(dir.substr(u1 + 1, u2 - u1 - 1));
  p.uid = std::string(dir.substr(u2 + 1));
  p.container = std::string(container);
  if (!dnsName(p.ns) || !dnsName(p.pod) || p.uid.empty() || !dnsName(p.container))
    return std::nullopt;
  const size_t dot = file.find(".log");
  if (dot == std::string_view::npos) return std::nullopt;
  int n = 0;
  bool digits = dot > 0;
  for (size_t i = 0; i < dot && digits; ++i) {
    digits = std::isdigit(static_cast<unsigned char>(file[i])) != 0;
    if (digits && n < 100'000'000) n = n * 10 + (file[i] - '0');
  }
  p.restart = digits ? n : -1;
  p.rotated = dot + 4 < file.size();
  return p;
}

std::map<std::string, std::string> podLogFields(const PodLogPath& p) {
  std::map<std::string, std::string> f{
      {"pod", p.pod}, {"namespace", p.ns}, {"container", p.container}, {"pod_uid", p.uid}};
  if (p.restart >= 0) f["restart"] = std::to_string(p.restart);
  return f;
}

}  // namespace faultline::agent

#include "common/symptom.h"

#include <cctype>
#include <cstdlib>

namespace faultline::common {

std::string_view roleName(Role r) {
  switch (r) {
    case Role::kRoot: return "root";
    case Role::kCascade: return "cascade";
    case Role::kTeardown: return "teardown";
    case Role::kContext: return "context";
  }
  return "root";
}

std::string_view subDomainName(SubDomain d) {
  switch (d) {
    case SubDomain::kNone: return "none";
    case SubDomain::kHardware: return "hardware";
    case SubDomain::kNetwork: return "network";
    case SubDomain::kSystemSoftware: return "system_software";
    case SubDomain::kInfrastructure: return "infrastructure";
    case SubDomain::kApplication: return "application";
    case SubDomain::kAmbiguous: return "ambiguous";
    case SubDomain::kUnattributed: return "unattributed";
  }
  return "none";
}

std::string_view severityName(Severity s) {
  switch (s) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kError: return "error";
    case Severity::kCritical: return "critical";
  }
  return "error";
}

std::optional<Role> parseRole(std::string_view s) {
  for (Role r : {Role::kRoot, Role::kCascade, Role::kTeardown, Role::kContext})
    if (roleName(r) == s) return r;
  return std::nullopt;
}

std::optional<SubDomain> parseSubDomain(std::string_view s) {
  for (int i = 0; i <= static_cast<int>(SubDomain::kUnattributed); ++i) {
    auto d = static_cast<SubDomain>(i);
    if (subDomainName(d) == s) return d;
  }
  return std::nullopt;
}

std::optional<Severity> parseSeverity(std::string_view s) {
  for (Severity v : {Severity::kInfo, Severity::kWarning, Severity::kError, Severity::kCritical})
    if (severityName(v) == s) return v;
  return std::nullopt;
}

std::optional<int> Symptom::rank() const {
  const std::string& text = field("rank");
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (!end || *end != '\0') return std::nullopt;
  return static_cast<int>(v);
}

const std::string& Symptom::field(const std::string& key) const {
  static const std::string kEmpty;
  auto it = fields.find(key);
  return it == fields.end() ? kEmpty : it->second;
}

namespace {
bool allHex(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  return true;
}
}  // namespace

std::string normalizePciId(std::string_view id) {
  std::string_view s = id;
  if (s.size() > 4 && (s.substr(0, 4) == "PCI:" || s.substr(0, 4) == "pci:")) s.remove_prefix(4);
  // Split into [domain:]bus:dev[.fn]
  std::string_view domain = "0000", bus, dev, fn = "0";
  auto c1 = s.find(':');
  if (c1 == std::string_view::npos) return std::string(id);
  auto c2 = s.find(':', c1 + 1);
  std::string_view rest;
  if (c2 == std::string_view::npos) {
    bus = s.substr(0, c1);
    rest = s.substr(c1 + 1);
  } else {
    domain = s.substr(0, c1);
    bus = s.substr(c1 + 1, c2 - c1 - 1);
    rest = s.substr(c2 + 1);
  }
  auto dot = rest.find('.');
  if (dot == std::string_view::npos) {
    dev = rest;
  } else {
    dev = rest.substr(0, dot);
    fn = rest.substr(dot + 1);
  }
  if (!allHex(domain) || !allHex(bus) || !allHex(dev) || !allHex(fn) || bus.size() > 2 ||
      dev.size() > 2 || fn.size() != 1 || domain.size() > 8)
    return std::string(id);
  auto lower = [](std::string_view v, size_t width) {
    std::string out;
    for (size_t i = v.size(); i < width; ++i) out += '0';
    for (char c : v) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  // Domains are printed with 4 or 8 digits; the significant part fits in 4.
  std::string d = lower(domain, 4);
  if (d.size() > 4) d = d.substr(d.size() - 4);
  return d + ":" + lower(bus, 2) + ":" + lower(dev, 2) + "." + lower(fn, 1);
}

}  // namespace faultline::common

// A symptom: one rule's interpretation of one or more identical log records on one node/device.
// Plain value types shared by the rule engine, the aggregation step, the wire codec and the
// correlator. No threads, no I/O.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/log_record.h"

namespace faultline::common {

enum class Role { kRoot, kCascade, kTeardown, kContext };
enum class SubDomain {
  kNone,
  kHardware,
  kNetwork,
  kSystemSoftware,
  kInfrastructure,
  kApplication,
  kAmbiguous,
  kUnattributed,
};
enum class Severity { kInfo, kWarning, kError, kCritical };

std::string_view roleName(Role r);
std::string_view subDomainName(SubDomain d);
std::string_view severityName(Severity s);
std::optional<Role> parseRole(std::string_view s);
std::optional<SubDomain> parseSubDomain(std::string_view s);
std::optional<Severity> parseSeverity(std::string_view s);

struct Symptom {
  std::string rule_id;
  std::string symptom;
  SubDomain sub_domain = SubDomain::kNone;
  std::string category;
  Role role = Role::kRoot;
  Severity severity = Severity::kError;
  bool fallback_root = false;
  std::string node;
  std::string device;   // normalised device id ("0000:3b:00.0" for PCI), "" when unknown
  std::string source;   // where on the node it came from (file path, "kmsg", "journal")
  SourceKind source_kind = SourceKind::kApplication;
  int64_t first_ns = 0;
  int64_t last_ns = 0;
  bool time_known = false;
  uint32_t count = 1;
  std::vector<std::string> evidence;  // first few raw messages (kMaxEvidence)
  std::map<std::string, std::string> fields;
  std::string summary;
  std::string boot_id;

  static constexpr size_t kMaxEvidence = 3;

  // Field lookup; "" when absent.
  const std::string& field(const std::string& key) const;
  // The global rank a job-wide log's line came from (field "rank"), when it is a number.
  std::optional<int> rank() const;
};

// Normalises a PCI bus id as printed by the driver ("PCI:0000:3b:00", "00000000:3B:00.0",
// "3b:00.0") to "0000:3b:00.0". Returns the input unchanged when it is not a PCI id.
std::string normalizePciId(std::string_view id);

}  // namespace faultline::common

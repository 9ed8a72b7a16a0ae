#include "common/log_record.h"

namespace faultline::common {

std::string_view formatName(LogFormat format) {
  switch (format) {
    case LogFormat::kUnknown: return "unknown";
    case LogFormat::kDmesgRaw: return "dmesg";
    case LogFormat::kDmesgCtime: return "dmesg-ctime";
    case LogFormat::kDmesgIso: return "dmesg-iso";
    case LogFormat::kKmsg: return "kmsg";
    case LogFormat::kJournalShortIso: return "journal-short-iso";
    case LogFormat::kJournalJson: return "journal-json";
    case LogFormat::kJournalExport: return "journal-export";
    case LogFormat::kJournalBinary: return "journal-file";
    case LogFormat::kSyslog: return "syslog";
    case LogFormat::kFabricManager: return "fabricmanager";
    case LogFormat::kIpmiSel: return "ipmi-sel";
    case LogFormat::kCriLog: return "cri";
    case LogFormat::kConsole: return "console";
    case LogFormat::kApplication: return "application";
  }
  return "unknown";
}

std::string_view sourceKindName(SourceKind kind) {
  switch (kind) {
    case SourceKind::kKernel: return "kernel";
    case SourceKind::kJournal: return "journal";
    case SourceKind::kFabricManager: return "fabricmanager";
    case SourceKind::kApplication: return "application";
    case SourceKind::kMetric: return "metric";
  }
  return "application";
}

SourceKind sourceKindOf(LogFormat format) {
  switch (format) {
    case LogFormat::kDmesgRaw:
    case LogFormat::kDmesgCtime:
    case LogFormat::kDmesgIso:
    case LogFormat::kKmsg:
    case LogFormat::kConsole:  // the console logger's own lines too: they share the file
      return SourceKind::kKernel;
    case LogFormat::kJournalShortIso:
    case LogFormat::kJournalJson:
    case LogFormat::kJournalExport:
    case LogFormat::kJournalBinary:
    case LogFormat::kSyslog:
    case LogFormat::kIpmiSel:  // the same events reach the journal through ipmievd
      return SourceKind::kJournal;
    case LogFormat::kFabricManager:
      return SourceKind::kFabricManager;
    case LogFormat::kUnknown:
    case LogFormat::kCriLog:  // a container's own output
    case LogFormat::kApplication:
      return SourceKind::kApplication;
  }
  return SourceKind::kApplication;
}

}  // namespace faultline::common

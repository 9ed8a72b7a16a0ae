// One log message as it came from a source, before any rule looked at it.
//
// Produced by the stream parsers (common/parse/), by the journal readers and by the agent's
// sources; consumed by the rule engine. A plain value type: copy or move freely, no threads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>
#include <string_view>

namespace faultline::common {

// The on-disk / on-wire shape a source's lines have. Detected per file (detectFormat) or known
// from the source (the agent's kmsg and journald sources).
enum class LogFormat {
  kUnknown,
  kDmesgRaw,        // "[ 1234.567890] msg"               seconds since boot
  kDmesgCtime,      // "[Fri Aug 30 11:43:09 2024] msg"   dmesg -T, node-local time
  kDmesgIso,        // "2025-01-21T04:41:44,283302+00:00 msg", optionally "kern  :warn  : " first
  kKmsg,            // "6,1234,5678901,-;msg"             /dev/kmsg, usec since boot
  kJournalShortIso, // journalctl -o short-iso / short-iso-precise
  kJournalJson,     // journalctl -o json (one object per line)
  kJournalExport,   // journalctl -o export (KEY=value blocks, binary fields)
  kJournalBinary,   // *.journal files, read with sd-journal
  kSyslog,          // "Dec  2 11:38:27 host ident[pid]: msg" (rsyslog traditional)
  kFabricManager,   // "[Mon Jan 01 2024 00:00:00] [ERROR] [tid 1234] msg"
  kIpmiSel,         // "   1 | 06/01/2024 | 10:12:03 | Memory #0x53 | ..." ipmitool sel list/elist
  kCriLog,          // "2024-06-01T10:00:00.123456789Z stderr F msg" /var/log/pods (P: partial line)
  kConsole,         // "[2025-07-16T20:42:48+08:00][1854229.275568][T4056360] msg" a node's console log
                    // (HPE Cray EX, conman): the logger's wall-clock stamp, then a raw dmesg line
  kApplication,     // anything else: rank logs, NCCL, PyTorch, srun/slurmstepd, slurmctld
};

std::string_view formatName(LogFormat format);

// Coarse origin of a record; rules may restrict themselves to some kinds.
enum class SourceKind { kKernel, kJournal, kFabricManager, kApplication, kMetric };  // kMetric: a PromQL series

std::string_view sourceKindName(SourceKind kind);
SourceKind sourceKindOf(LogFormat format);

struct LogRecord {
  // UTC nanoseconds since the Unix epoch. Meaningful only when time_known.
  int64_t time_ns = 0;
  bool time_known = false;
  // Nanoseconds since boot when the source gave it (dmesg raw, kmsg, journald), else -1.
  int64_t monotonic_ns = -1;
  std::string boot_id;     // journald _BOOT_ID or node.json boot_id, when known
  std::string host;        // host named by the line itself (syslog/journal host, NCCL "host:pid:tid")
  std::string ident;       // syslog identifier / unit / "kernel" / "nv-fabricmanager"
  int rank = -1;           // global rank from a "[rank3]:" / "3: " / "[default3]:" prefix, else -1
  int priority = -1;       // syslog priority 0..7 when known
  std::string text;        // the message; joined continuation lines are separated by '\n'
  uint64_t line = 0;       // 1-based physical line (or record index) of the message's first line
  // The rule literals the parser's literal search found on the record's line (a one-line record
  // whose bytes were not rewritten), as numbered by the LiteralScanner whose serial() is
  // literals_of; 0: not known (the rule engine searches the text itself).
  uint64_t literals_of = 0;
  std::vector<int> literal_ids;
  // The parser's literal search found no rule literal in the record's lines (it was handed on for
  // an error word, ParseOptions::error_words, or as the first record with both clocks): no rule
  // can match it. False when not known.
  bool rule_literals_absent = false;
};

}  // namespace faultline::common

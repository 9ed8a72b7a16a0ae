// Pure, incremental parsers from raw bytes of one log file/stream to LogRecords.
//
// No I/O: callers feed bytes (any chunking) and receive records through a sink, synchronously,
// on the calling thread. One StreamParser per stream; not thread-safe. Never throws on bad
// input: malformed lines, binary garbage, over-long lines are counted in ParseReport and skipped,
// and the good lines around them are still emitted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/log_record.h"
#include "common/parse/literal_scan.h"
#include "common/time_zone.h"

namespace faultline::common {

using HostSet = std::set<std::string, std::less<>>;

struct ParseOptions {
  // UTC ns of the node's boot, for stamps relative to boot (dmesg raw, kmsg). When absent those
  // records get time_known=false (monotonic_ns still set) unless the stream itself reveals the
  // boot time.
  std::optional<int64_t> boot_time_ns;
  // The node's uptime now (a followed file's reader sets it). A boot-relative stamp past it
  // cannot be of this boot — a file that outlived a reboot — and is not placed with boot_time_ns:
  // time_known=false, monotonic_ns kept. Asked only for a stamp past the last answer.
  std::function<int64_t()> uptime_ns;
  std::string boot_id;
  // Year for formats that omit it (traditional syslog), taken from the job's start.
  int default_year = 1970;
  // Offset of node-local wall-clock time from UTC, in seconds (local = UTC + offset), for
  // formats that write local time without a zone (syslog, dmesg -T, Fabric Manager).
  int utc_offset_sec = 0;
  // The node's zone by its rules (daylight saving); when set it wins over utc_offset_sec.
  std::shared_ptr<const TimeZone> local_zone;
  // Host names a line prefix may name (pdsh / clush "host: "), e.g. the job's nodes; shared, so
  // the per-file copies of these options stay cheap for a job of thousands of nodes.
  std::shared_ptr<const HostSet> known_hosts;

  // UTC ns of a local wall-clock time given as ns "read as if UTC".
  int64_t utcFromLocal(int64_t wall_ns) const {
    return local_zone ? local_zone->utcFromLocal(wall_ns) : wall_ns - int64_t{utc_offset_sec} * 1'000'000'000;
  }
  // Lines longer than this are skipped (counted as oversized), never buffered whole.
  size_t max_line_bytes = 1 << 20;
  // Upper bound of a joined multi-line record (traceback, indented continuation).
  size_t max_record_bytes = 64 << 10;
  size_t max_record_lines = 200;
  // The rules' prefilter literals (RuleEngine::literalScanner()). When set, the raw bytes are
  // searched for them first and only records holding a hit reach the sink, plus the first record
  // that has both clocks (a boot-time estimate); the others are parsed and counted all the same.
  // Null: every record reaches the sink (the golden parser tests).
  std::shared_ptr<const LiteralScanner> literals;
  // The error lexicon's words (errorLexiconExpressions(), LiteralScanner::buildExpressions), searched next to
  // `literals` (only when that is set): records holding one are handed on too, marked
  // LogRecord::rule_literals_absent when they hold no rule literal, for the template miner.
  std::shared_ptr<const LiteralScanner> error_words;
};

struct ParseReport {
  LogFormat format = LogFormat::kUnknown;
  uint64_t lines = 0;       // physical lines seen
  uint64_t records = 0;     // records emitted
  uint64_t delivered = 0;   // records handed to the sink (all of them without ParseOptions::literals)
  uint64_t skipped = 0;     // lines skipped for any reason (sum of the three below + other)
  uint64_t malformed = 0;   // lines that do not parse in this format
  uint64_t binary = 0;      // lines with NUL/control bytes or invalid UTF-8 beyond repair
  uint64_t oversized = 0;   // lines over max_line_bytes
  bool truncated = false;
  uint64_t local_stamps = 0;  // records whose stamp was node-local time (converted by the zone)   // stream ended inside a record/line without a final newline
  std::vector<std::string> notes;  // first few "line N: why" messages (bounded, ≤ 8)
};

using RecordSink = std::function<void(LogRecord&&)>;

class StreamParser {
 public:
  virtual ~StreamParser() = default;
  // Feeds the next bytes of the stream. Emits every record that is complete.
  virtual void feed(std::string_view bytes) = 0;
  // End of stream: emits the pending record (and a final line without '\n').
  virtual void finish() = 0;
  virtual const ParseReport& report() const = 0;
};

// Creates the parser for a text format. kJournalBinary is not a text format (see
// common/journal/) and gives a parser that counts every line as malformed.
std::unique_ptr<StreamParser> makeStreamParser(LogFormat format, ParseOptions options,
                                               RecordSink sink);

// Guesses the format of a stream from its first bytes (pass up to 64 KiB). Votes over the
// first non-empty lines; kApplication when nothing more specific fits.
LogFormat detectFormat(std::string_view head);

// The format one line votes for in detectFormat (kUnknown: no vote). A line behind grep's
// file-name prefix ("messages:Jun 17 ...") votes for the format behind it; the line parsers of
// stamped formats then drop that prefix from every line (line_grammar.h grepFilePrefix).
LogFormat classifyLogLine(std::string_view line);

// ---- Single-record helpers shared with the agent's live sources -------------------------

// One /dev/kmsg record: "prio,seq,usec,flags[,...];text\n[ KEY=value\n...]".
struct KmsgRecord {
  int facility = 0;
  int level = 0;
  uint64_t seq = 0;
  uint64_t usec = 0;  // microseconds since boot
  char flags = '-';   // '-' or 'c' (continuation)
  std::string text;   // unescaped ("\x0a" style escapes decoded)
  std::map<std::string, std::string> dict;  // " SUBSYSTEM=pci" style continuation lines
};
std::optional<KmsgRecord> parseKmsgRecord(std::string_view record);

// Converts one journal entry's fields (MESSAGE, _HOSTNAME, __REALTIME_TIMESTAMP, ...) into a
// LogRecord. Shared by the -o json / -o export parsers and the sd-journal readers.
// Returns nullopt when the entry has no MESSAGE.
std::optional<LogRecord> recordFromJournalFields(const std::map<std::string, std::string>& fields);

}  // namespace faultline::common

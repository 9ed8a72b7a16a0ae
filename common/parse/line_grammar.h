// Recognisers for the fixed line prefixes of each format. Shared by detectFormat (which only
// asks "does it fit") and the parsers (which use the fields), so both agree by construction.
// Pure, allocation-free: results point into the input line.
#pragma once

#include <cstdint>
#include <string_view>

namespace faultline::common::parse {

// dmesg --decode prefix "kern  :warn  : " (facility, level names padded to 6, then ": ").
struct DecodePrefix {
  int facility = 0;
  int level = 0;
  size_t length = 0;
};
bool parseDecodePrefix(std::string_view line, DecodePrefix* out);

// "[ 1234.567890]" at the start: seconds since boot. length covers through ']'.
bool parseBracketMonotonic(std::string_view s, int64_t* mono_ns, size_t* length);
// The same as printk writes it, "[%5lu.%06lu]": exactly six fraction digits. Behind a console's
// wall-clock stamp only this form is the kernel's: slurmd writes "[2025-05-19T09:38:16.163]
// [1848523.0] msg", a job step where an uptime would be.
bool parsePrintkUptime(std::string_view s, int64_t* mono_ns, size_t* length);
// A bracketed seconds value at or past this is an epoch time (UCX, glog-style loggers), not uptime.
inline constexpr int64_t kEpochStampNs = 1'000'000'000LL * 1'000'000'000LL;
// Bound of a seconds-since-boot (or bracketed epoch) stamp: 4*10^9 s (126 years of uptime, or an
// epoch stamp up to 2096) keeps its nanoseconds, plus a boot time, inside int64 (tests/fuzz
// found "[10240404040.0]" and kmsg usec 1389609112609112009 overflowing).
inline constexpr uint64_t kMaxStampSeconds = 4'000'000'000ULL;

// The printk caller id a CONFIG_PRINTK_CALLER kernel prints after the time stamp: a thread
// "[T4056360]" or a CPU "[ C3]", right-aligned in brackets ("[    T1]"). Returns its length
// through ']' when `s` starts with one, else 0.
size_t printkCallerLength(std::string_view s);

// A console logger's wall-clock stamp before each line of a node's console log (HPE Cray EX,
// conman): "[2025-07-16T20:42:48+08:00]", "[2025-07-16T20:42:48.123456Z]", "[2025-07-16 20:42:48]".
// ns is UTC when has_zone, else the wall time read as if UTC (the caller applies the node's
// zone); length covers through ']'.
struct WallStamp {
  int64_t ns = 0;
  bool has_zone = false;
  size_t length = 0;
};
bool parseBracketWallStamp(std::string_view s, WallStamp* out);

// dmesg -T "[Fri Aug 30 11:43:09 2024]": wall time read as if UTC (caller applies the offset).
bool parseDmesgCtime(std::string_view s, int64_t* wall_ns, size_t* length);

// dmesg -H / --reltime (util-linux): "[May19 19:57]" opens a minute (no year: the caller's
// default year), "[  +0.000127]" is the time since the previous message.
bool parseDmesgHumanStamp(std::string_view s, int year, int64_t* wall_ns, size_t* length);
bool parseDmesgDelta(std::string_view s, int64_t* delta_ns, size_t* length);

// Fabric Manager "[Mon Jan 01 2024 00:00:00]": wall time read as if UTC.
bool parseFabricManagerStamp(std::string_view s, int64_t* wall_ns, size_t* length);

// /dev/kmsg header "prio,seq,usec,flags[,more];" — length covers through ';'.
struct KmsgHeader {
  int prio = 0;
  uint64_t seq = 0;
  uint64_t usec = 0;
  char flags = '-';
  size_t length = 0;
};
bool parseKmsgHeader(std::string_view line, KmsgHeader* out);

// "host ident[pid]: msg" after a syslog/journal time stamp.
struct SyslogLine {
  int64_t ns = 0;          // UTC when has_zone, else wall time read as if UTC
  bool has_zone = false;
  std::string_view host;
  std::string_view ident;  // empty when the line has no "ident:" part
  std::string_view msg;    // everything after "ident: " (or after host when no ident)
};
// Traditional "Dec  2 11:38:27 host ident[pid]: msg" (year supplied by the caller).
bool parseTraditionalSyslog(std::string_view line, int year, SyslogLine* out);
// "2024-06-01T10:00:01[.123456](+0000|+00:00|Z) host ident[pid]: msg" (journalctl short-iso,
// short-iso-precise, rsyslog RFC 3339). The zone is required, which keeps dmesg --time-format
// iso (comma fraction, no host) and application ISO stamps apart.
bool parseIsoSyslog(std::string_view line, SyslogLine* out);

// dmesg --time-format iso: "2025-01-21T04:41:44,283302+00:00 " (comma fraction, zone). On
// success *length covers the stamp and the one space after it.
bool parseDmesgIsoStamp(std::string_view s, int64_t* utc_ns, size_t* length);

// "-- Boot 5f1c... --", "-- Logs begin at ... --", "-- No entries --", "-- Reboot --", ...
bool isJournalMarker(std::string_view line);

// grep's file-name prefix ("grep -H", a search of several files or "grep -r"): "FILE:" before a
// matched line, "FILE-" before a context line (-A/-B/-C), with -n "FILE:12:" / "FILE-12-".
// Returns the prefix's length (separators included) when `line` starts with a file-name token
// (no blanks, at least one letter) and its ':' separator with a non-blank after it, else 0. Only
// the ':' form is found here; a context line's '-' form is recognised by the name learned from a
// matched line (grepContextPrefix).
size_t grepFilePrefix(std::string_view line);
// The prefix of `line` when it is `name` followed by grep's ':' or '-' separator (and an optional
// line number with the same separator), else 0.
size_t grepNamedPrefix(std::string_view line, std::string_view name);

}  // namespace faultline::common::parse

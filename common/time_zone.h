// Node-local wall-clock time to UTC: a fixed offset, or the rules of a tz database zone.
//
// Syslog, `dmesg -T`, Fabric Manager, BMC event logs and many rank logs write local time without
// a zone. A fixed offset is wrong for half the year wherever daylight saving applies, so a node's
// zone can be given by name ("Europe/Berlin"); its rules come from the zone's TZif file
// (RFC 8536, the files in /usr/share/zoneinfo), including the POSIX TZ footer that governs times
// after the last listed transition. Pure: the caller reads the file and passes its bytes in.
// A TimeZone is an immutable value, safe to share between threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace faultline::common {

class TimeZone {
 public:
  // A fixed offset east of UTC (local = UTC + offset). `name` is what reports show.
  static TimeZone fixed(int offset_sec, std::string name = "");
  // Parses a TZif file (versions 1-4). On bad data returns nullopt and sets *error.
  static std::optional<TimeZone> fromTzif(std::string_view bytes, std::string name, std::string* error);
  // Parses a POSIX TZ string ("CET-1CEST,M3.5.0,M10.5.0/3", "<+0530>-5:30", "EST5EDT").
  static std::optional<TimeZone> fromPosix(std::string_view tz, std::string name = "");

  // Offset east of UTC in effect at the UTC instant `utc_ns`.
  int offsetAtUtc(int64_t utc_ns) const;
  // UTC ns of a local wall-clock time given as ns "read as if UTC". A time that occurs twice
  // (the hour after a fall-back) takes the first occurrence; a time skipped by a spring-forward
  // is read with the offset before the gap.
  int64_t utcFromLocal(int64_t local_ns) const;
  // "Europe/Berlin", "+02:00" ...
  const std::string& name() const { return name_; }
  bool isFixed() const { return transitions_.empty() && !rule_; }
  // "+02:00" style rendering of an offset.
  static std::string formatOffset(int offset_sec);

 private:
  struct PosixRule {
    int std_offset = 0;  // east of UTC
    int dst_offset = 0;
    bool has_dst = false;
    // Rule kinds: 'M' (month.week.day), 'J' (Julian 1..365, no Feb 29), 'N' (0..365).
    struct When {
      char kind = 'M';
      int month = 0, week = 0, day = 0;  // for 'M'; day is the weekday (0 = Sunday)
      int yday = 0;                      // for 'J' / 'N'
      int time_sec = 7200;               // local time of the change
    } start, end;
    int offsetAt(int64_t utc_sec) const;
  };
  static std::optional<PosixRule> parsePosix(std::string_view tz);

  std::string name_;
  int initial_offset_ = 0;                 // before the first transition (or fixed)
  std::vector<int64_t> transitions_;       // UTC seconds, ascending
  std::vector<int> offsets_;               // offset in effect from transitions_[i]
  std::optional<PosixRule> rule_;          // after the last transition
};

}  // namespace faultline::common

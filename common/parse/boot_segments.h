// Where the newest boot begins in a file of boot-relative stamps ("[ 1234.567890] msg", dmesg's
// raw format) that was appended to across reboots.
//
// Stamps count from each boot, so in `dmesg -w >> FILE` kept across reboots a new boot shows as
// a stamp that falls back (more than kFallBackNs below the largest stamp since the last
// fall-back). A second dump of the same boot (`dmesg >> FILE` run twice) falls back the same
// way; it is told apart from a reboot by content: a later dump of one boot still holds the last
// line of the earlier dump (same stamp, same text) unless the kernel's ring buffer overwrote it
// in between, while a line of another boot matching both is not a thing that happens.
//
// So the lines fall into segments (runs between fall-backs); the last segment is the newest
// boot; the segments just before it whose last line appears in it are dumps of the same boot.
// newestBootStart() is where the first of those begins: the lines before it are of earlier
// boots, and a boot time of the newest boot does not place them.
//
// Two passes, so a file need not be held in memory: scan() every line, then confirm() the lines
// from lastSegmentStart() on (needed only when hasFallBack()). Pure; lines are given without
// their '\n'; a line without a stamp (a continuation, another format) is ignored.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace faultline::common::parse {

class BootSegments {
 public:
  // A fall-back of at most this much is the jitter of printk stamps taken on different CPUs.
  static constexpr int64_t kFallBackNs = 1'000'000'000;

  // Pass 1: each line in file order, with the byte offset where it starts.
  void scan(std::string_view line, uint64_t offset);
  bool hasFallBack() const { return segments_.size() > 1; }
  // Pass 2: the lines from here to the end of what was scanned.
  uint64_t lastSegmentStart() const { return segments_.empty() ? 0 : segments_.back().start; }
  void confirm(std::string_view line);
  // Offset from which the lines are of the newest boot (the first scanned offset when the
  // stamps never fall back, or nothing was scanned).
  uint64_t newestBootStart() const;

 private:
  struct Segment {
    uint64_t start = 0;
    int64_t max_ns = -1;
    uint64_t last_key = 0;   // stamp and text of the segment's last stamped line
    bool same_boot = false;  // its last line was found in the last segment
  };
  std::vector<Segment> segments_;
  uint64_t first_offset_ = 0;
  bool any_ = false;
};

// Both passes over a buffer held whole.
uint64_t newestBootStart(std::string_view content);

}  // namespace faultline::common::parse

#include "common/parse/boot_segments.h"

#include <functional>
#include <optional>

#include "common/parse/line_grammar.h"

namespace faultline::common::parse {
namespace {

struct Stamped {
  int64_t mono_ns = 0;
  uint64_t key = 0;  // the stamp and the message's text
};

// The stamp of a dmesg raw line, behind an optional "<6>" priority or --decode prefix.
std::optional<Stamped> stampOf(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  DecodePrefix decode;
  if (parseDecodePrefix(line, &decode)) {
    line.remove_prefix(decode.length);
  } else if (line.size() > 3 && line[0] == '<') {
    const size_t close = line.find('>');
    if (close != std::string_view::npos && close < 6) line.remove_prefix(close + 1);
  }
  Stamped s;
  size_t length = 0;
  if (!parseBracketMonotonic(line, &s.mono_ns, &length)) return std::nullopt;
  line.remove_prefix(length);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
  s.key = std::hash<std::string_view>{}(line) * 1'000'003u ^ static_cast<uint64_t>(s.mono_ns);
  return s;
}

}  // namespace

void BootSegments::scan(std::string_view line, uint64_t offset) {
  if (!any_) {
    any_ = true;
    first_offset_ = offset;
  }
  auto s = stampOf(line);
  if (!s) return;
  if (segments_.empty() || s->mono_ns + kFallBackNs < segments_.back().max_ns)
    segments_.push_back(Segment{segments_.empty() ? first_offset_ : offset});
  Segment& seg = segments_.back();
  if (s->mono_ns > seg.max_ns) seg.max_ns = s->mono_ns;
  seg.last_key = s->key;
}

void BootSegments::confirm(std::string_view line) {
  if (segments_.size() < 2) return;
  auto s = stampOf(line);
  if (!s) return;
  for (size_t i = 0; i + 1 < segments_.size(); ++i)
    if (segments_[i].last_key == s->key) segments_[i].same_boot = true;
}

uint64_t BootSegments::newestBootStart() const {
  if (segments_.empty()) return first_offset_;
  size_t first = segments_.size() - 1;
  while (first > 0 && segments_[first - 1].same_boot) --first;
  return segments_[first].start;
}

uint64_t newestBootStart(std::string_view content) {
  BootSegments segments;
  auto eachLine = [&content](uint64_t from, auto&& fn) {
    for (size_t pos = from; pos < content.size();) {
      size_t nl = content.find('\n', pos);
      size_t end = nl == std::string_view::npos ? content.size() : nl;
      fn(content.substr(pos, end - pos), pos);
      pos = end + 1;
    }
  };
  eachLine(0, [&](std::string_view line, uint64_t offset) { segments.scan(line, offset); });
  if (segments.hasFallBack())
    eachLine(segments.lastSegmentStart(), [&](std::string_view line, uint64_t) { segments.confirm(line); });
  return segments.newestBootStart();
}

}  // namespace faultline::common::parse

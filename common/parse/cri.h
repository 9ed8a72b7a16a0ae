// The CRI container log format that containerd and CRI-O write under /var/log/pods (the kubelet's
// CRI logging design): one line per write, "TIME STREAM TAGS TEXT", TIME RFC 3339 with
// nanoseconds in UTC, STREAM stdout|stderr, TAGS "F" (a full line) or "P" (a partial line: the
// runtime split a long line; the pieces up to the next F line of the same stream are one line),
// optionally followed by ":"-separated further tags.
//
// The parser (makeStreamParser(LogFormat::kCriLog, ...)) joins partial lines per stream and
// reads each whole line as the application parser reads `kubectl logs --timestamps` output:
// rank and launcher prefixes, Python tracebacks joined, the CRI stamp as the record's time.
// Pure; no I/O; one parser per stream; not thread-safe; never throws. A line that is not CRI is
// counted malformed; a partial line still pending when the stream ends is emitted (truncated).
#pragma once

#include <cstdint>
#include <string_view>

#include "common/parse/stream_parser.h"

namespace faultline::common::parse {

struct CriLine {
  int64_t time_ns = 0;     // UTC
  bool is_stderr = false;  // else stdout
  bool partial = false;    // tag P
  std::string_view stamp;  // the TIME field as written
  std::string_view text;   // everything after "TAGS " (may be empty)
};

// Parses one CRI line (without its '\n'). False when the line is not CRI.
bool parseCriLine(std::string_view line, CriLine* out);

std::unique_ptr<StreamParser> makeCriParser(ParseOptions options, RecordSink sink);

// For a reader that checkpoints at line boundaries (the agent's file source): the number of bytes
// at the end of `lines` (complete lines) that belong to a line still being written, from the
// first P piece of a stream that no F piece of the same stream follows. The reader keeps them
// back like a partial line, so that a flush between the pieces cannot cut the line in two.
size_t criPendingTail(std::string_view lines);

}  // namespace faultline::common::parse

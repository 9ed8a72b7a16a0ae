// Helpers for the parser tests: run a whole input through a parser in fixed-size chunks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/parse/stream_parser.h"

namespace faultline::common::testing {

struct ParseResult {
  std::vector<LogRecord> records;
  ParseReport report;
};

inline ParseResult parseAll(LogFormat format, std::string_view input, ParseOptions options = {},
                            size_t chunk = 0) {
  ParseResult result;
  auto parser = makeStreamParser(format, std::move(options),
                                 [&](LogRecord&& r) { result.records.push_back(std::move(r)); });
  if (chunk == 0) chunk = input.size() == 0 ? 1 : input.size();
  for (size_t pos = 0; pos < input.size(); pos += chunk) parser->feed(input.substr(pos, chunk));
  parser->finish();
  result.report = parser->report();
  return result;
}

// Every physical line is either part of a record or skipped; lines joined into a record are
// counted by the number of '\n' in its text (true for all formats but kmsg dictionaries and
// journal export entries, whose tests check counts directly).
inline uint64_t lineCountOf(const std::vector<LogRecord>& records) {
  uint64_t n = 0;
  for (const auto& r : records) {
    n += 1;
    for (char c : r.text) n += c == '\n';
  }
  return n;
}

inline constexpr int64_t kSec = 1'000'000'000;

}  // namespace faultline::common::testing

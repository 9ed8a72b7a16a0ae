// Reads binary journal files (*.journal) with sd-journal and hands each entry to a callback as
// a LogRecord (through recordFromJournalFields, the same conversion as -o json / -o export).
// Blocking, single-threaded. Errors (unreadable or corrupt files) are returned, never thrown.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "common/log_record.h"

namespace faultline::common {

struct JournalReadResult {
  uint64_t entries = 0;
  uint64_t skipped = 0;  // entries without MESSAGE or that failed to read
  std::string error;     // empty on success
};

JournalReadResult readJournalFiles(const std::vector<std::string>& paths,
                                   const std::function<void(LogRecord&&)>& sink);

// True when the first bytes are a journal file header ("LPKSHHRH").
bool isJournalFileHeader(std::string_view head);

}  // namespace faultline::common

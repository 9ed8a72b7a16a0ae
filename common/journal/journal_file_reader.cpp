#include "common/journal/journal_file_reader.h"

#include <systemd/sd-journal.h>

#include <cstring>
#include <map>

#include "common/parse/stream_parser.h"

namespace faultline::common {

bool isJournalFileHeader(std::string_view head) { return head.substr(0, 8) == "LPKSHHRH"; }

JournalReadResult readJournalFiles(const std::vector<std::string>& paths,
                                   const std::function<void(LogRecord&&)>& sink) {
  JournalReadResult result;
  std::vector<const char*> cpaths;
  for (const auto& p : paths) cpaths.push_back(p.c_str());
  cpaths.push_back(nullptr);
  sd_journal* j = nullptr;
  int r = sd_journal_open_files(&j, cpaths.data(), 0);
  if (r < 0) {
    result.error = std::string("sd_journal_open_files: ") + std::strerror(-r);
    return result;
  }
  sd_journal_set_data_threshold(j, 64 << 10);
  std::map<std::string, std::string> fields;
  while (true) {
    r = sd_journal_next(j);
    if (r < 0) {
      result.error = std::string("sd_journal_next: ") + std::strerror(-r);
      break;
    }
    if (r == 0) break;
    fields.clear();
    const void* data;
    size_t len;
    SD_JOURNAL_FOREACH_DATA(j, data, len) {
      std::string_view kv(static_cast<const char*>(data), len);
      auto eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      fields.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    uint64_t usec = 0;
    if (sd_journal_get_realtime_usec(j, &usec) >= 0) fields["__REALTIME_TIMESTAMP"] = std::to_string(usec);
    sd_id128_t boot;
    if (sd_journal_get_monotonic_usec(j, &usec, &boot) >= 0) {
      fields["__MONOTONIC_TIMESTAMP"] = std::to_string(usec);
      char buf[SD_ID128_STRING_MAX];
      fields.emplace("_BOOT_ID", sd_id128_to_string(boot, buf));
    }
    auto rec = recordFromJournalFields(fields);
    if (!rec) {
      ++result.skipped;
      continue;
    }
    ++result.entries;
    rec->line = result.entries;
    sink(std::move(*rec));
  }
  sd_journal_close(j);
  return result;
}

}  // namespace faultline::common

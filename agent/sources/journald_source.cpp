#include "agent/sources/journald_source.h"

#include <systemd/sd-journal.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstring>
#include <ctime>
#include <map>

#include "common/parse/stream_parser.h"

namespace faultline::agent {

namespace {
std::string errnoText(const char* what, int r) { return std::string(what) + ": " + std::strerror(-r); }
}  // namespace

JournaldSource::JournaldSource(boost::asio::io_context& io, JournaldOptions options)
    : io_(io), options_(std::move(options)), fd_(io) {
  health_.name = name_;
  health_.format = std::string(common::formatName(common::LogFormat::kJournalBinary));
}

JournaldSource::~JournaldSource() { stop(); }

void JournaldSource::fail(const std::string& why) {
  health_.status = "error";
  health_.reason = why;
}

void JournaldSource::start(const std::string& checkpoint, RecordHandler handler) {
  handler_ = std::move(handler);
  stopped_ = false;
  int r;
  if (!options_.files.empty()) {
    std::vector<const char*> paths;
    for (const auto& f : options_.files) paths.push_back(f.c_str());
    paths.push_back(nullptr);
    r = sd_journal_open_files(&j_, paths.data(), 0);
  } else if (!options_.directory.empty()) {
    r = sd_journal_open_directory(&j_, options_.directory.c_str(), 0);
  } else {
    r = sd_journal_open(&j_, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
  }
  if (r < 0) {
    j_ = nullptr;
    fail(errnoText("sd_journal_open", r));
    return;
  }
  sd_journal_set_data_threshold(j_, 64 << 10);
  bool positioned = false;
  if (!checkpoint.empty() && sd_journal_seek_cursor(j_, checkpoint.c_str()) >= 0) {
    // The next sd_journal_next() lands ON the cursor's entry when it still exists (delivered:
    // skip it), or on the first entry after it when it was vacuumed (not delivered: step back so
    // the next read returns it).
    r = sd_journal_next(j_);
    if (r > 0 && sd_journal_test_cursor(j_, checkpoint.c_str()) <= 0) sd_journal_previous(j_);
    cursor_ = checkpoint;
    positioned = true;
  }
  if (!positioned) {
    if (options_.from_head) {
      sd_journal_seek_head(j_);
    } else {
      sd_journal_seek_tail(j_);
      sd_journal_previous(j_);  // after seek_tail, next() would otherwise skip nothing reliably
      char* c = nullptr;
      if (sd_journal_get_cursor(j_, &c) >= 0) {
        cursor_ = c;
        free(c);
      }
    }
  }
  int fd = sd_journal_get_fd(j_);
  if (fd < 0) {
    fail(errnoText("sd_journal_get_fd", fd));
  } else {
    boost::system::error_code ec;
    fd_.assign(fd, ec);
    if (ec) fail("journal fd: " + ec.message());
  }
  poll();
  arm();
}

void JournaldSource::stop() {
  stopped_ = true;
  if (fd_.is_open()) {
    boost::system::error_code ec;
    fd_.cancel(ec);
    fd_.release();  // sd_journal_close() closes it
  }
  if (j_) {
    sd_journal_close(j_);
    j_ = nullptr;
  }
}

void JournaldSource::arm() {
  if (stopped_ || waiting_ || !fd_.is_open()) return;
  waiting_ = true;
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 whileAlive([this](const boost::system::error_code& ec) {
                   waiting_ = false;
                   if (ec || stopped_) return;
                   sd_journal_process(j_);  // acknowledges the inotify events, notes rotation
                   onReadable();
                 }));
}

void JournaldSource::onReadable() {
  if (stopped_) return;
  if (poll()) boost::asio::post(io_, whileAlive([this] { onReadable(); }));
  else arm();
}

bool JournaldSource::poll() {
  if (!j_) return false;
  std::map<std::string, std::string> fields;
  for (size_t n = 0; n < options_.max_entries_per_slice; ++n) {
    int r = sd_journal_next(j_);
    if (r < 0) {
      fail(errnoText("sd_journal_next", r));
      return false;
    }
    if (r == 0) return false;
    char* c = nullptr;
    if (sd_journal_get_cursor(j_, &c) >= 0) {
      cursor_ = c;
      free(c);
    }
    fields.clear();
    const void* data;
    size_t len;
    SD_JOURNAL_FOREACH_DATA(j_, data, len) {
      std::string_view kv(static_cast<const char*>(data), len);
      auto eq = kv.find('=');
      if (eq == std::string_view::npos) continue;
      fields.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
    }
    bool kernel = fields["_TRANSPORT"] == "kernel";
    if (kernel && !options_.include_kernel) continue;
    auto unit = fields.find("_SYSTEMD_UNIT");
    if (unit != fields.end() && std::find(options_.skip_units.begin(), options_.skip_units.end(),
                                          unit->second) != options_.skip_units.end())
      continue;
    uint64_t usec = 0;
    if (sd_journal_get_realtime_usec(j_, &usec) >= 0) fields["__REALTIME_TIMESTAMP"] = std::to_string(usec);
    sd_id128_t boot;
    uint64_t mono = 0;
    if (sd_journal_get_monotonic_usec(j_, &mono, &boot) >= 0) {
      fields["__MONOTONIC_TIMESTAMP"] = std::to_string(mono);
      char buf[SD_ID128_STRING_MAX];
      fields.emplace("_BOOT_ID", sd_id128_to_string(boot, buf));
    }
    auto rec = common::recordFromJournalFields(fields);
    if (!rec) {
      ++health_.skipped;
      continue;
    }
    if (usec > 0) {
      timespec ts{};
      clock_gettime(CLOCK_REALTIME, &ts);
      health_.lag_ns = std::max<int64_t>(
          0, (static_cast<int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1000 - static_cast<int64_t>(usec)) * 1000);
    }
    ++health_.records;
    rec->line = health_.records;
    handler_(std::move(*rec), kernel ? common::SourceKind::kKernel : common::SourceKind::kJournal);
  }
  return true;
}

}  // namespace faultline::agent

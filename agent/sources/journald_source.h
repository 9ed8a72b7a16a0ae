// The systemd journal through libsystemd's sd-journal.
//
// Follows the local system journal, a directory (--journal-dir) or explicit files
// (--journal-file, tests), woken by sd_journal_get_fd() on the io_context. The checkpoint is the
// sd-journal cursor of the last entry delivered; on start the reader seeks to it and skips that
// entry (if it was vacuumed away, reading goes on from the next entry that exists). Journal file
// rotation and vacuum are handled by sd-journal itself (sd_journal_process → INVALIDATE).
// Entries of the agent's own unit are skipped; kernel-transport entries are delivered only when
// the journal is the configured carrier of the kernel log (otherwise kmsg carries it).
// Single-threaded (io_context thread). Handlers must not outlive the object: stop the
// io_context before destroying a running source.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <vector>

#include "agent/sources/source.h"

struct sd_journal;

namespace faultline::agent {

struct JournaldOptions {
  std::string directory;                 // sd_journal_open_directory when set
  std::vector<std::string> files;        // sd_journal_open_files when set (wins over directory)
  bool from_head = false;                // without a cursor: read from the start (else: new only)
  bool include_kernel = false;           // deliver _TRANSPORT=kernel entries
  std::vector<std::string> skip_units = {"faultline-agent.service"};
  size_t max_entries_per_slice = 2048;
};

class JournaldSource final : public Source {
 public:
  JournaldSource(boost::asio::io_context& io, JournaldOptions options);
  ~JournaldSource() override;

  const std::string& name() const override { return name_; }
  void start(const std::string& checkpoint, RecordHandler handler) override;
  void stop() override;
  bool poll() override;
  void flush() override {}
  std::string checkpoint() const override { return cursor_; }
  SourceHealth health() const override { return health_; }

 private:
  void arm();
  void onReadable();
  void fail(const std::string& why);

  boost::asio::io_context& io_;
  JournaldOptions options_;
  std::string name_ = "journal";
  sd_journal* j_ = nullptr;
  boost::asio::posix::stream_descriptor fd_;  // owned by sd-journal: released, never closed
  RecordHandler handler_;
  SourceHealth health_;
  std::string cursor_;
  bool waiting_ = false;
  bool stopped_ = true;
};

}  // namespace faultline::agent

// A text log file followed like `tail -F`: the Fabric Manager log or an application log.
//
// Bytes are split into complete lines here and fed to the format's common::StreamParser; a
// partial last line waits for its newline (or for rotation, when it is final). The checkpoint is
// "<dev> <inode> <offset>" with offset at a line boundary. Rotation is detected by rename (the
// path names another inode: the rest of the old file is read first, then the new one from 0) and
// by truncation (copytruncate: size below the offset, restart at 0). On restart with a checkpoint
// whose inode is no longer at the path, the rotated file is looked up by inode in the same
// directory and its remainder is read first. Lines over max_line_bytes are dropped (counted),
// never buffered whole. Woken by inotify on the parent directory plus a slow fallback poll.
// Single-threaded (io_context thread); stop the io_context before destroying a started source.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/sources/source.h"
#include "common/parse/stream_parser.h"

namespace faultline::agent {

struct FileOptions {
  std::string path;
  common::LogFormat format = common::LogFormat::kUnknown;  // kUnknown: detect from the head
  bool from_start = false;     // without a checkpoint: read the existing content (else: new only)
  common::ParseOptions parse;  // utc_offset_sec for Fabric Manager's local time, line limits
  size_t max_bytes_per_slice = 1 << 20;
  int fallback_poll_ms = 10'000;  // 0: inotify only
  // After an inotify event, wait this long before reading, so a writer's many small appends are
  // read in one wakeup instead of one each (the agent's CPU is mostly per-wakeup cost at
  // 1,000 lines/s). 0: read at once. Symptoms wait seconds in the aggregation window anyway.
  int read_delay_ms = 0;
  // While reads keep finding new bytes (a writer appending steadily), the next is due this long
  // (at least read_delay_ms) after the last, on the timer alone: no inotify wakeups, and one
  // wakeup per half second instead of ten at 1,000 lines/s. A read that finds nothing goes back
  // to waiting for inotify, so a lone line still waits only read_delay_ms.
  int steady_read_delay_ms = 500;
  // The node's uptime now (default: CLOCK_BOOTTIME), for boot-relative stamps (dmesg raw): each
  // parser made takes it (plus a minute's slack) as parse.uptime_ns, so a record of an earlier
  // boot found in the file is not placed in this one. Only when parse.boot_time_ns is set.
  std::function<int64_t()> uptime_ns;
};

// Regular files matching any of the glob(3) patterns, sorted, without duplicates. Blocking
// (directory reads); a pattern that matches nothing contributes nothing.
std::vector<std::string> expandFileGlobs(const std::vector<std::string>& patterns);

class FileSource final : public Source {
 public:
  FileSource(boost::asio::io_context& io, FileOptions options);
  ~FileSource() override;

  const std::string& name() const override { return options_.path; }
  void start(const std::string& checkpoint, RecordHandler handler) override;
  void stop() override;
  bool poll() override;
  void flush() override;
  std::string checkpoint() const override;
  SourceHealth health() const override;
  void useLiterals(std::shared_ptr<const common::LiteralScanner> literals) override;
  void useErrorWords(std::shared_ptr<const common::LiteralScanner> words) override;
  // Waiting for inotify, no read due (a writer stopped; for tests).
  bool idle() const { return inotify_waiting_; }

 private:
  struct Open {
    int fd = -1;
    uint64_t dev = 0, ino = 0;
    uint64_t offset = 0;  // bytes read from fd
  };
  bool openPath(uint64_t offset);
  void closeFile();
  // Reads up to `budget` bytes from the open file; returns bytes read (0 at EOF).
  size_t readSome(size_t budget);
  void feedLines(std::string_view bytes);
  void feedParser(std::string_view lines);  // complete lines; a CRI line's pending pieces wait in partial_
  void endOfFile();  // the open file is final: flush its partial line and the parser
  void makeParser();
  // A boot-relative file (dmesg raw) opened with content from before this boot: where this
  // boot's lines begin (common/parse/boot_segments.h; everything when the file was last written
  // before the boot). The lines before are fed with in_earlier_boot_ set, and their records are
  // left out like those whose stamps lie past the uptime.
  void findThisBoot();
  uint64_t this_boot_from_ = 0;
  bool in_earlier_boot_ = false;
  uint64_t earlier_boot_ = 0;  // records of an earlier boot, left out (counted in skipped)
  int64_t uptimeNow() const;
  void ensureParser();  // detects the format from the head when needed
  // poll(); `quick`: after reading some bytes, skip the rotation and truncation checks (a
  // caller that reads again soon does them once a read finds nothing).
  bool pollFile(bool quick);
  void armInotify();
  void drainInotify();
  void onInotify();
  void armDelay(int ms);
  void onDelay();
  void armTimer();
  void onWake();

  boost::asio::io_context& io_;
  FileOptions options_;
  common::LogFormat format_;
  RecordHandler handler_;
  SourceHealth health_;
  Open file_;
  std::string partial_;         // bytes after the last '\n'
  bool discarding_ = false;     // inside an over-long line: drop bytes up to the next '\n'
  bool parser_dirty_ = false;
  std::unique_ptr<common::StreamParser> parser_;
  uint64_t parser_skipped_base_ = 0;
  uint64_t parser_records_base_ = 0;  // records of the parsers before the current one
  boost::asio::posix::stream_descriptor inotify_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer delay_timer_;
  char inotify_buf_[4096];
  uint64_t bytes_read_ = 0;  // from any file, ever
  bool inotify_waiting_ = false;
  bool stopped_ = true;
};

}  // namespace faultline::agent

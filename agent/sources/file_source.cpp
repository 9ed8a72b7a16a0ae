#include "agent/sources/file_source.h"

#include <dirent.h>
#include <glob.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "common/parse/boot_segments.h"
#include "common/parse/cri.h"

namespace faultline::agent {

namespace {

std::string parentDir(const std::string& path) {
  auto p = std::filesystem::path(path).parent_path().string();
  return p.empty() ? "." : p;
}

// Finds the file in `dir` with this (dev, inode): where a rotated log went.
std::string findByInode(const std::string& dir, uint64_t dev, uint64_t ino) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return "";
  std::string found;
  while (dirent* e = ::readdir(d)) {
    if (e->d_ino != ino) continue;
    std::string p = dir + "/" + e->d_name;
    struct stat st{};
    if (::stat(p.c_str(), &st) == 0 && st.st_dev == dev && st.st_ino == ino && S_ISREG(st.st_mode)) {
      found = p;
      break;
    }
  }
  ::closedir(d);
  return found;
}

}  // namespace

std::vector<std::string> expandFileGlobs(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const auto& pattern : patterns) {
    glob_t g{};
    if (::glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        struct stat st{};
        if (::stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode)) out.emplace_back(g.gl_pathv[i]);
      }
    }
    globfree(&g);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

int64_t FileSource::uptimeNow() const {
  if (options_.uptime_ns) return options_.uptime_ns();
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

FileSource::FileSource(boost::asio::io_context& io, FileOptions options)
    : io_(io), options_(std::move(options)), format_(options_.format), inotify_(io), timer_(io),
      delay_timer_(io) {
  health_.name = options_.path;
}

FileSource::~FileSource() {
  stop();
  closeFile();
}

void FileSource::makeParser() {
  if (parser_) {
    parser_skipped_base_ += parser_->report().skipped;
    parser_records_base_ += parser_->report().records;
  }
  // A boot-relative stamp beyond the uptime (with a minute's slack) is of an earlier boot.
  if (options_.parse.boot_time_ns && !options_.parse.uptime_ns)
    options_.parse.uptime_ns = [this] { return uptimeNow() + 60'000'000'000; };
  // Records are counted by the parser: with literals only those holding one reach the handler.
  parser_ = common::makeStreamParser(format_, options_.parse, [this](common::LogRecord&& r) {
    if (in_earlier_boot_) {  // read before this boot's first line: of an earlier boot
      ++earlier_boot_;
      ++health_.skipped;
      return;
    }
    if (!r.time_known && r.monotonic_ns >= 0 && options_.parse.boot_time_ns) {
      // A boot-relative stamp the boot time could not place: of an earlier boot. Shipped, it
      // would be placed by when it was read and join whatever job runs now; it is counted and
      // reported instead (its boot's jobs were judged without it).
      ++earlier_boot_;
      ++health_.skipped;
      return;
    }
    handler_(std::move(r), common::sourceKindOf(format_));
  });
  parser_dirty_ = false;
}

void FileSource::closeFile() {
  if (file_.fd >= 0) ::close(file_.fd);
  file_ = Open{};
}

bool FileSource::openPath(uint64_t offset) {
  int fd = ::open(options_.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    health_.status = "error";
    health_.reason = options_.path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st{};
  ::fstat(fd, &st);
  closeFile();
  file_.fd = fd;
  file_.dev = st.st_dev;
  file_.ino = st.st_ino;
  file_.offset = std::min<uint64_t>(offset, static_cast<uint64_t>(st.st_size));
  ensureParser();
  findThisBoot();
  health_.status = "ok";
  health_.reason.clear();
  return true;
}

void FileSource::start(const std::string& checkpoint, RecordHandler handler) {
  handler_ = std::move(handler);
  stopped_ = false;
  uint64_t dev = 0, ino = 0, offset = 0;
  bool have_cp = std::sscanf(checkpoint.c_str(), "%lu %lu %lu", &dev, &ino, &offset) == 3;
  struct stat st{};
  bool exists = ::stat(options_.path.c_str(), &st) == 0;
  if (have_cp && exists && (st.st_dev != dev || st.st_ino != ino)) {
    // Rotated while we were down: finish the old file first when it is still around.
    std::string old = findByInode(parentDir(options_.path), dev, ino);
    if (!old.empty()) {
      int fd = ::open(old.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        file_ = Open{fd, dev, ino, offset};
        ensureParser();
        findThisBoot();
        while (readSome(options_.max_bytes_per_slice) > 0) {
        }
        endOfFile();
        closeFile();
      }
    }
    offset = 0;
  } else if (have_cp && exists) {
    if (static_cast<uint64_t>(st.st_size) < offset) offset = 0;  // truncated while we were down
  } else if (exists) {
    offset = options_.from_start ? 0 : static_cast<uint64_t>(st.st_size);
  }
  if (exists) openPath(offset);
  else {
    health_.status = "error";
    health_.reason = options_.path + ": " + std::strerror(ENOENT);
  }
  armInotify();
  armTimer();
  boost::asio::post(io_, whileAlive([this] { onWake(); }));
}

void FileSource::stop() {
  stopped_ = true;
  boost::system::error_code ec;
  timer_.cancel();
  delay_timer_.cancel();
  if (inotify_.is_open()) inotify_.close(ec);
}

void FileSource::armInotify() {
  if (!inotify_.is_open()) {
    int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) return;  // the fallback timer still polls
    if (::inotify_add_watch(fd, parentDir(options_.path).c_str(),
                            IN_MODIFY | IN_CREATE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
      ::close(fd);
      return;
    }
    boost::system::error_code ec;
    inotify_.assign(fd, ec);
    if (ec) return;
  }
  inotify_waiting_ = true;
  inotify_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                      whileAlive([this](const boost::system::error_code& ec) {
                        inotify_waiting_ = false;
                        if (ec || stopped_) return;
                        if (options_.read_delay_ms <= 0) {
                          onInotify();
                          return;
                        }
                        // Not re-armed until the delay is over: the writes meanwhile cost no
                        // wakeup (the kernel queues and merges their events).
                        armDelay(options_.read_delay_ms);
                      }));
}

void FileSource::drainInotify() {
  // Any event in the directory means "look again"; which file is decided by stat, not by the
  // event. Events after this are still queued, so none is lost.
  if (!inotify_.is_open()) return;
  while (::read(inotify_.native_handle(), inotify_buf_, sizeof inotify_buf_) > 0) {
  }
}

void FileSource::onInotify() {
  drainInotify();
  onWake();
  armInotify();
}

void FileSource::armDelay(int ms) {
  delay_timer_.expires_after(std::chrono::milliseconds(ms));
  delay_timer_.async_wait(whileAlive([this](const boost::system::error_code& e) {
    if (e || stopped_) return;
    onDelay();
  }));
}

void FileSource::onDelay() {
  // While a writer keeps appending, the next read is simply due steady_read_delay_ms later: one
  // timer wakeup per read. The inotify queue is left as it is meanwhile: the kernel merges a file's repeated
  // modify events into the one queued, so the writes cost no wakeup either.
  const uint64_t before = bytes_read_;
  for (int pass = 0; pass < 2; ++pass) {
    if (pollFile(/*quick=*/pass == 0)) {  // more than a slice: go on at once
      boost::asio::post(io_, whileAlive([this] {
        if (!stopped_) onDelay();
      }));
      return;
    }
    if (bytes_read_ != before) {
      armDelay(std::max(options_.read_delay_ms, options_.steady_read_delay_ms));
      return;
    }
    // Nothing new (and rotation, truncation checked): back to waiting for inotify. Its queue is
    // emptied first and the file read once more after that, so a write in between is not missed.
    if (pass == 0) drainInotify();
  }
  armInotify();
}

void FileSource::armTimer() {
  if (options_.fallback_poll_ms <= 0 || stopped_) return;
  timer_.expires_after(std::chrono::milliseconds(options_.fallback_poll_ms));
  timer_.async_wait(whileAlive([this](const boost::system::error_code& ec) {
    if (ec || stopped_) return;
    onWake();
    armTimer();
  }));
}

void FileSource::onWake() {
  if (stopped_) return;
  if (poll()) boost::asio::post(io_, whileAlive([this] { onWake(); }));
}

size_t FileSource::readSome(size_t budget) {
  if (file_.fd < 0 || !parser_) return 0;
  char buf[64 << 10];
  size_t total = 0;
  while (total < budget) {
    ssize_t n = ::pread(file_.fd, buf, sizeof buf, static_cast<off_t>(file_.offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      health_.status = "error";
      health_.reason = options_.path + ": read: " + std::strerror(errno);
      break;
    }
    if (n == 0) break;
    std::string_view got(buf, static_cast<size_t>(n));
    if (file_.offset < this_boot_from_) {
      // Up to this boot's first line: an earlier boot's. The parser is finished at the boundary
      // (a line start), so no record joins lines of two boots.
      const auto earlier = static_cast<size_t>(std::min<uint64_t>(got.size(), this_boot_from_ - file_.offset));
      in_earlier_boot_ = true;
      feedLines(got.substr(0, earlier));
      got.remove_prefix(earlier);
      if (file_.offset + earlier == this_boot_from_) {
        parser_->finish();
        makeParser();
        in_earlier_boot_ = false;
      }
    }
    file_.offset += static_cast<uint64_t>(n);
    bytes_read_ += static_cast<uint64_t>(n);
    total += static_cast<size_t>(n);
    feedLines(got);
    if (static_cast<size_t>(n) < sizeof buf) break;  // the end, as of now: no second read to learn it
  }
  return total;
}

void FileSource::feedLines(std::string_view bytes) {
  if (!parser_) return;
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (discarding_) {
      if (nl == std::string_view::npos) return;
      discarding_ = false;
      bytes.remove_prefix(nl + 1);
      continue;
    }
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() > options_.parse.max_line_bytes) {
        ++health_.skipped;  // an over-long line is dropped, never buffered whole
        partial_.clear();
        discarding_ = true;
      }
      return;
    }
    if (!partial_.empty()) {
      partial_.append(bytes.substr(0, nl + 1));
      std::string lines;
      lines.swap(partial_);
      if (lines.size() > options_.parse.max_line_bytes + 1) ++health_.skipped;
      else feedParser(lines);
      bytes.remove_prefix(nl + 1);
    } else {
      // Feed every complete line at once.
      size_t last = bytes.rfind('\n');
      feedParser(bytes.substr(0, last + 1));
      bytes.remove_prefix(last + 1);
    }
    parser_dirty_ = true;
  }
}

void FileSource::feedParser(std::string_view lines) {
  // A CRI log's line split by the runtime is complete with its F piece: until then its pieces wait
  // like a partial line (the checkpoint stays before them, a flush does not cut the line).
  if (format_ == common::LogFormat::kCriLog) {
    const size_t held = common::parse::criPendingTail(lines);
    partial_.assign(lines.substr(lines.size() - held));
    lines.remove_suffix(held);
  }
  parser_->feed(lines);
}

void FileSource::endOfFile() {
  if (!parser_) return;
  if (!partial_.empty() && !discarding_) parser_->feed(partial_);  // a final line without '\n'
  partial_.clear();
  discarding_ = false;
  parser_->finish();
  makeParser();
}

void FileSource::flush() {
  if (parser_ && parser_dirty_) {
    parser_->finish();
    makeParser();
  }
}

void FileSource::findThisBoot() {
  this_boot_from_ = 0;
  in_earlier_boot_ = false;
  if (format_ != common::LogFormat::kDmesgRaw || !options_.parse.boot_time_ns || file_.fd < 0) return;
  struct stat st{};
  if (::fstat(file_.fd, &st) != 0) return;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (file_.offset >= size) return;
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  if (mtime_ns < *options_.parse.boot_time_ns) {  // last written before this boot
    this_boot_from_ = size;
    return;
  }
  // Each line of [from, size) with its offset; a line's first 64 KiB stand for it.
  auto eachLine = [&](uint64_t from, auto&& fn) {
    std::string line;
    uint64_t line_start = from;
    char buf[64 << 10];
    for (uint64_t off = from; off < size;) {
      ssize_t n = ::pread(file_.fd, buf, std::min<uint64_t>(sizeof buf, size - off), static_cast<off_t>(off));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (std::string_view rest(buf, static_cast<size_t>(n)); !rest.empty();) {
        const size_t nl = rest.find('\n');
        const std::string_view part = rest.substr(0, nl);
        if (line.size() < sizeof buf) line.append(part.substr(0, sizeof buf - line.size()));
        if (nl == std::string_view::npos) break;
        fn(std::string_view(line), line_start);
        line.clear();
        line_start = off + static_cast<uint64_t>(rest.data() - buf) + nl + 1;
        rest.remove_prefix(nl + 1);
      }
      off += static_cast<uint64_t>(n);
    }
    if (!line.empty()) fn(std::string_view(line), line_start);
  };
  common::parse::BootSegments segments;
  eachLine(file_.offset, [&](std::string_view line, uint64_t at) { segments.scan(line, at); });
  if (segments.hasFallBack())
    eachLine(segments.lastSegmentStart(), [&](std::string_view line, uint64_t) { segments.confirm(line); });
  this_boot_from_ = segments.newestBootStart();
}

void FileSource::ensureParser() {
  if (parser_ || file_.fd < 0) return;
  if (format_ == common::LogFormat::kUnknown) {
    // Detect from the head of the file; an empty file waits for its first bytes.
    std::string head(64 << 10, '\0');
    ssize_t n = ::pread(file_.fd, head.data(), head.size(), 0);
    if (n <= 0) return;
    head.resize(static_cast<size_t>(n));
    format_ = common::detectFormat(head);
  }
  health_.format = std::string(common::formatName(format_));
  makeParser();
}

SourceHealth FileSource::health() const {
  SourceHealth h = health_;
  if (earlier_boot_ && h.status == "ok")
    h.reason = std::to_string(earlier_boot_) + " record(s) of an earlier boot left out: their time cannot be known";
  h.skipped += parser_skipped_base_ + (parser_ ? parser_->report().skipped : 0);
  h.records += parser_records_base_ + (parser_ ? parser_->report().records : 0);
  return h;
}

void FileSource::useLiterals(std::shared_ptr<const common::LiteralScanner> literals) {
  options_.parse.literals = std::move(literals);  // the next parser (made at every flush) uses them
}

void FileSource::useErrorWords(std::shared_ptr<const common::LiteralScanner> words) {
  options_.parse.error_words = std::move(words);
}

bool FileSource::poll() { return pollFile(/*quick=*/false); }

bool FileSource::pollFile(bool quick) {
  if (file_.fd < 0) {
    struct stat st{};
    if (::stat(options_.path.c_str(), &st) != 0) return false;
    if (!openPath(0)) return false;
  }
  ensureParser();
  if (!parser_) return false;
  size_t n = readSome(options_.max_bytes_per_slice);
  if (n >= options_.max_bytes_per_slice) return true;
  if (quick && n > 0) return false;  // another read follows: that one checks when it finds nothing
  // At EOF of the open file: has the path moved on to another file, or been truncated?
  struct stat st{};
  if (::stat(options_.path.c_str(), &st) != 0) return false;  // renamed away, not yet recreated
  if (static_cast<uint64_t>(st.st_dev) != file_.dev || static_cast<uint64_t>(st.st_ino) != file_.ino) {
    while (readSome(options_.max_bytes_per_slice) > 0) {  // the rest written before the rename
    }
    endOfFile();
    openPath(0);
    return true;
  }
  struct stat fst{};
  if (::fstat(file_.fd, &fst) == 0 && static_cast<uint64_t>(fst.st_size) < file_.offset) {
    endOfFile();  // copytruncate: what was partial before the cut is final
    file_.offset = 0;
    this_boot_from_ = 0;  // written again since: in this boot
    return true;
  }
  return false;
}

std::string FileSource::checkpoint() const {
  if (file_.fd < 0) return "";
  // A line boundary: the partial line (or the over-long one being dropped) is re-read.
  uint64_t off = file_.offset - partial_.size();
  if (discarding_) off = file_.offset;
  return std::to_string(file_.dev) + " " + std::to_string(file_.ino) + " " + std::to_string(off);
}

}  // namespace faultline::agent

#include "agent/sources/kmsg_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>

#include "common/parse/stream_parser.h"

namespace faultline::agent {

KmsgSource::KmsgSource(boost::asio::io_context& io, KmsgOptions options)
    : io_(io), options_(std::move(options)), fd_(io) {
  health_.name = name_;
  health_.format = std::string(common::formatName(common::LogFormat::kKmsg));
}

KmsgSource::~KmsgSource() { stop(); }

void KmsgSource::fail(const std::string& why) {
  health_.status = "error";
  health_.reason = why;
}

void KmsgSource::start(const std::string& checkpoint, RecordHandler handler) {
  handler_ = std::move(handler);
  stopped_ = false;
  if (!checkpoint.empty()) {
    auto sp = checkpoint.find(' ');
    if (sp != std::string::npos && checkpoint.substr(0, sp) == options_.boot_id) {
      char* end = nullptr;
      skip_until_ = std::strtoull(checkpoint.c_str() + sp + 1, &end, 10);
      last_seq_ = skip_until_;
      health_.lost = std::strtoull(end, nullptr, 10);  // "" (older checkpoints): 0
    }
  }
  int fd = ::open(options_.path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    fail(options_.path + ": " + std::strerror(errno));
    return;
  }
  struct stat st{};
  if (::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
    // A FIFO stands in for the device in tests: hold a write end ourselves so the writer going
    // away is not an endless EOF.
    ::close(fd);
    fd = ::open(options_.path.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      fail(options_.path + ": " + std::strerror(errno));
      return;
    }
  }
  boost::system::error_code ec;
  fd_.assign(fd, ec);
  if (ec) {
    ::close(fd);
    fail(options_.path + ": " + ec.message());
    return;
  }
  health_.status = "ok";
  health_.reason.clear();
  poll();
  arm();
}

void KmsgSource::stop() {
  stopped_ = true;
  boost::system::error_code ec;
  if (fd_.is_open()) {
    fd_.cancel(ec);
    fd_.close(ec);
  }
}

void KmsgSource::arm() {
  if (stopped_ || waiting_ || !fd_.is_open()) return;
  waiting_ = true;
  fd_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                 whileAlive([this](const boost::system::error_code& ec) {
                   waiting_ = false;
                   if (ec || stopped_) return;
                   onReadable();
                 }));
}

void KmsgSource::onReadable() {
  if (stopped_) return;
  // More than a slice ready: yield to the other handlers, then continue.
  if (poll()) boost::asio::post(io_, whileAlive([this] { onReadable(); }));
  else arm();
}

bool KmsgSource::poll() {
  if (!fd_.is_open()) return false;
  // /dev/kmsg returns one record per read() and EINVAL for a buffer smaller than the record.
  char buf[8192];
  size_t n_records = 0;
  while (n_records < options_.max_records_per_slice) {
    ssize_t n = ::read(fd_.native_handle(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return false;
      if (errno == EPIPE) {
        // Overwritten before we read them; the sequence gap tells how many.
        health_.status = "partial";
        health_.reason = "kernel ring buffer overrun (EPIPE)";
        continue;
      }
      fail(std::string("read: ") + std::strerror(errno));
      return false;
    }
    if (n == 0) return false;
    pending_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      std::string_view line(pending_.data() + start, nl - start);
      if (line.empty() || line.front() == ' ') continue;  // dictionary lines: not needed
      handleRecord(line);
      ++n_records;
    }
    pending_.erase(0, start);
    if (pending_.size() > sizeof buf * 2) {
      ++health_.skipped;
      pending_.clear();
    }
  }
  return true;
}

void KmsgSource::handleRecord(std::string_view line) {
  auto rec = common::parseKmsgRecord(line);
  if (!rec) {
    ++health_.skipped;
    return;
  }
  if (skip_until_ && rec->seq <= *skip_until_) return;  // delivered before the restart
  skip_until_.reset();
  if (last_seq_ && rec->seq > *last_seq_ + 1) health_.lost += rec->seq - *last_seq_ - 1;
  last_seq_ = rec->seq;
  common::LogRecord out;
  out.monotonic_ns = static_cast<int64_t>(rec->usec) * 1000;
  out.time_ns = options_.boot_time_ns + out.monotonic_ns;
  out.time_known = options_.boot_time_ns > 0;
  out.boot_id = options_.boot_id;
  out.ident = "kernel";
  out.priority = rec->level;
  out.text = std::move(rec->text);
  out.line = rec->seq;
  ++health_.records;
  handler_(std::move(out), common::SourceKind::kKernel);
}

std::string KmsgSource::checkpoint() const {
  if (!last_seq_) return "";
  return options_.boot_id + " " + std::to_string(*last_seq_) + " " + std::to_string(health_.lost);
}

}  // namespace faultline::agent

// The kernel log from /dev/kmsg (or a FIFO standing in for it in tests).
//
// Each record "prio,seq,usec,flags;text" is parsed with common::parseKmsgRecord and stamped in
// UTC through the boot time. The checkpoint is "<boot id> <seq> <lost>": within the same boot
// records up to seq are skipped on restart; a different boot id means a new boot and everything
// in the ring buffer is read. Sequence gaps and EPIPE (ring-buffer overrun) count as lost records;
// `lost` (this boot's count up to seq) is kept in the checkpoint, committed with the symptoms, so
// a restarted agent neither forgets gaps nor counts twice the gaps of records it reads again.
// A checkpoint without it (older agents) reads as 0.
// Single-threaded (io_context thread).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include <optional>

#include "agent/sources/source.h"

namespace faultline::agent {

struct KmsgOptions {
  std::string path = "/dev/kmsg";
  std::string boot_id;        // current boot id (system_info.h)
  int64_t boot_time_ns = 0;   // UTC ns at boot
  size_t max_records_per_slice = 4096;
};

class KmsgSource final : public Source {
 public:
  KmsgSource(boost::asio::io_context& io, KmsgOptions options);
  ~KmsgSource() override;

  const std::string& name() const override { return name_; }
  void start(const std::string& checkpoint, RecordHandler handler) override;
  void stop() override;
  bool poll() override;
  void flush() override {}
  std::string checkpoint() const override;
  SourceHealth health() const override { return health_; }

 private:
  void arm();
  void onReadable();
  void handleRecord(std::string_view record);
  void fail(const std::string& why);

  boost::asio::io_context& io_;
  KmsgOptions options_;
  std::string name_ = "kmsg";
  boost::asio::posix::stream_descriptor fd_;
  RecordHandler handler_;
  SourceHealth health_;
  std::string pending_;               // partial line (FIFO reads are not record-aligned)
  std::optional<uint64_t> skip_until_;  // same boot: records with seq <= this were delivered
  std::optional<uint64_t> last_seq_;
  bool waiting_ = false;
  bool stopped_ = true;
};

}  // namespace faultline::agent

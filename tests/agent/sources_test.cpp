// The three sources against the real things: a FIFO fed kmsg records through the same read path
// as /dev/kmsg, files rotated by rename and by truncation mid-stream, and journal files written
// by systemd-journal-remote read through sd-journal.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "agent/sources/file_source.h"
#include "agent/sources/journald_source.h"
#include "agent/sources/kmsg_source.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

struct Collected {
  std::vector<common::LogRecord> records;
  std::vector<common::SourceKind> kinds;
  RecordHandler handler() {
    return [this](common::LogRecord&& r, common::SourceKind k) {
      records.push_back(std::move(r));
      kinds.push_back(k);
    };
  }
  std::vector<std::string> texts() const {
    std::vector<std::string> t;
    for (const auto& r : records) t.push_back(r.text);
    return t;
  }
};

void writeAll(int fd, const std::string& s) { REQUIRE(::write(fd, s.data(), s.size()) == static_cast<ssize_t>(s.size())); }

void append(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f << s;
}

std::string kmsgRecord(uint64_t seq, const std::string& text) {
  return "3," + std::to_string(seq) + "," + std::to_string(seq * 1000) + ",-;" + text + "\n";
}

}  // namespace

TEST_CASE("kmsg: records from a FIFO, UTC through the boot time, resume by seq, lost on gaps", "[sources][kmsg]") {
  TempDir dir;
  std::string fifo = dir.file("kmsg");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  boost::asio::io_context io;
  KmsgOptions o;
  o.path = fifo;
  o.boot_id = "boot-a";
  o.boot_time_ns = 1'700'000'000'000'000'000;
  Collected got;
  auto src = std::make_unique<KmsgSource>(io, o);
  src->start("", got.handler());
  int w = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(w >= 0);
  // One write per record, as the device returns one record per read; a dictionary line too.
  writeAll(w, kmsgRecord(1, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.") + " SUBSYSTEM=pci\n");
  writeAll(w, kmsgRecord(2, "usb 1-1: new device"));
  writeAll(w, kmsgRecord(5, "after a gap"));  // 3 and 4 overwritten
  writeAll(w, "garbage without header\n");
  REQUIRE(runUntil(io, [&] { return got.records.size() == 3; }));
  CHECK(got.records[0].text == "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
  CHECK(got.records[0].time_ns == o.boot_time_ns + 1'000'000);
  CHECK(got.records[0].time_known);
  CHECK(got.records[0].boot_id == "boot-a");
  CHECK(got.kinds[0] == common::SourceKind::kKernel);
  CHECK(src->health().lost == 2);
  CHECK(src->health().skipped == 1);
  std::string cp = src->checkpoint();
  CHECK(cp == "boot-a 5 2");  // the count lost so far is kept with the position
  src->stop();

  SECTION("same boot: records up to the checkpoint are skipped") {
    Collected again;
    KmsgSource s2(io, o);
    s2.start(cp, again.handler());
    // The ring buffer is read from its start again after a restart.
    for (uint64_t seq : {1, 2, 5, 6}) writeAll(w, kmsgRecord(seq, "r" + std::to_string(seq)));
    REQUIRE(runUntil(io, [&] { return again.records.size() == 1; }));
    CHECK(again.texts() == std::vector<std::string>{"r6"});
    // The gap before the checkpoint is still counted (a restart does not forget it), once.
    CHECK(s2.health().lost == 2);
    CHECK(s2.checkpoint() == "boot-a 6 2");
    s2.stop();
  }
  SECTION("same boot, restarted before the gap was committed: the gap is counted once") {
    Collected again;
    KmsgSource s2(io, o);
    s2.start("boot-a 2 0", again.handler());
    for (uint64_t seq : {1, 2, 5, 6, 9}) writeAll(w, kmsgRecord(seq, "r" + std::to_string(seq)));
    REQUIRE(runUntil(io, [&] { return again.records.size() == 3; }));
    CHECK(s2.health().lost == 4);
    CHECK(s2.checkpoint() == "boot-a 9 4");
    s2.stop();
  }
  SECTION("a checkpoint of an older agent (no count) reads as none lost") {
    Collected again;
    KmsgSource s2(io, o);
    s2.start("boot-a 5", again.handler());
    for (uint64_t seq : {5, 6}) writeAll(w, kmsgRecord(seq, "r" + std::to_string(seq)));
    REQUIRE(runUntil(io, [&] { return again.records.size() == 1; }));
    CHECK(s2.health().lost == 0);
    CHECK(s2.checkpoint() == "boot-a 6 0");
    s2.stop();
  }
  SECTION("a new boot reads everything") {
    Collected again;
    KmsgOptions o2 = o;
    o2.boot_id = "boot-b";
    KmsgSource s2(io, o2);
    s2.start(cp, again.handler());
    for (uint64_t seq : {1, 2}) writeAll(w, kmsgRecord(seq, "r" + std::to_string(seq)));
    REQUIRE(runUntil(io, [&] { return again.records.size() == 2; }));
    CHECK(s2.checkpoint() == "boot-b 2 0");
    CHECK(s2.health().lost == 0);  // a new boot: the old boot's count does not carry over
    s2.stop();
  }
  ::close(w);
}

TEST_CASE("kmsg: an unreadable device is reported, not fatal", "[sources][kmsg]") {
  boost::asio::io_context io;
  KmsgOptions o;
  o.path = "/nonexistent/kmsg";
  KmsgSource s(io, o);
  Collected got;
  s.start("", got.handler());
  CHECK(s.health().status == "error");
  CHECK(s.health().reason.find("No such file") != std::string::npos);
}

TEST_CASE("kmsg: the real /dev/kmsg when readable", "[sources][kmsg][.real]") {
  if (::access("/dev/kmsg", R_OK) != 0) {
    WARN("/dev/kmsg not readable; skipped");
    return;
  }
  boost::asio::io_context io;
  KmsgOptions o;
  o.boot_id = "b";
  KmsgSource s(io, o);
  Collected got;
  s.start("", got.handler());
  CHECK(s.health().status == "ok");
  s.stop();
}

TEST_CASE("file: rotation by rename mid-stream reads the rest of the old file first", "[sources][file]") {
  TempDir dir;
  std::string path = dir.file("fabricmanager.log");
  append(path, "[Sat Jun 01 2024 12:00:01] [INFO] [tid 1] line 1\n[Sat Jun 01 2024 12:00:02] [INFO] [tid 1] line 2\n");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kFabricManager;
  o.from_start = true;
  o.fallback_poll_ms = 0;
  FileSource src(io, o);
  Collected got;
  src.start("", got.handler());
  REQUIRE(runUntil(io, [&] { return got.records.size() == 1; }));  // the last waits for more
  src.flush();
  REQUIRE(got.records.size() == 2);
  CHECK(got.records[0].text == "line 1");
  CHECK(got.records[0].time_known);
  // A partial last line waits for its newline.
  append(path, "[Sat Jun 01 2024 12:00:03] [INFO] [tid 1] line");
  src.poll();
  CHECK(got.records.size() == 2);
  // logrotate: rename, the writer still appends to the old inode, then a new file appears.
  REQUIRE(::rename(path.c_str(), (path + ".1").c_str()) == 0);
  append(path + ".1", " 3\n[Sat Jun 01 2024 12:00:04] [INFO] [tid 1] line 4 (old file)\n");
  append(path, "[Sat Jun 01 2024 12:00:05] [INFO] [tid 1] line 5 (new file)\n");
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.records.size() == 5;
  }));
  CHECK(got.texts() == std::vector<std::string>{"line 1", "line 2", "line 3", "line 4 (old file)", "line 5 (new file)"});
  struct stat st{};
  ::stat(path.c_str(), &st);
  CHECK(src.checkpoint() == std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_size));
  src.stop();
}

TEST_CASE("file: truncation (copytruncate) restarts at 0", "[sources][file]") {
  TempDir dir;
  std::string path = dir.file("app.log");
  append(path, "[Sat Jun 01 2024 12:00:01] [INFO] [tid 1] before 1\n[Sat Jun 01 2024 12:00:02] [INFO] [tid 1] before 2\n");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kFabricManager;
  o.from_start = true;
  o.fallback_poll_ms = 0;
  FileSource src(io, o);
  Collected got;
  src.start("", got.handler());
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.records.size() == 2;
  }));
  REQUIRE(::truncate(path.c_str(), 0) == 0);
  append(path, "[Sat Jun 01 2024 12:00:03] [INFO] [tid 1] after\n");
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.records.size() == 3;
  }));
  CHECK(got.records[2].text == "after");
  src.stop();
}

TEST_CASE("file: resume from a checkpoint, also when the file was rotated while stopped", "[sources][file]") {
  TempDir dir;
  std::string path = dir.file("fm.log");
  auto line = [](int i) { return "[Sat Jun 01 2024 12:00:01] [INFO] [tid 1] n" + std::to_string(i) + "\n"; };
  append(path, line(1) + line(2));
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kFabricManager;
  o.from_start = true;
  o.fallback_poll_ms = 0;
  std::string cp;
  {
    FileSource src(io, o);
    Collected got;
    src.start("", got.handler());
    REQUIRE(runUntil(io, [&] {
      src.flush();
      return got.records.size() == 2;
    }));
    cp = src.checkpoint();
    src.stop();
  }
  SECTION("same file") {
    append(path, line(3));
    FileSource src(io, o);
    Collected got;
    src.start(cp, got.handler());
    REQUIRE(runUntil(io, [&] {
      src.flush();
      return got.records.size() == 1;
    }));
    CHECK(got.records[0].text == "n3");
    src.stop();
  }
  SECTION("rotated while stopped") {
    append(path, line(3));
    REQUIRE(::rename(path.c_str(), (path + ".1").c_str()) == 0);
    append(path, line(4));
    FileSource src(io, o);
    Collected got;
    src.start(cp, got.handler());
    REQUIRE(runUntil(io, [&] {
      src.flush();
      return got.records.size() == 2;
    }));
    CHECK(got.texts() == std::vector<std::string>{"n3", "n4"});
    src.stop();
  }
}

TEST_CASE("file: garbage bytes and a 10 MB line are skipped and counted, good lines still come", "[sources][file]") {
  TempDir dir;
  std::string path = dir.file("fm.log");
  std::string junk(10 << 20, 'A');
  append(path, "[Sat Jun 01 2024 12:00:01] [INFO] [tid 1] good 1\n" + junk + "\n");
  append(path, std::string("\x00\x01\xff\xfe garbage\n", 13));
  append(path, "[Sat Jun 01 2024 12:00:02] [INFO] [tid 1] good 2\n");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kFabricManager;
  o.from_start = true;
  o.fallback_poll_ms = 0;
  FileSource src(io, o);
  Collected got;
  src.start("", got.handler());
  CHECK(runUntil(io, [&] {
    bool more = src.poll();
    src.flush();
    return got.records.size() >= 2 && !more;
  }, std::chrono::seconds(3)));
  CHECK(got.texts() == std::vector<std::string>{"good 1", "good 2"});
  INFO("skipped " << src.health().skipped);
  CHECK(src.health().skipped >= 2);
  CHECK(src.health().status == "ok");
  src.stop();
}

TEST_CASE("file: a missing file is an error in the status until it appears", "[sources][file]") {
  TempDir dir;
  std::string path = dir.file("later.log");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kFabricManager;
  o.fallback_poll_ms = 0;
  FileSource src(io, o);
  Collected got;
  src.start("", got.handler());
  CHECK(src.health().status == "error");
  append(path, "[Sat Jun 01 2024 12:00:01] [INFO] [tid 1] hello\n");
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.records.size() == 1;
  }));
  CHECK(src.health().status == "ok");
  src.stop();
}

TEST_CASE("journald: journal files from systemd-journal-remote, resume from the cursor", "[sources][journald]") {
  TempDir dir;
  std::string jdir = dir.file("journal");
  std::filesystem::create_directories(jdir);
  uint64_t t0 = 1'717'243'200'000'000;  // 2024-06-01T12:00:00Z in usec
  std::string text = journalEntry(t0, "NCCL WARN first", "stdout", "python", "job.service") +
                     journalEntry(t0 + 1, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "kernel", "kernel") +
                     journalEntry(t0 + 2, "agent talking about itself", "stdout", "faultline-agent",
                                  "faultline-agent.service") +
                     journalEntry(t0 + 3, "third", "syslog", "app");
  REQUIRE(makeJournal(text, jdir + "/a.journal"));
  boost::asio::io_context io;
  JournaldOptions o;
  o.directory = jdir;
  o.from_head = true;
  o.include_kernel = true;
  std::string cp;
  {
    JournaldSource src(io, o);
    Collected got;
    src.start("", got.handler());
    REQUIRE(runUntil(io, [&] { return got.records.size() == 3; }));
    CHECK(got.texts() == std::vector<std::string>{"NCCL WARN first",
                                                  "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", "third"});
    CHECK(got.kinds[1] == common::SourceKind::kKernel);
    CHECK(got.kinds[0] == common::SourceKind::kJournal);
    CHECK(got.records[0].time_ns == static_cast<int64_t>(t0) * 1000);
    cp = src.checkpoint();
    CHECK_FALSE(cp.empty());
    src.stop();
  }
  SECTION("without kernel transport (kmsg carries it)") {
    JournaldOptions o2 = o;
    o2.include_kernel = false;
    JournaldSource src(io, o2);
    Collected got;
    src.start("", got.handler());
    REQUIRE(runUntil(io, [&] { return got.records.size() == 2; }));
    CHECK(got.texts() == std::vector<std::string>{"NCCL WARN first", "third"});
    src.stop();
  }
  SECTION("restart from the cursor, then a new journal file appears (rotation)") {
    JournaldSource src(io, o);
    Collected got;
    src.start(cp, got.handler());
    io.restart();
    io.poll();
    CHECK(got.records.empty());
    REQUIRE(makeJournal(journalEntry(t0 + 10, "after rotation"), jdir + "/b.journal"));
    REQUIRE(runUntil(io, [&] {
      src.poll();
      return got.records.size() == 1;
    }));
    CHECK(got.records[0].text == "after rotation");
    src.stop();
  }
}

TEST_CASE("journald: an unreadable journal is reported", "[sources][journald]") {
  boost::asio::io_context io;
  JournaldOptions o;
  o.files = {"/nonexistent/x.journal"};
  JournaldSource src(io, o);
  Collected got;
  src.start("", got.handler());
  CHECK(src.health().status == "error");
}

TEST_CASE("file: a followed dmesg file's boot-relative stamps are placed through the boot time", "[sources][file]") {
  // A record appended to a dmesg file from long before (100 s after boot) is dated 100 s after
  // the boot, not when the agent read it; without a boot time it stays untimed.
  for (bool with_boot : {true, false}) {
    TempDir dir;
    std::string path = dir.file("dmesg");
    append(path, "[    5.000000] Linux version 6.1.0 (gcc)\n");
    boost::asio::io_context io;
    FileOptions o;
    o.path = path;
    o.format = common::LogFormat::kDmesgRaw;
    o.from_start = true;
    o.fallback_poll_ms = 0;
    if (with_boot) o.parse.boot_time_ns = 1'700'000'000'000'000'000;
    FileSource src(io, o);
    Collected got;
    src.start("", got.handler());
    append(path, "[  100.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n");
    src.poll();
    src.flush();
    REQUIRE(got.records.size() == 2);
    CAPTURE(with_boot);
    CHECK(got.records[1].time_known == with_boot);
    if (with_boot) CHECK(got.records[1].time_ns == *o.parse.boot_time_ns + 100'000'000'000);
    CHECK(got.records[1].monotonic_ns == 100'000'000'000);
    src.stop();
  }
}

TEST_CASE("file: an earlier boot's records in a dmesg file are not placed in this boot, even below its uptime",
          "[sources][file]") {
  // The earlier boot crashed at 300 s; this boot is 600 s old, so the uptime bound alone would
  // place its Xid 79 at boot + 300 s, inside whatever job ran then. Where its stamps fall back to
  // 0, a new boot began: only what follows is of this boot (common/parse/boot_segments.h).
  const std::string earlier =
      "[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)\n"
      "[  300.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
      "[  300.000100]  dump_stack_lvl+0x48/0x70\n";
  const std::string now =
      "[    0.000000] Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org)\n"
      "[  550.000000] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\n";
  const int64_t boot_ns = 1'700'000'000'000'000'000;
  boost::asio::io_context io;  // outlives the sources made below
  auto follow = [&](const std::string& path, const std::string& checkpoint, Collected& got) {
    FileOptions o;
    o.path = path;
    o.format = common::LogFormat::kDmesgRaw;
    o.from_start = true;
    o.fallback_poll_ms = 0;
    o.parse.boot_time_ns = boot_ns;
    o.uptime_ns = [] { return int64_t{600'000'000'000}; };
    auto src = std::make_unique<FileSource>(io, o);
    src->start(checkpoint, got.handler());
    src->poll();
    src->flush();
    return src;
  };
  TempDir dir;
  SECTION("read from the start") {
    std::string path = dir.file("dmesg");
    append(path, earlier + now);
    Collected got;
    auto src = follow(path, "", got);
    REQUIRE(got.records.size() == 2);
    CHECK(got.records[0].monotonic_ns == 0);
    CHECK(got.records[1].time_ns == boot_ns + 550'000'000'000);
    CHECK(src->health().reason == "2 record(s) of an earlier boot left out: their time cannot be known");
    // Appended later in this boot: placed.
    append(path, "[  590.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=9, name=python, GPU has fallen off the bus.\n");
    src->poll();
    src->flush();
    REQUIRE(got.records.size() == 3);
    CHECK(got.records[2].time_ns == boot_ns + 590'000'000'000);
    src->stop();
  }
  SECTION("resumed from a checkpoint inside the earlier boot") {
    std::string path = dir.file("dmesg");
    append(path, earlier + now);
    struct stat st{};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    const std::string cp = std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) + " " +
                           std::to_string(earlier.find('\n') + 1);
    Collected got;
    auto src = follow(path, cp, got);
    REQUIRE(got.records.size() == 2);
    CHECK(got.records[1].time_ns == boot_ns + 550'000'000'000);
    CHECK_THAT(src->health().reason, Catch::Contains("1 record(s) of an earlier boot"));
    src->stop();
  }
  SECTION("a file last written before this boot: all of its content is an earlier boot's") {
    // No fall-back to see (the earlier boot's part only), but the file's mtime predates the boot.
    std::string path = dir.file("dmesg");
    append(path, earlier);
    const timespec times[2] = {{1'600'000'000, 0}, {1'600'000'000, 0}};
    REQUIRE(::utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
    Collected got;
    auto src = follow(path, "", got);
    CHECK(got.records.empty());
    CHECK_THAT(src->health().reason, Catch::Contains("2 record(s) of an earlier boot"));
    append(path, now);  // this boot writes on: its lines are placed
    src->poll();
    src->flush();
    REQUIRE(got.records.size() == 2);
    CHECK(got.records[1].time_ns == boot_ns + 550'000'000'000);
    src->stop();
  }
  SECTION("two dumps of this boot (dmesg >> FILE twice) are both placed") {
    std::string path = dir.file("dmesg");
    append(path, now + now + "[  560.000000] nvidia-peermem: module loaded\n");
    Collected got;
    auto src = follow(path, "", got);
    REQUIRE(got.records.size() == 5);
    for (const auto& r : got.records) CHECK(r.time_known);
    CHECK(src->health().reason.empty());
    src->stop();
  }
}

TEST_CASE("file: a dmesg file that outlived a reboot: stamps past this boot's uptime are not placed in it",
          "[sources][file]") {
  // A file appended by `dmesg -w >> FILE` across a reboot, read from the start (or from a
  // checkpoint taken before the reboot): the earlier boot's records carry stamps the current
  // boot has not reached. Shipped untimed they would be placed by their read time, in whatever
  // job runs now: they are left out and counted. This boot's records (from 0 s again) are placed
  // through the boot time. Uptime injected: 600 s.
  TempDir dir;
  std::string path = dir.file("dmesg");
  append(path,
         "[ 86000.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
         "[ 86400.500000] reboot: Restarting system\n"
         "[    0.000000] Linux version 6.1.0 (gcc)\n"
         "[  550.000000] NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error\n");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;
  o.format = common::LogFormat::kDmesgRaw;
  o.from_start = true;
  o.fallback_poll_ms = 0;
  o.parse.boot_time_ns = 1'700'000'000'000'000'000;
  int64_t uptime = 600'000'000'000;
  o.uptime_ns = [&] { return uptime; };
  FileSource src(io, o);
  Collected got;
  src.start("", got.handler());
  src.poll();
  src.flush();
  // 86,000 s and 86,400 s are not of a boot 600 s old: left out, counted, said.
  REQUIRE(got.records.size() == 2);
  CHECK(src.health().skipped == 2);
  CHECK_THAT(src.health().reason, Catch::Contains("2 record(s) of an earlier boot"));
  CHECK(got.records[0].time_known);
  CHECK(got.records[0].monotonic_ns == 0);
  CHECK(got.records[1].time_known);
  CHECK(got.records[1].time_ns == *o.parse.boot_time_ns + 550'000'000'000);
  // A record written later in this boot (uptime 2 h by then) is placed: the bound is taken anew.
  uptime = 7'200'000'000'000;
  append(path, "[ 7000.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=77, name=python, GPU has fallen off the bus.\n");
  src.poll();
  src.flush();
  REQUIRE(got.records.size() == 3);
  CHECK(got.records[2].time_known);
  CHECK(got.records[2].time_ns == *o.parse.boot_time_ns + 7'000'000'000'000);
  src.stop();
}

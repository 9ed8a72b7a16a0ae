// Bundles built at test time: a real binary journal (systemd-journal-remote), garbage, an
// oversized line, a truncated file and a node without logs.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>

#include "aggregator/offline/attribute.h"
#include "aggregator/offline/bundle.h"
#include "common/rule_set.h"

using namespace faultline;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "faultline-bundle-XXXXXX").string();
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << content;
}

const common::RuleEngine& engine() {
  static auto rules = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"}).rules;
  static common::RuleEngine e(rules);
  return e;
}

const char* kJob = R"({"job_id": "9", "state": "FAILED", "exit_code": "1:0",
  "start_time": "2024-06-01T10:00:00Z", "end_time": "2024-06-01T11:00:00Z", "nodelist": "n[1-3]"})";

}  // namespace

TEST_CASE("a binary journal file is read through sd-journal", "[bundle][journal]") {
  const char* remote = "/lib/systemd/systemd-journal-remote";
  if (access(remote, X_OK) != 0) {
    FAIL("systemd-journal-remote missing: scripts/install-deps.sh installs it");
  }
  TempDir t;
  write(t.path / "job.json", kJob);
  // Journal export format: entries separated by blank lines; 2024-06-01T10:20:00Z = 1717237200.
  std::string exp;
  auto entry = [&](int64_t sec, const std::string& ident, const std::string& msg) {
    exp += "__REALTIME_TIMESTAMP=" + std::to_string(sec * 1000000) + "\n";
    exp += "__MONOTONIC_TIMESTAMP=" + std::to_string((sec - 1717230000) * 1000000) + "\n";
    exp += "_BOOT_ID=0f1e2d3c4b5a69788796a5b4c3d2e1f0\n_HOSTNAME=n1\n_TRANSPORT=kernel\nPRIORITY=3\n";
    exp += "SYSLOG_IDENTIFIER=" + ident + "\nMESSAGE=" + msg + "\n\n";
  };
  entry(1717237100, "kernel", "nvidia-nvswitch: probe of 0000:05:00.0 ok");
  entry(1717237200, "kernel", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.");
  entry(1717237300, "systemd", "Started Session 4 of User alice.");
  write(t.path / "in.export", exp);
  fs::create_directories(t.path / "nodes" / "n1");
  std::string cmd = std::string(remote) + " --output=" + (t.path / "nodes/n1/system.journal").string() + " - < " +
                    (t.path / "in.export").string() + " 2>/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  fs::remove(t.path / "in.export");
  REQUIRE(fs::file_size(t.path / "nodes/n1/system.journal") > 0);

  std::string error;
  auto d = offline::attributeBundle(t.path.string(), engine(), &error);
  INFO(error);
  REQUIRE(d);
  CHECK(d->sub_domain == common::SubDomain::kHardware);
  REQUIRE(d->cause);
  CHECK(d->cause->rule_id == "xid.79");
  CHECK(d->cause->node == "n1");
  CHECK(d->cause->device == "0000:3b:00.0");
  CHECK(common::formatTimeNs(d->cause->time_ns) == "2024-06-01T10:20:00.000Z");
  bool journal_seen = false;
  for (const auto& c : d->coverage)
    if (c.format == "journal-file") {
      journal_seen = true;
      CHECK(c.records == 3);
      CHECK(c.status == "ok");
    }
  CHECK(journal_seen);
}

TEST_CASE("garbage, oversized and truncated files are reported and lose nothing around them", "[bundle]") {
  TempDir t;
  write(t.path / "job.json", kJob);
  std::mt19937 rng(1);
  std::string garbage(200000, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng());
  write(t.path / "nodes/n1/core.bin", garbage);
  // A dmesg with a 10 MB line in the middle, binary junk, and no final newline.
  std::string dmesg = "[  100.000000] Linux version 5.15.0-91-generic (buildd@lcy02) #101-Ubuntu SMP\n";
  dmesg += "[  200.000000] " + std::string(10 << 20, 'x') + "\n";
  dmesg += std::string("\x01\x02\x00\xff\xfe junk\n", 11);
  dmesg += "[ 1500.000000] NVRM: Xid (PCI:0000:5d:00): 48, pid=77, name=python, DBE (double bit error) ECC error\n";
  dmesg += "[ 1600.000000] NVRM: Xid (PCI:0000:5d:00): 45, pid=77, name=python, Ch 00000010";
  write(t.path / "nodes/n2/dmesg.txt", dmesg);
  write(t.path / "nodes/n2/node.json", R"({"boot_time": "2024-06-01T09:50:00Z",
      "gpus": [{"index": 5, "pci_bus_id": "00000000:5D:00.0", "uuid": "GPU-abc"}]})");
  std::string error;
  auto d = offline::attributeBundle(t.path.string(), engine(), &error);
  INFO(error);
  REQUIRE(d);
  CHECK(d->sub_domain == common::SubDomain::kHardware);
  REQUIRE(d->cause);
  CHECK(d->cause->rule_id == "xid.48");
  CHECK(d->cause->node == "n2");
  // The GPU inventory names the GPU behind the Xid's PCI bus id.
  CHECK(d->cause->fields["gpu_index"] == "5");
  CHECK(d->cause->fields["gpu_uuid"] == "GPU-abc");
  CHECK(d->cause->fields["xid"] == "48");
  // 09:50:00 + 1500 s
  CHECK(common::formatTimeNs(d->cause->time_ns) == "2024-06-01T10:15:00.000Z");
  std::map<std::string, common::CoverageEntry> cov;
  for (const auto& c : d->coverage) cov[c.node + ":" + fs::path(c.source).filename().string()] = c;
  REQUIRE(cov.count("n2:dmesg.txt"));
  const auto& dm = cov["n2:dmesg.txt"];
  CHECK(dm.records == 3);
  CHECK(dm.skipped >= 2);
  CHECK(dm.status == "partial");
  CHECK(dm.reason.find("oversized") != std::string::npos);
  CHECK(dm.reason.find("truncated") != std::string::npos);
  REQUIRE(cov.count("n1:core.bin"));
  CHECK(cov["n1:core.bin"].status != "ok");
  REQUIRE(cov.count("n3:"));
  CHECK(cov["n3:"].status == "missing");
  // The teardown Xid 45 stays in the chain as teardown.
  bool teardown = false;
  for (const auto& e : d->chain) teardown |= e.rule_id == "xid.45" && e.role == common::Role::kTeardown;
  CHECK(teardown);
}

TEST_CASE("a bundle without a job description is an error, not a verdict", "[bundle]") {
  TempDir t;
  write(t.path / "nodes/n1/dmesg.txt", "[ 1.0] hello\n");
  std::string error;
  CHECK(!offline::attributeBundle(t.path.string(), engine(), &error));
  CHECK(error.find("no job.json") != std::string::npos);
  write(t.path / "job.json", "{\"state\": ");
  CHECK(!offline::attributeBundle(t.path.string(), engine(), &error));
  CHECK(error.find("job.json") != std::string::npos);
}

TEST_CASE("node-local stamps are placed through the node's zone, else the job's, and coverage says which",
          "[bundle][time]") {
  TempDir t;
  write(t.path / "job.json", R"({"job_id": "9", "state": "FAILED", "exit_code": "1:0",
    "start_time": "2024-06-01T12:00:00+02:00", "end_time": "2024-06-01T13:00:00+02:00", "nodelist": "n[1-4]"})");
  // dmesg -T writes local wall-clock time without a zone.
  auto xid = [](const char* stamp, const char* bus) {
    return fmt::format("[{}] NVRM: Xid (PCI:0000:{}:00): 79, pid=1, name=python, GPU has fallen off the bus.\n",
                       stamp, bus);
  };
  // n1: a tz database name, in summer: CEST = +02:00.
  write(t.path / "nodes/n1/node.json", R"({"timezone": "Europe/Berlin"})");
  write(t.path / "nodes/n1/dmesg-T.txt", xid("Sat Jun  1 12:15:00 2024", "1a"));
  // n2: utc_offset in hours.
  write(t.path / "nodes/n2/node.json", R"({"utc_offset": -5})");
  write(t.path / "nodes/n2/dmesg-T.txt", xid("Sat Jun  1 05:20:00 2024", "2a"));
  // n3: nothing about its zone: the job's own offset (+02:00 in start_time) is used.
  write(t.path / "nodes/n3/dmesg-T.txt", xid("Sat Jun  1 12:25:00 2024", "3a"));
  // n4: a zone that does not exist is reported; the node's logs are still read (job's zone).
  write(t.path / "nodes/n4/node.json", R"({"timezone": "Mars/Olympus_Mons"})");
  write(t.path / "nodes/n4/dmesg-T.txt", xid("Sat Jun  1 12:30:00 2024", "4a"));
  std::string error;
  auto b = offline::loadBundle(t.path.string(), engine(), &error);
  INFO(error);
  REQUIRE(b);
  std::map<std::string, std::string> when;
  for (const auto& s : b->symptoms)
    if (s.rule_id == "xid.79") when[s.node] = common::formatTimeNs(s.first_ns);
  if (fs::exists("/usr/share/zoneinfo/Europe/Berlin")) CHECK(when["n1"] == "2024-06-01T10:15:00.000Z");
  CHECK(when["n2"] == "2024-06-01T10:20:00.000Z");
  CHECK(when["n3"] == "2024-06-01T10:25:00.000Z");
  CHECK(when["n4"] == "2024-06-01T10:30:00.000Z");
  std::map<std::string, common::CoverageEntry> cov;
  for (const auto& c : b->coverage) cov[c.node + ":" + fs::path(c.source).filename().string()] = c;
  if (fs::exists("/usr/share/zoneinfo/Europe/Berlin"))
    CHECK(cov["n1:dmesg-T.txt"].clock == "Europe/Berlin (node.json timezone)");
  CHECK(cov["n2:dmesg-T.txt"].clock == "-05:00 (node.json utc_offset)");
  CHECK(cov["n3:dmesg-T.txt"].clock == "+02:00 (job's zone from job.json)");
  CHECK(cov["n4:node.json"].status == "error");
  CHECK(cov["n4:node.json"].reason.find("Mars/Olympus_Mons") != std::string::npos);
  CHECK(cov["n4:dmesg-T.txt"].clock == "+02:00 (job's zone from job.json)");

  // Without any zone, UTC is assumed, and the coverage entry says so.
  write(t.path / "job.json", kJob);
  b = offline::loadBundle(t.path.string(), engine(), &error);
  REQUIRE(b);
  for (const auto& c : b->coverage)
    if (c.node == "n3" && fs::path(c.source).filename() == "dmesg-T.txt")
      CHECK(c.clock == "+00:00 (no zone in node.json or job.json: UTC assumed)");
}

TEST_CASE("node.json \"gpus\" gives the node's GPU count, only when the key is there", "[bundle]") {
  TempDir t;
  write(t.path / "job.json", kJob);
  write(t.path / "nodes/n1/node.json", R"({"gpus": [{"index": 0, "pci_bus_id": "00000000:3B:00.0"},
    {"index": 1, "pci_bus_id": "00000000:5E:00.0"}, "not an object, still a GPU listed"]})");
  write(t.path / "nodes/n2/node.json", R"({"gpus": []})");
  write(t.path / "nodes/n3/node.json", R"({"ip": "10.0.0.3"})");
  for (const char* n : {"n1", "n2", "n3"}) write(t.path / "nodes" / n / "dmesg.txt", "[ 1.0] hello\n");
  std::string error;
  auto b = offline::loadBundle(t.path.string(), engine(), &error);
  REQUIRE(b);
  CHECK(b->nodes["n1"].gpu_count == 3);
  CHECK(b->nodes["n1"].gpus.size() == 2);  // the usable entries
  CHECK(b->nodes["n2"].gpu_count == 0);
  CHECK_FALSE(b->nodes["n3"].gpu_count);
  CHECK(b->nodes["n3"].addresses == std::vector<std::string>{"10.0.0.3"});
}

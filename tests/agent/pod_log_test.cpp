// A container's CRI log followed like the kubelet writes it: the pod path's metadata, partial
// lines joined across writes, and the runtime's rotation (N.log renamed to N.log.<stamp>, a new
// N.log) read without losing or repeating a line.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "agent/pod_log_path.h"
#include "agent/sources/file_source.h"
#include "tests/agent/test_util.h"

using namespace faultline;
using namespace faultline::agent;
using namespace faultline::agent::testing;

namespace {

void podLogAppend(const std::string& path, const std::string& s) {
  std::ofstream f(path, std::ios::app | std::ios::binary);
  f << s;
}

}  // namespace

TEST_CASE("pod log path: namespace, pod, uid, container and restart from the kubelet's layout",
          "[pod_log]") {
  auto p = parsePodLogPath(
      "/var/log/pods/ml_train-workers-0-3-x7k2p_5f1c7e02-8d0b-4a8f-9a57-1b9c2d3e4f50/trainer/"
      "2.log");
  REQUIRE(p);
  CHECK(p->ns == "ml");
  CHECK(p->pod == "train-workers-0-3-x7k2p");
  CHECK(p->uid == "5f1c7e02-8d0b-4a8f-9a57-1b9c2d3e4f50");
  CHECK(p->container == "trainer");
  CHECK(p->restart == 2);
  CHECK_FALSE(p->rotated);
  auto fields = podLogFields(*p);
  CHECK(fields["pod"] == "train-workers-0-3-x7k2p");
  CHECK(fields["namespace"] == "ml");
  CHECK(fields["container"] == "trainer");
  CHECK(fields["restart"] == "2");
  // Rotated by the container runtime; pod names may hold dots.
  p = parsePodLogPath(
      "/var/log/pods/kube-system_nvidia-device-plugin-daemonset-7x2kq_0e1f/"
      "nvidia-device-plugin-ctr/0.log.20240601-101500");
  REQUIRE(p);
  CHECK(p->rotated);
  CHECK(p->restart == 0);
  CHECK(parsePodLogPath("/srv/pods/ns_web.1_u1/c/0.log")->pod == "web.1");
  // Not a pod log: other folders, a folder without three parts, upper case, no .log.
  CHECK_FALSE(parsePodLogPath("/var/log/fabricmanager.log"));
  CHECK_FALSE(parsePodLogPath("/var/log/pods/ml_train/trainer/0.log"));
  CHECK_FALSE(parsePodLogPath("/var/log/pods/ml_a_b_c/trainer/0.log"));
  CHECK_FALSE(parsePodLogPath("/var/log/pods/ML_train_u1/trainer/0.log"));
  CHECK_FALSE(parsePodLogPath("/var/log/pods/ml_train_u1/trainer/0.txt"));
  CHECK_FALSE(parsePodLogPath("/var/log/containers/train_ml_trainer-abc.log"));
}

TEST_CASE("file: a CRI pod log, partial lines across writes and the runtime's rotation",
          "[sources][file][pod_log]") {
  TempDir dir;
  const std::string folder = dir.file("pods/ml_train-0_u1/trainer");
  std::filesystem::create_directories(folder);
  const std::string path = folder + "/0.log";
  podLogAppend(path,
               "2024-06-01T10:00:00.000000001Z stdout F [rank0]: step 1\n"
               "2024-06-01T10:00:01.000000001Z stderr P [rank0]: RuntimeError: CUDA error: an "
               "illegal mem\n");
  boost::asio::io_context io;
  FileOptions o;
  o.path = path;  // format detected from the head: CRI
  o.from_start = true;
  o.fallback_poll_ms = 0;
  FileSource src(io, o);
  std::vector<common::LogRecord> got;
  std::vector<common::SourceKind> kinds;
  src.start("", [&](common::LogRecord&& r, common::SourceKind k) {
    got.push_back(std::move(r));
    kinds.push_back(k);
  });
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.size() == 1;
  }));
  CHECK(got[0].text == "step 1");
  CHECK(src.health().format == "cri");
  // The rest of the partial line arrives in a later write.
  podLogAppend(path, "2024-06-01T10:00:01.000000002Z stderr F ory access was encountered\n");
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.size() == 2;
  }));
  CHECK(got[1].text == "RuntimeError: CUDA error: an illegal memory access was encountered");
  CHECK(got[1].rank == 0);
  CHECK(got[1].time_known);
  CHECK(kinds[1] == common::SourceKind::kApplication);
  // containerd rotates: 0.log -> 0.log.<stamp>, the writer finishes the old file, a new 0.log.
  REQUIRE(::rename(path.c_str(), (path + ".20240601-100002").c_str()) == 0);
  podLogAppend(path + ".20240601-100002",
               "2024-06-01T10:00:02.000000001Z stdout F [rank0]: old file's last line\n");
  podLogAppend(path, "2024-06-01T10:00:03.000000001Z stdout F [rank0]: new file's first line\n");
  REQUIRE(runUntil(io, [&] {
    src.flush();
    return got.size() == 4;
  }));
  CHECK(got[2].text == "old file's last line");
  CHECK(got[3].text == "new file's first line");
  src.poll();
  src.flush();
  CHECK(got.size() == 4);  // nothing read twice
  src.stop();
}

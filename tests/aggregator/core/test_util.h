// Helpers shared by the aggregator core tests: temp dirs, synthetic batches, polling waits.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <functional>
#include <string>
#include <thread>

#include "common/wire.h"

namespace faultline::aggregator::testing {

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "faultline-agg-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline constexpr int64_t kT0 = 1'717'236'000'000'000'000;  // 2024-06-01T10:00:00Z
inline constexpr int64_t kSec = 1'000'000'000;

inline common::Symptom makeSymptom(const std::string& node, const std::string& rule, int64_t t_ns,
                                   common::SubDomain sd = common::SubDomain::kHardware,
                                   common::Role role = common::Role::kRoot, const std::string& device = "") {
  common::Symptom s;
  s.rule_id = rule;
  s.symptom = rule;
  s.sub_domain = sd;
  s.category = "test";
  s.role = role;
  s.severity = common::Severity::kCritical;
  s.node = node;
  s.device = device;
  s.source = "kmsg";
  s.source_kind = common::SourceKind::kKernel;
  s.first_ns = s.last_ns = t_ns;
  s.time_known = true;
  s.evidence = {"evidence for " + rule};
  s.summary = rule + " on " + node;
  return s;
}

inline common::SymptomBatchData makeBatch(const std::string& node, uint64_t seq, std::vector<common::Symptom> symptoms,
                                          const std::string& boot = "boot-1") {
  common::SymptomBatchData b;
  b.header.agent_id = "agent-" + node;
  b.header.hostname = node;
  b.header.boot_id = boot;
  b.header.sequence = seq;
  b.header.agent_version = "test";
  b.header.ruleset_version = "rules-test";
  b.symptoms = std::move(symptoms);
  return b;
}

// Polls `pred` until it holds or `timeout` passes (no fixed sleeps: a short yield between polls).
inline bool waitFor(const std::function<bool()>& pred, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::yield();
  }
  return pred();
}

// Like waitFor, for a predicate on another process' state (a file it writes, its database): there
// is no event to wait on, so the polls are 25 ms apart.
inline bool pollUntil(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    ::poll(nullptr, 0, 25);
  }
  return pred();
}

// A whole file's text; "" when it cannot be read.
inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A child process (fork/exec by the test) SIGKILLed and reaped when the object dies.
struct Child {
  pid_t pid = -1;
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
};

}  // namespace faultline::aggregator::testing

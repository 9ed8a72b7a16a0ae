// Shared by the libFuzzer targets (tests/fuzz): the real rules (loaded once per process), a
// failure that names the broken property, and a scratch directory per process.
#pragma once

#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "common/rule_set.h"

namespace faultline::fuzz {

// A property the target checks does not hold: print why and abort (libFuzzer saves the input).
[[noreturn]] inline void fail(const char* format, ...) {
  std::va_list args;
  va_start(args, format);
  std::fputs("fuzz: ", stderr);
  std::vfprintf(stderr, format, args);
  std::fputc('\n', stderr);
  va_end(args);
  std::abort();
}

inline std::string_view bytes(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// The repository's rules/ (what the agent and the aggregator load).
inline const std::shared_ptr<const common::RuleSet>& realRules() {
  static const std::shared_ptr<const common::RuleSet> rules = [] {
    auto loaded = common::loadRuleDirs({FAULTLINE_SOURCE_DIR "/rules"});
    if (!loaded.rules) fail("rules/ does not load: %s", loaded.errors.empty() ? "?" : loaded.errors[0].c_str());
    return loaded.rules;
  }();
  return rules;
}

// A directory of this process's own, removed at exit. The path is never destroyed: the exit
// handler registered while it is built runs after a function-local static's destructor would
// have (handlers and destructors run in reverse order of registration), and found it gone.
inline const std::filesystem::path& scratchDir() {
  static const std::filesystem::path& dir = *new std::filesystem::path([] {
    // TMPDIR when set; else /dev/shm, memory-backed where it exists: a target's files are small and
    // their durability is not what it tests, while SQLite's ~20 fdatasync calls per input on a disk
    // made the spool replay's 2,000 mutants take minutes.
    const char* tmp = std::getenv("TMPDIR");
    std::filesystem::path base = tmp && *tmp ? tmp : "/tmp";
    if (!(tmp && *tmp) && ::access("/dev/shm", W_OK | X_OK) == 0) base = "/dev/shm";
    auto d = base / ("faultline-fuzz-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratchDir(), ec);
    });
    return d;
  }());
  return dir;
}

// Deterministic small numbers from the input (chunk sizes, choices) that leave the input whole,
// so a fixture used as a seed is read as the format it is.
inline uint64_t hashOf(std::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace faultline::fuzz

// Periodic `sacct --json` poll: runs a configurable command, reads every job in its output and
// merges them into the store. Blocking (waits for the command); run it from its own thread or
// a timer that tolerates a few seconds. Never throws; failures come back in PollResult.
#pragma once

#include <string>
#include <vector>

#include "aggregator/store/store.h"

namespace faultline::aggregator {

struct SacctPollerOptions {
  // Run with /bin/sh -c. Tests point it at a fake script printing real sacct JSON.
  std::string command = "sacct --json --allusers --starttime=now-2hours";
  size_t max_output_bytes = 256 << 20;
};

struct PollResult {
  bool ok = false;
  size_t jobs = 0;                  // jobs merged
  std::vector<std::string> errors;  // command failure, unreadable output, bad jobs
};

class SacctPoller {
 public:
  explicit SacctPoller(SacctPollerOptions options) : options_(std::move(options)) {}
  PollResult pollOnce(Store& store);

 private:
  SacctPollerOptions options_;
};

// Runs `command` with /bin/sh -c, returns its stdout (up to max_bytes) and exit status.
struct CommandOutput {
  std::string out;
  int status = -1;  // exit code, or 128+signal, or -1 when it could not run
  bool truncated = false;
};
CommandOutput runCommand(const std::string& command, size_t max_bytes);

// Merges every job of sacct JSON text (file import or poll output); returns jobs merged.
size_t importSacct(Store& store, std::string_view text, const std::string& source, std::vector<std::string>* errors);

}  // namespace faultline::aggregator

// The error lexicon (common/error_lexicon.h): the rules' own error-level example lines say yes
// (raw and masked), benign INFO lines say no, and the negations hold.
#include <catch2/catch.hpp>

#include <sstream>

#include "common/error_lexicon.h"
#include "common/rule_set.h"
#include "common/template_mask.h"

using namespace faultline::common;

TEST_CASE("error lexicon: words, phrases and exit values", "[templates][lexicon]") {
  for (const char* line : {
           "RuntimeError: CUDA error: an illegal memory access was encountered",
           "FATAL: NVSwitch fatal error detected",
           "srun: error: gpu-h01: task 3: Exited with exit code 1",
           "process exited with exit status <NUM>",
           "llama runner process has terminated: exit status 0xc0000409",
           "Traceback (most recent call last):",
           "python[<PID>]: segfault at <HEX> ip <HEX>",
           "Segmentation fault (core dumped)",
           "Out of memory: Killed process <PID> (python)",
           "connect() failed: Connection refused",
           "NET/IB : Got completion from peer with error 12",
           // A zero that starts an index pair (GPU 0, MIG 3) is not a count: the line reads as the
           // masked "error: <NUM>:<NUM>" does.
           "nvidia-container-cli: device error: 0:3: unknown device: unknown",
           "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=<NUM>)",
           "ran for <NUM> milliseconds before timing out",
           "nfs: server <HOST> not responding, still trying",
           "open(<PATH>) = -1 No such file or directory",
           "write: Broken pipe",
           "Permission denied (publickey)",
           "cannot allocate memory",
           "Could not find a suitable TLS CA certificate bundle",
           "unable to open shared object",
           "invalid device ordinal",
           "data corruption detected",
           "kernel: BUG: soft lockup - CPU#<NUM> stuck for <NUM>s!",
           "terminate called after throwing an instance of 'c10::Error'",
           "Task <NUM> killed by signal 9",
           "PANIC: GSP hung",
           "NCCL WARN Call to ibv_modify_qp failed with 110 Connection timed out",
           "mlx5_core <PCI>: mlx<NUM>_<NUM>: Link down",
           "No space left on device",
           "Aborted",
           "ValueError: too many values to unpack",
           "CUDA_ERROR_INVALID_VALUE",
           "cudaErrorNoDevice",
           "Reason: OOMKilled",
           "job <NUM> completed with slurm_rc = 0, job_rc = <NUM>",
           "We currently do not have sufficient p<NUM>.xlarge capacity in the Availability Zone you requested",
           "There is no domain decomposition for <NUM> ranks that is compatible with the",
       }) {
    INFO(line);
    CHECK(carriesErrorLexicon(line));
  }
}

TEST_CASE("error lexicon: benign lines and negations say no", "[templates][lexicon]") {
  for (const char* line : {
           "NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
           "NCCL INFO comm 0x5581 rank 0 nranks 16 cudaDev 0 busId 1b000 - Init COMPLETE",
           "Started Session 3 of User root.",
           "Accepted publickey for root from 10.0.0.5 port 52144 ssh2",
           "epoch 3 step 1200 loss 2.3141 lr 3e-4",
           "[rank0]: Saving checkpoint to /ckpt/step_1200",
           "slurmd: launching batch job 4242 for UID 1000",
           "mlx5_core 0000:3b:00.0: Port module event: module 0, Cable plugged",
           "systemd[1]: Starting Daily apt download activities...",
           "job 4242 completed, exit code 0",
           "process exited with exit code 0",
           "rc=0",
           "errors: 0, warnings: 2",
           "No errors found",
           "health check passed with 0 failures",
           "completed without error",
           "NCCL_TIMEOUT=1800",
           "timeout 1800",
           "setting timeout to 30 seconds",
           "error_count=0 rx_errors_total: 0",
           "job 4242 completed with slurm_rc = 0, job_rc = 0",
           "job <NUM> completed with slurm_rc = 0, job_rc = 0",
           "time=\"<TIME>\" level=info msg=\"cleaning up dead shim\" id=<HEX> namespace=moby",
           "terrorist errorless",
           "",
       }) {
    INFO(line);
    CHECK_FALSE(carriesErrorLexicon(line));
  }
}

TEST_CASE("error lexicon: the rules' error-level example lines say yes", "[templates][lexicon][rules]") {
  auto loaded = loadRuleDirs({std::string(FAULTLINE_SOURCE_DIR) + "/rules"});
  REQUIRE(loaded.errors.empty());
  size_t lines = 0, yes = 0, masked_same = 0;
  std::ostringstream misses, masking_changed;
  size_t shown = 0;
  for (const Rule& r : loaded.rules->rules) {
    if (r.deprecated || r.severity < Severity::kError) continue;
    for (const auto& ex : r.match_examples) {
      ++lines;
      bool raw = carriesErrorLexicon(ex);
      yes += raw;
      bool masked = carriesErrorLexicon(maskMessage(ex));
      masked_same += masked == raw;
      if (masked != raw) masking_changed << "  " << r.id << ": " << ex.substr(0, 200) << " -> " << maskMessage(ex).substr(0, 200) << "\n";
      if (!raw && shown < 100) {
        misses << "  " << r.id << ": " << ex.substr(0, 140) << "\n";
        ++shown;
      }
    }
  }
  double share = lines ? static_cast<double>(yes) / static_cast<double>(lines) : 0;
  WARN("error lexicon on " << lines << " error/critical rule examples: " << yes << " yes (" << share * 100
                           << " %); first misses:\n"
                           << misses.str());
  CHECK(lines > 500);
  CHECK(share >= 0.95);
  // Masking does not change the answer: the lexicon reads templates.
  INFO("masking changed the answer on:\n" << masking_changed.str());
  CHECK(masked_same == lines);
}

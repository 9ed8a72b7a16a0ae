#include "aggregator/jobs/sacct_poller.h"

#include <sys/wait.h>

#include <cstdio>

#include "aggregator/jobs/job_events.h"

namespace faultline::aggregator {

CommandOutput runCommand(const std::string& command, size_t max_bytes) {
  CommandOutput r;
  FILE* p = popen(command.c_str(), "r");
  if (!p) return r;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
    if (r.out.size() + n > max_bytes) {
      r.truncated = true;
      continue;  // keep draining so the child is not blocked on a full pipe
    }
    r.out.append(buf, n);
  }
  int st = pclose(p);
  if (st == -1) r.status = -1;
  else if (WIFEXITED(st)) r.status = WEXITSTATUS(st);
  else if (WIFSIGNALED(st)) r.status = 128 + WTERMSIG(st);
  return r;
}

size_t importSacct(Store& store, std::string_view text, const std::string& source, std::vector<std::string>* errors) {
  size_t merged = 0;
  for (auto& u : jobUpdatesFromSacct(text, errors)) {
    u.source = source;
    std::string error;
    if (store.recordJob(u, &error)) ++merged;
    else errors->push_back("job " + u.job_id + ": " + error);
  }
  return merged;
}

PollResult SacctPoller::pollOnce(Store& store) {
  PollResult r;
  auto out = runCommand(options_.command, options_.max_output_bytes);
  if (out.status != 0) {
    r.errors.push_back("sacct command exited with status " + std::to_string(out.status));
    return r;
  }
  if (out.truncated) {
    r.errors.push_back("sacct output over the size limit");
    return r;
  }
  r.jobs = importSacct(store, out.out, "sacct", &r.errors);
  r.ok = true;
  return r;
}

}  // namespace faultline::aggregator

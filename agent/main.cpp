// faultline-agent: parses and checks the configuration, loads the rules, and hands both to the
// AgentService (agent/service.h), which builds and runs the pieces. Nothing else.
#include <malloc.h>

#include <cstdio>

#include "agent/config.h"
#include "agent/service.h"
#include "agent/system_info.h"

int main(int argc, char** argv) {
  using namespace faultline::agent;
  auto parsed = parseCommandLine(argc, argv);
  if (parsed.exit_now) return parsed.exit_code;
  if (parsed.keygen) return agentKeygen(parsed.keygen_dir);
  AgentConfig cfg = parsed.config;
  // Big blocks (the rule cache's bytes, read buffers, batches) are mapped and unmapped rather
  // than left in the heap between long-lived ones; threads other than main share one arena.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  mallopt(M_ARENA_MAX, 2);
  // --check-config checks the YAML itself and leaves the state directory (the cache) alone.
  auto cached = parsed.check_only ? faultline::common::loadRuleDirsCached(agentRuleDirs(cfg), "")
                                  : loadAgentRules(cfg, /*at_start=*/true);
  if (!cached.note.empty()) std::fprintf(stderr, "faultline-agent: %s\n", cached.note.c_str());
  auto& rules = cached.result;
  for (const auto& e : rules.errors) parsed.errors.push_back(e);
  if (!parsed.errors.empty()) {
    for (const auto& e : parsed.errors) std::fprintf(stderr, "%s\n", e.c_str());
    std::fprintf(stderr, "faultline-agent: %zu configuration problem(s)\n", parsed.errors.size());
    return 2;
  }
  if (parsed.check_only) {
    std::printf("configuration ok: %zu rules (%s)\n", rules.rules->rules.size(), rules.rules->version.c_str());
    return 0;
  }
  if (cfg.hostname.empty()) cfg.hostname = hostName();
  if (cfg.agent_id.empty()) cfg.agent_id = cfg.hostname;
  AgentService service(std::move(cfg));
  return service.run(std::move(rules));
}

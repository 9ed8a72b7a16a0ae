#!/usr/bin/env bash
# Start-up with the full shipped rule set (issue 15), cold and warm rule cache, next to the floor
# `rg --version`:
#   scan  cold : faultline --rules-cache NEW_DIR scan -q EMPTY   (YAML + RE2 + Vectorscan compile, cache written)
#   scan  warm : faultline --rules-cache DIR scan -q EMPTY       (rules and literal databases from the cache)
#   agent cold : faultline-agent with a new state_dir (the cache lives there), until its "started" log line
#   agent warm : the same state_dir again (cache and spool exist)
#   rg         : rg --version
# Each RUNS (default 7) times; prints min and median wall ms, and the median CPU ms (user+sys, from
# wait4) of each. The agent is stopped with SIGTERM once started; only its start is timed.
#
#   bash bench/startup.sh [BUILD_DIR]      (make bench runs it before bench/extract.sh)
set -euo pipefail

BUILD_DIR=${1:-build}
RUNS=${RUNS:-7}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
FAULTLINE="$BUILD_DIR/aggregator/faultline"
AGENT="$BUILD_DIR/agent/faultline-agent"
for b in "$FAULTLINE" "$AGENT"; do
  [ -x "$b" ] || { echo "bench: $b not found; build first (cmake --build $BUILD_DIR --target faultline faultline-agent)" >&2; exit 1; }
done
command -v rg > /dev/null || { echo "bench: rg (ripgrep) is required" >&2; exit 1; }

tmp=$(mktemp -d /tmp/faultline-startup.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

python3 - "$FAULTLINE" "$AGENT" "$ROOT/rules" "$tmp" "$RUNS" <<'PY'
import os, shutil, statistics, subprocess, sys, time

faultline, agent, rules, tmp, runs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
empty = os.path.join(tmp, "empty.log")
open(empty, "w").close()
rule_files = sum(1 for d, _, fs in os.walk(rules) for f in fs if f.endswith((".yaml", ".yml")))
rule_bytes = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(rules) for f in fs if f.endswith((".yaml", ".yml")))

def timed(argv):
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    err = p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"bench: {' '.join(argv)} failed: {err}")
    return wall, ru.ru_utime + ru.ru_stime, err

def agent_start(state):
    cfg = os.path.join(tmp, "agent.yaml")
    with open(cfg, "w") as f:
        f.write(f"state_dir: {state}\nrules_dirs: [{rules}]\nrules_override_dir: \"\"\njournald: false\nkmsg: false\n"
                f"fabricmanager_log: \"\"\nfile_globs: [{empty}]\nnvidia_smi: \"\"\nsysfs_root: {tmp}/nosys\n")
    t0 = time.monotonic()
    p = subprocess.Popen([agent, "--config", cfg], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    lines = []
    for line in p.stderr:
        lines.append(line.decode(errors="replace"))
        if " started: " in lines[-1]:
            break
    wall = time.monotonic() - t0
    p.terminate()
    _, status, ru = os.wait4(p.pid, 0)
    if not lines or " started: " not in lines[-1]:
        sys.exit("bench: the agent did not start: " + "".join(lines))
    # CPU up to the stop: the start dominates (it idles once started).
    return wall, ru.ru_utime + ru.ru_stime, "".join(lines)

results = {}
def add(name, sample):
    results.setdefault(name, []).append(sample)

warm_cache = os.path.join(tmp, "cache-warm")
timed([faultline, "--rules-cache", warm_cache, "scan", "-q", empty])  # fills it
warm_state = os.path.join(tmp, "state-warm")
agent_start(warm_state)
for i in range(runs):
    cold = os.path.join(tmp, f"cache-cold-{i}")
    w, c, err = timed([faultline, "--rules-cache", cold, "scan", "-q", empty])
    add("scan cold cache", (w, c))
    w, c, err = timed([faultline, "--rules-cache", warm_cache, "scan", "-q", empty])
    if err.strip():
        sys.exit("bench: warm scan said: " + err)
    add("scan warm cache", (w, c))
    add("scan no cache", timed([faultline, "--rules-cache", "off", "scan", "-q", empty])[:2])
    state = os.path.join(tmp, f"state-cold-{i}")
    add("agent cold cache", agent_start(state)[:2])
    shutil.rmtree(state, ignore_errors=True)
    add("agent warm cache", agent_start(warm_state)[:2])
    add("rg --version", timed(["rg", "--version"])[:2])

print(f"start-up with the full rule set ({rule_files} files, {rule_bytes / 1e6:.1f} MB of YAML), {runs} runs each, "
      f"{os.cpu_count()} cpus")
print(f"{'run':<18} {'min ms':>8} {'median ms':>10} {'cpu ms':>8}")
for name, samples in results.items():
    walls = [s[0] * 1000 for s in samples]
    cpus = [s[1] * 1000 for s in samples]
    print(f"{name:<18} {min(walls):>8.1f} {statistics.median(walls):>10.1f} {statistics.median(cpus):>8.1f}")
print("scan: wall from exec to exit on an empty file; agent: from exec to its 'started' log line "
      "(cpu: until SIGTERM right after); cold: a new cache directory (agent: a new state_dir).")
med = lambda n: statistics.median(s[0] for s in results[n]) * 1000
print(f"startup scan {med('scan warm cache'):.0f} ms agent {med('agent warm cache'):.0f} ms "
      f"(warm cache; rg --version {med('rg --version'):.0f} ms)")
PY

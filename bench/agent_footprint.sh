#!/usr/bin/env bash
# agent_footprint.sh: what faultline-agent costs a GPU node — RSS and CPU share of one core while
# idle, at a realistic 1,000 lines/s and during a 50,000 lines/s cascade burst — next to a peer
# that does the least any log follower can do: `tail -F FILE > /dev/null` on the same file, in the
# same run, fed by the same writer.
#
# The real binary runs with a file source (file_globs: the written file; journald and kmsg off so
# the machine's own logs do not disturb the figures), the shipped rules, a SQLite spool in a temp
# dir, and ships to bench/agent_receiver.cpp (acks like the aggregator) over ipc://. Lines come
# from bench/gen_mixed_log.py (fixed seed: ~2.5 % match a rule, the rest benign journal lines),
# replayed by a paced writer. CPU = time on a CPU (user + system) over the phase's wall time, from
# /proc/PID/task/*/schedstat (nanoseconds, every thread; utime+stime from /proc/PID/stat, in
# 10 ms ticks, where schedstat is missing: at 0.5 % over 30 s that is 15 ticks, too coarse for a
# ratio); RSS = VmRSS (and RssAnon, VmHWM) from /proc/PID/status at the end of the phase.
#
# Usage: bench/agent_footprint.sh [BUILD_DIR]   (default: build; needs faultline-agent and
#        agent_bench_receiver built there). Env: STEADY_S (30), BURST_S (5), IDLE_S (10),
#        RATE (1000), BURST_RATE (50000), EXTRA_ARGS (more agent flags, e.g. "--compression zstd").
# Each phase with lines also prints the agent's CPU per line written (ns); bench/agent_unmatched.sh
# runs this twice to compare the agent with and without its template miner (issue 30).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
agent=$build/agent/faultline-agent
# The bench programs are not in `make build`: build what this script runs (quiet when up to date).
cmake --build "$build" -j2 --target faultline-agent agent_bench_receiver >/dev/null
receiver=$build/bench/agent_bench_receiver
for b in "$agent" "$receiver"; do
  [[ -x $b ]] || { echo "missing $b: cmake --build $build --target faultline-agent agent_bench_receiver" >&2; exit 1; }
done
STEADY_S=${STEADY_S:-30} BURST_S=${BURST_S:-5} IDLE_S=${IDLE_S:-10}
RATE=${RATE:-1000} BURST_RATE=${BURST_RATE:-50000} EXTRA_ARGS=${EXTRA_ARGS:-}

tmp=$(mktemp -d /tmp/agent-footprint.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# CPU time so far in `hz` units: schedstat's nanoseconds summed over the threads, else clock ticks.
if [[ -r /proc/self/schedstat ]]; then
  hz=1000000000
  ticks() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%d\n", s }'; }
else
  hz=$(getconf CLK_TCK)
  ticks() { awk '{ sub(/^.*\) /, ""); print $12 + $13 }' "/proc/$1/stat"; }  # utime + stime
fi
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb / 1024 }'; }
share() { awk -v t="$1" -v hz="$hz" -v s="$2" 'BEGIN { printf "%.2f", 100 * t / hz / s }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.1f", a / b; else print "inf" }'; }

python3 "$root/bench/gen_mixed_log.py" "$tmp/pool.log" 8000000 >/dev/null
: > "$tmp/node.log"

# Paced writer: appends RATE lines/s for SECONDS, in 10 ms steps, cycling through the pool.
cat > "$tmp/writer.py" <<'EOF'
import sys, time
out, pool, rate, secs, start = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
lines = open(pool, "rb").read().splitlines(keepends=True)
i, written, t0 = start % len(lines), 0, time.monotonic()
with open(out, "ab", buffering=0) as f:
    while True:
        now = time.monotonic() - t0
        if now >= secs:
            break
        due = int(rate * now) - written
        if due > 0:
            chunk = []
            for _ in range(due):
                chunk.append(lines[i]); i = (i + 1) % len(lines)
            f.write(b"".join(chunk)); written += due
        time.sleep(0.01)
    due = int(rate * secs) - written
    if due > 0:
        f.write(b"".join(lines[(i + k) % len(lines)] for k in range(due))); written += due
print(written)
EOF

"$receiver" "ipc://$tmp/agg.sock" > "$tmp/receiver.out" &
pids+=($!); rx=$!
cat > "$tmp/agent.yaml" <<EOF
state_dir: $tmp/state
endpoints: [ipc://$tmp/agg.sock]
rules_dirs: [$root/rules]
rules_override_dir: ""
journald: false
kmsg: false
fabricmanager_log: ""
file_globs: [$tmp/node.log]
nvidia_smi: ""
EOF
# shellcheck disable=SC2086
"$agent" --config "$tmp/agent.yaml" $EXTRA_ARGS 2> "$tmp/agent.err" &
pids+=($!); ag=$!
tail -F "$tmp/node.log" > /dev/null 2>&1 &
pids+=($!); tl=$!
sleep 3  # rules loaded, first commit done

phase() {  # name rate seconds start_line
  local a0 t0 w0 a1 t1 w1 written
  a0=$(ticks "$ag"); t0=$(ticks "$tl"); w0=$(date +%s.%N)
  if [[ $2 -gt 0 ]]; then
    written=$(python3 "$tmp/writer.py" "$tmp/node.log" "$tmp/pool.log" "$2" "$3" "$4")
  else
    sleep "$3"; written=0
  fi
  w1=$(date +%s.%N)
  a1=$(ticks "$ag"); t1=$(ticks "$tl")
  local wall; wall=$(awk -v a="$w0" -v b="$w1" 'BEGIN { print b - a }')
  local ac=$((a1 - a0)) tc=$((t1 - t0))
  printf '%-22s agent: cpu %5s %% of one core  rss %5s MB (anon %s MB, peak %s MB)   tail -F: cpu %5s %%  rss %s MB   [%s lines in %.1f s]\n' \
    "$1" "$(share $ac "$wall")" "$(mb "$(status_kb "$ag" VmRSS)")" "$(mb "$(status_kb "$ag" RssAnon)")" \
    "$(mb "$(status_kb "$ag" VmHWM)")" "$(share $tc "$wall")" "$(mb "$(status_kb "$tl" VmRSS)")" "$written" "$wall"
  if [[ $2 -gt 0 ]]; then
    printf 'ratio %-16s agent cpu / tail -F cpu = %s\n' "$1" "$(ratio $ac $tc)"
    printf 'per line %-13s agent cpu = %s ns\n' "$1" "$(awk -v t="$ac" -v hz="$hz" -v n="$written" \
      'BEGIN { if (n > 0) printf "%.0f", t * 1e9 / hz / n; else print "-" }')"
  fi
}

echo "faultline-agent footprint ($(nproc) cores, $(uname -r)); agent flags: --config agent.yaml $EXTRA_ARGS"
phase "idle (${IDLE_S} s)" 0 "$IDLE_S" 0
phase "${RATE} lines/s" "$RATE" "$STEADY_S" 0
phase "${BURST_RATE} lines/s" "$BURST_RATE" "$BURST_S" 30000
phase "after burst (${IDLE_S} s)" 0 "$IDLE_S" 0

# Everything read reached the receiver: stop the agent (final commit), then the receiver.
kill -TERM "$ag"; wait "$ag" 2>/dev/null || true
sleep 1; kill -TERM "$rx"; wait "$rx" 2>/dev/null || true
echo "receiver: $(tail -1 "$tmp/receiver.out")"
echo "lines written: $(wc -l < "$tmp/node.log")"

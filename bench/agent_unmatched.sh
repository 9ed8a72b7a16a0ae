#!/usr/bin/env bash
# agent_unmatched.sh: what issue 30's template miner costs the agent. Runs bench/agent_footprint.sh
# twice on the same build and the same lines — the agent as shipped (error lines no rule matched
# searched for and mined into templates, shipped as counts: agent/unmatched_templates.h) and with
# `--unmatched-templates false` — alternating ROUNDS times (the machine's load moves between runs),
# and prints each run's CPU per line and, per phase, the ratio with / without of the medians.
#
# Usage: bench/agent_unmatched.sh [BUILD_DIR]   Env: ROUNDS (2; 0: only the instruction counts),
#        LINES (100000), CALLGRIND (1; 0: no instruction counts), and agent_footprint.sh's
#        STEADY_S, BURST_S, IDLE_S, RATE, BURST_RATE.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d /tmp/agent-unmatched.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

if ((ROUNDS > 0)); then
for ((i = 1; i <= ROUNDS; ++i)); do
  for mode in on off; do
    args=""
    [[ $mode == off ]] && args="--unmatched-templates false"
    EXTRA_ARGS="$args" bash "$root/bench/agent_footprint.sh" "$build" > "$tmp/$mode.$i" 2>&1
    echo "--- miner $mode, round $i"
    grep -E '^(per line|[0-9]+ lines/s|receiver:)' "$tmp/$mode.$i"
  done
done

# "per line 1000 lines/s    agent cpu = 812 ns" -> per phase, the median over the rounds.
median() {  # mode phase
  grep -h "^per line $2 " "$tmp/$1".* | awk '{ print $(NF - 1) }' | sort -n |
    awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "agent CPU per line written, median of $ROUNDS round(s) ($(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)):"
for phase in "${RATE:-1000} lines/s" "${BURST_RATE:-50000} lines/s"; do
  on=$(median on "$phase") off=$(median off "$phase")
  ratio=$(awk -v a="$on" -v b="$off" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')
  printf '%-16s with miner %6s ns   without %6s ns   ratio with/without = %s\n' "$phase" "$on" "$off" "$ratio"
done
fi

# Instructions (valgrind --tool=callgrind: deterministic, where CPU time on a shared machine is
# not): the agent reads LINES lines of the same generated pool from a file's start, and the same
# from an empty file; per line = (with lines - empty) / LINES, with the miner and without. Warm
# rule cache (a first run without valgrind builds it), start-up and the final commit included in
# both runs, so they cancel.
LINES=${LINES:-100000}
if [[ ${CALLGRIND:-1} == 1 ]] && command -v valgrind >/dev/null && command -v sqlite3 >/dev/null; then
  agent=$build/agent/faultline-agent receiver=$build/bench/agent_bench_receiver
  python3 "$root/bench/gen_mixed_log.py" "$tmp/pool.log" 8000000 >/dev/null 2>&1
  head -n "$LINES" "$tmp/pool.log" > "$tmp/lines.log"
  : > "$tmp/empty.log"
  run() {  # mode file -> instructions
    local dir=$tmp/cg-$1-$(basename "$2" .log) args=""
    [[ $1 == off ]] && args="--unmatched-templates false"
    mkdir -p "$dir"
    "$receiver" "ipc://$dir/agg.sock" > "$dir/receiver.out" &
    local rx=$!
    # shellcheck disable=SC2086
    valgrind --tool=callgrind --callgrind-out-file="$dir/cg.out" "$agent" --state-dir "$dir" \
      --rules-cache-dir "$tmp/cache" --endpoints "ipc://$dir/agg.sock" --rules-dirs "$root/rules" \
      --rules-override-dir "" --journald false --kmsg false --fabricmanager-log "" --file-globs "$2" \
      --files-from-start true --nvidia-smi "" --batch-interval-ms 200 $args 2> "$dir/agent.err" &
    local ag=$! size; size=$(stat -c %s "$2")
    # Done when the file's checkpoint (dev ino offset) reaches its end.
    for _ in $(seq 1 1200); do
      local at; at=$(sqlite3 "$dir/spool.db" "SELECT position FROM checkpoints" 2>/dev/null | awk '{ print $3 }')
      [[ -n $at && $at -ge $size ]] && break
      sleep 0.5
    done
    kill -TERM "$ag"; wait "$ag" 2>/dev/null || true
    kill -TERM "$rx"; wait "$rx" 2>/dev/null || true
    awk '/^(summary|totals):/ { print $2; exit }' "$dir/cg.out"
  }
  # Warm the rule cache.
  mkdir -p "$tmp/warm"
  "$agent" --state-dir "$tmp/warm" --rules-cache-dir "$tmp/cache" --rules-dirs "$root/rules" --rules-override-dir "" \
    --journald false --kmsg false --fabricmanager-log "" --file-globs "$tmp/empty.log" --nvidia-smi "" 2>/dev/null &
  warm=$!; sleep 5; kill -TERM "$warm"; wait "$warm" 2>/dev/null || true
  echo
  echo "agent instructions per line (callgrind; $LINES lines of the pool read from the start, minus an empty file):"
  declare -A per
  for mode in on off; do
    full=$(run "$mode" "$tmp/lines.log") none=$(run "$mode" "$tmp/empty.log")
    per[$mode]=$(awk -v a="$full" -v b="$none" -v n="$LINES" 'BEGIN { printf "%.0f", (a - b) / n }')
    printf 'miner %-3s  %s instructions with the lines, %s without: %s a line   (%s)\n' "$mode" "$full" "$none" \
      "${per[$mode]}" "$(tail -1 "$tmp/cg-$mode-lines/receiver.out" | grep -oE 'templates=[0-9]+ template_lines=[0-9]+')"
  done
  printf 'ratio with/without = %s\n' "$(awk -v a="${per[on]}" -v b="${per[off]}" 'BEGIN { printf "%.3f", a / b }')"
fi

#!/usr/bin/env bash
# agent_unmatched.sh: what issue 30's template miner costs the agent. Runs bench/agent_footprint.sh
# twice on the same build and the same lines — the agent as shipped (error lines no rule matched
# searched for and mined into templates, shipped as counts: agent/unmatched_templates.h) and with
# `--unmatched-templates false` — alternating ROUNDS times (the machine's load moves between runs),
# and prints each run's CPU per line and, per phase, the ratio with / without of the medians.
#
# Usage: bench/agent_unmatched.sh [BUILD_DIR]   Env: ROUNDS (2), and agent_footprint.sh's
#        STEADY_S, BURST_S, IDLE_S, RATE, BURST_RATE.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
ROUNDS=${ROUNDS:-2}
tmp=$(mktemp -d /tmp/agent-unmatched.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

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

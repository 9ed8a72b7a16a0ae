#!/usr/bin/env bash
# agent_bandwidth.sh: bytes on the wire for one failure episode — faultline-agent's symptom
# batches (packed Cap'n Proto, and with `compression: zstd`) against shipping the same raw lines
# (raw, and zstd -3 per node as a log shipper would), from the same input, in the same run.
#
# The episode: the cascade64-xid79 sample (64 nodes, a GPU falling off the bus on one node and
# the job's collapse everywhere: every node's kernel log), plus a generated burst of 100,000 NCCL
# lines within one minute on one node (80 % "NCCL WARN NET/IB : Got completion ... status=12"
# from 8 local ranks towards 63 peers, 20 % NCCL INFO), as an application log.
#
# One real faultline-agent per node (hostname = the node; a file source over that node's logs,
# read from the start; journald/kmsg off; aggregate_window_s 10 as shipped), all shipping to one
# bench/agent_receiver.cpp that acks and counts the type+payload bytes of every message. The
# agents run 16 at a time; each is stopped once its symptoms' aggregation windows have closed and
# the batches were acknowledged. Heartbeats (one per agent at start, carrying the inventory) are
# reported apart from the batches: they are periodic, not per episode.
#
# Usage: bench/agent_bandwidth.sh [BUILD_DIR]   (default: build; needs faultline-agent and
#        agent_bench_receiver built there)
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
command -v zstd >/dev/null || { echo "needs the zstd CLI" >&2; exit 1; }
PARALLEL=${PARALLEL:-16}
WAIT_S=${WAIT_S:-16}  # aggregate window (10 s) + commit interval (2 s) + margin

tmp=$(mktemp -d /tmp/agent-bandwidth.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

sample=$root/samples/cascade64-xid79/nodes
nodes=()
for d in "$sample"/*/; do
  n=$(basename "$d")
  nodes+=("$n")
  mkdir -p "$tmp/in/$n"
  for f in "$d"*; do
    [[ $(basename "$f") == node.json ]] && continue
    cp "$f" "$tmp/in/$n/$(basename "$f").log"
  done
done
burst_node=${nodes[0]}

# 100,000 NCCL lines stamped across one minute (journalctl short-iso-precise, as the app log).
python3 - "$tmp/in/$burst_node/nccl-burst.log" "$burst_node" <<'EOF'
import random, sys, time
out, node = sys.argv[1], sys.argv[2]
r = random.Random(7731842)
t0 = time.mktime((2024, 5, 29, 9, 15, 0, 0, 0, 0)) - time.timezone
lines = []
for i in range(100_000):
    t = t0 + 60.0 * i / 100_000
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%06d+00:00" % int((t % 1) * 1e6)
    rank = r.randrange(8)
    pid = 55000 + rank
    if r.random() < 0.8:
        peer = r.randrange(2, 65)
        msg = (f"{node}:{pid}:{pid + 95} [{rank}] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion "
               f"from peer 10.4.{peer // 256}.{peer % 256}<{45000 + r.randrange(1000)}> with status=12 opcode=0 "
               f"len=0 vendor err 129 (Send) localGid ::ffff:10.4.0.1 remoteGids::ffff:10.4.{peer // 256}.{peer % 256}")
    else:
        msg = f"{node}:{pid}:{pid + 95} [{rank}] NCCL INFO Channel {r.randrange(32):02d}/0 : {rank} -> {(rank + 1) % 8} via P2P/IPC"
    lines.append(f"{stamp} {node} python[{pid}]: {msg}\n")
open(out, "w").write("".join(lines))
EOF

raw=0 raw_zstd=0 raw_lines=0
for n in "${nodes[@]}"; do
  b=$(cat "$tmp/in/$n"/*.log | wc -c); raw=$((raw + b))
  z=$(cat "$tmp/in/$n"/*.log | zstd -3 -q -c | wc -c); raw_zstd=$((raw_zstd + z))
  raw_lines=$((raw_lines + $(cat "$tmp/in/$n"/*.log | wc -l)))
done

run_agents() {  # mode -> prints the receiver's summary line
  local mode=$1 sock="ipc://$tmp/rx-$1.sock"
  "$receiver" "$sock" > "$tmp/rx-$mode.out" &
  local rx=$!
  pids+=("$rx")
  local i=0 group=()
  for n in "${nodes[@]}"; do
    cat > "$tmp/$mode-$n.yaml" <<EOF2
agent_id: $n
hostname: $n
state_dir: $tmp/state-$mode/$n
endpoints: [$sock]
rules_dirs: [$root/rules]
rules_override_dir: ""
journald: false
kmsg: false
fabricmanager_log: ""
file_globs: [$tmp/in/$n/*.log]
files_from_start: true
nvidia_smi: ""
heartbeat_interval_s: 3600
compression: $mode
EOF2
    "$agent" --config "$tmp/$mode-$n.yaml" 2>> "$tmp/agents-$mode.err" &
    group+=($!)
    pids+=($!)
    i=$((i + 1))
    if (( i % PARALLEL == 0 || i == ${#nodes[@]} )); then
      sleep "$WAIT_S"
      kill -TERM "${group[@]}" 2>/dev/null || true
      wait "${group[@]}" 2>/dev/null || true
      group=()
    fi
  done
  sleep 1
  kill -TERM "$rx"; wait "$rx" 2>/dev/null || true
  tail -1 "$tmp/rx-$mode.out"
}

field() { tr ' ' '\n' <<< "$1" | awk -F= -v k="$2" '$1 == k { v = $2 } END { print v + 0 }'; }

plain=$(run_agents none)
packed=$(run_agents zstd)

b_plain=$(field "$plain" batch.bytes)
b_zstd=$(( $(field "$packed" "batch+zstd.bytes") + $(field "$packed" batch.bytes) ))
hb_plain=$(field "$plain" heartbeat.bytes)
hb_zstd=$(( $(field "$packed" heartbeat.bytes) + $(field "$packed" "heartbeat+zstd.bytes") ))

echo "episode: cascade64-xid79 (${#nodes[@]} nodes) + 100,000 NCCL lines in one minute on $burst_node"
echo "input: $raw_lines lines"
printf '%-40s %12s bytes\n' "raw lines" "$raw"
printf '%-40s %12s bytes\n' "raw lines, zstd -3 per node" "$raw_zstd"
printf '%-40s %12s bytes   (%s batches, %s symptoms, %s occurrences)\n' "agent batches (packed capnp)" "$b_plain" \
  "$(field "$plain" batches)" "$(field "$plain" symptoms)" "$(field "$plain" occurrences)"
printf '%-40s %12s bytes   (%s batches, %s symptoms, %s occurrences)\n' "agent batches (packed capnp + zstd)" "$b_zstd" \
  "$(field "$packed" batches)" "$(field "$packed" symptoms)" "$(field "$packed" occurrences)"
printf '%-40s %12s / %s bytes (plain / zstd; one per agent, with the inventory)\n' "agent heartbeats at start" "$hb_plain" "$hb_zstd"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
echo "ratio raw / agent packed          = $(ratio "$raw" "$b_plain")"
echo "ratio raw zstd -3 / agent packed  = $(ratio "$raw_zstd" "$b_plain")"
echo "ratio raw / agent packed+zstd     = $(ratio "$raw" "$b_zstd")"
echo "ratio raw zstd -3 / agent packed+zstd = $(ratio "$raw_zstd" "$b_zstd")"
echo "receiver (none): $plain"
echo "receiver (zstd): $packed"

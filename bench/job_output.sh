#!/usr/bin/env bash
# job_output.sh: what `faultline job output` (the Slurm epilog's second step) costs and ships for a
# job's output file: bytes read vs bytes sent to the aggregator, and its time against the peer
# `faultline scan -q` over the same file (the same parsers and rules, nothing sent) in this script.
#
# Inputs:
#   1. Every sample's slurm-*.out as it is (the file sizes of real small jobs).
#   2. A big training log: cascade64-xid79's slurm-7731842.out (64 nodes x 8 ranks, srun --label,
#      the Xid 79 cascade at the end) with SIZE_MB (default 200) of Megatron-style iteration lines
#      from rank 0 inserted before its failure, sent as job 7731843 (recorded first, 8 tasks per node).
# Uploads go over HTTP to a real faultline-aggregator on 127.0.0.1 (scratch database), after the
# job's end event (job.json, or `job import` of sacct.json), as the epilog sends them.
#
# Usage: bench/job_output.sh [BUILD_DIR]   (default: build). SIZE_MB=50 for a quicker run.
set -euo pipefail
BUILD=${1:-build}
SIZE_MB=${SIZE_MB:-200}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CLI="$ROOT/$BUILD/aggregator/faultline"
RULES="$ROOT/rules"
[ -x "$CLI" ] || { echo "no $CLI: run make build first" >&2; exit 1; }
AGG="$ROOT/$BUILD/aggregator/faultline-aggregator"
TMP=$(mktemp -d)
echo t0ken >"$TMP/token"
"$AGG" --db "$TMP/agg.db" --port 0 --port-file "$TMP/port" --token-file "$TMP/token" --rules "$RULES" \
  --tick 0.1 --job-retention-days 36500 2>"$TMP/agg.log" &
AGG_PID=$!
trap 'kill $AGG_PID 2>/dev/null; wait $AGG_PID 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [ -s "$TMP/port" ] && break; sleep 0.1; done
[ -s "$TMP/port" ] || { cat "$TMP/agg.log" >&2; exit 1; }
SERVER=(--server "http://127.0.0.1:$(cat "$TMP/port")" --token-file "$TMP/token" --timeout 60)

now() { date +%s.%N; }
json_get() { python3 -c "import json,sys; d=json.load(sys.stdin)[0]; print(d['$1'])"; }

echo "== sample output files (one upload each) =="
printf '%-26s %10s %8s %10s %7s\n' sample bytes_read symptoms bytes_sent ratio
total_read=0
total_sent=0
for out in "$ROOT"/samples/*/slurm-*.out; do
  sample=$(basename "$(dirname "$out")")
  id=$(basename "$out" .out)
  id=${id#slurm-}
  dir=$(dirname "$out")
  if [ -f "$dir/job.json" ]; then  # the job first, as the epilog sends it (its layout places ranks)
    "$CLI" "${SERVER[@]}" job end "$id" $(python3 - "$dir/job.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
args = ["--nodes", j["nodelist"], "--exit-code", j.get("exit_code", "0:0"), "--state", j["state"].split()[0]]
if j.get("ntasks_per_node"): args += ["--ntasks-per-node", str(j["ntasks_per_node"])]
if j.get("start_time"): args += ["--start-time", j["start_time"]]
if j.get("end_time"): args += ["--time", j["end_time"]]
print(" ".join(args))
PY
) >/dev/null
  else
    "$CLI" "${SERVER[@]}" job import "$dir/sacct.json" >/dev/null
  fi
  r=$("$CLI" --rules "$RULES" "${SERVER[@]}" job output "$id" "$out" --json)
  read_b=$(echo "$r" | json_get bytes_read)
  sent_b=$(echo "$r" | json_get bytes_sent)
  syms=$(echo "$r" | json_get symptoms)
  total_read=$((total_read + read_b))
  total_sent=$((total_sent + sent_b))
  printf '%-26s %10d %8d %10d %7s\n' "$sample" "$read_b" "$syms" "$sent_b" \
    "$(python3 -c "print(f'{$read_b/$sent_b:.1f}' if $sent_b else '-')")"
done
printf '%-26s %10d %8s %10d %7s\n' "all" "$total_read" "" "$total_sent" \
  "$(python3 -c "print(f'{$total_read/$total_sent:.1f}')")"

echo
echo "== big training log: cascade64-xid79 with ${SIZE_MB} MB of iteration lines =="
SRC="$ROOT/samples/cascade64-xid79/slurm-7731842.out"
BIG="$TMP/slurm-7731843.out"
python3 - "$SRC" "$BIG" "$SIZE_MB" <<'PY'
import sys
src, dst, size_mb = sys.argv[1], sys.argv[2], int(sys.argv[3])
lines = open(src, encoding="utf-8", errors="replace").read().splitlines(keepends=True)
first = next(i for i, l in enumerate(lines) if " iteration " in l)
target = size_mb << 20
with open(dst, "w") as out:
    out.writelines(lines[:first])
    written, it, sec = 0, 1, 0
    while written < target:
        h, m, s = 2 + sec // 3600, (sec // 60) % 60, sec % 60
        line = (f"0: [2024-06-03 {h:02d}:{m:02d}:{s:02d}] iteration {it:6d}/ 200000 | consumed samples: "
                f"{it*1024:9d} | elapsed time per iteration (ms): 1391.2 | learning rate: 2.998E-04 | "
                f"global batch size:  1024 | lm loss: 5.889474E+00 | loss scale: 1.0 | grad norm: 0.291 |\n")
        out.write(line)
        written += len(line)
        it += 1
        sec = min(sec + 1, 3 * 3600 + 30 * 60)
    out.writelines(lines[first:])
PY
big_bytes=$(stat -c %s "$BIG")
"$CLI" "${SERVER[@]}" job end 7731843 --nodes 'gpu-b[01-64]' --ntasks-per-node 8 --exit-code 1:0 \
  --start-time 2024-06-03T02:00:00Z --time 2024-06-03T05:51:43Z >/dev/null
cat "$BIG" >/dev/null  # page cache warm for both runs
t0=$(now)
"$CLI" --rules "$RULES" scan -q "$BIG" >/dev/null
t1=$(now)
r=$("$CLI" --rules "$RULES" "${SERVER[@]}" job output 7731843 "$BIG" --json)
t2=$(now)
sent_b=$(echo "$r" | json_get bytes_sent)
syms=$(echo "$r" | json_get symptoms)
verdict=$("$CLI" "${SERVER[@]}" job 7731843 --json |
  python3 -c "import json,sys; d=json.load(sys.stdin); print(d['sub_domain'], [n['node'] for n in d['responsible_nodes']], d['cause']['rule_id'] if d.get('cause') else None)")
python3 - "$big_bytes" "$sent_b" "$syms" "$t0" "$t1" "$t2" "$verdict" <<'PY'
import sys
size, sent, syms = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0, t1, t2 = map(float, sys.argv[4:7])
scan, up = t1 - t0, t2 - t1
print(f"file                      {size:>12,d} bytes")
print(f"sent to the aggregator    {sent:>12,d} bytes ({syms} symptoms), file/sent = {size/sent:,.0f}x")
print(f"peer: faultline scan -q   {scan:8.2f} s  ({size/scan/2**20:6.1f} MiB/s)")
print(f"faultline job output      {up:8.2f} s  ({size/up/2**20:6.1f} MiB/s), job output/scan = {up/scan:.2f}")
print(f"verdict                   {sys.argv[7]}")
PY

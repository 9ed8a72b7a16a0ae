#!/usr/bin/env bash
# aggregator_load.sh: the real faultline-aggregator under a fleet-wide cascade from 2,048
# simulated agents (bench/aggregator_load.cpp), each with its own CurveZMQ key and hostname.
# Prints symptoms/s ingested, p50/p99 send->ack latency, the time from a 1,024-node job's end to
# its stored verdict (and whom it blamed), and the same load from one sender as the peer.
#
# Steps: `faultline keygen` makes the aggregator's key; `aggregator_load keygen` makes one key pair
# per agent and the allow-list directory (HOST.pub); the aggregator starts on an ephemeral HTTP
# port and ingest endpoint (tcp://127.0.0.1:*) with a fresh SQLite file; `aggregator_load run`
# drives it; the aggregator is stopped and the temp dir removed.
#
# Usage: bench/aggregator_load.sh [BUILD_DIR] [-- more `aggregator_load run` flags]
#        e.g. bench/aggregator_load.sh build -- --batches 16 --symptoms-per-batch 4
# Env:   AGENTS (2048), SAMPLE (samples/cascade64-xid79), KEEP=1 keeps the temp dir,
#        AGG_ARGS (more faultline-aggregator flags, e.g. "--sync-full"), AGGREGATOR (another
#        faultline-aggregator binary, e.g. one built from another commit, to compare).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != -- ]]; then build=$1; shift; fi
[[ ${1:-} == -- ]] && shift
agg=${AGGREGATOR:-$build/aggregator/faultline-aggregator}
cli=$build/aggregator/faultline
gen=$build/bench/aggregator_load
for b in "$agg" "$cli" "$gen"; do
  [[ -x $b ]] || { echo "missing $b: make build" >&2; exit 1; }
done
AGENTS=${AGENTS:-2048}
SAMPLE=${SAMPLE:-$root/samples/cascade64-xid79}
AGG_ARGS=${AGG_ARGS:-}

# Two sockets per agent in the generator (TCP + mailbox), one connection each in the aggregator.
need=$((AGENTS * 2 + 256))
if [[ $(ulimit -n) != unlimited && $(ulimit -n) -lt $need ]]; then
  ulimit -n "$need" 2>/dev/null || { echo "ulimit -n $(ulimit -n) is below $need; raise it" >&2; exit 1; }
fi

tmp=$(mktemp -d /tmp/aggregator-load.XXXXXX)
agg_pid=
cleanup() {
  if [[ -n $agg_pid ]]; then kill "$agg_pid" 2>/dev/null || true; wait "$agg_pid" 2>/dev/null || true; fi
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

t0=$(date +%s.%N)
"$cli" keygen "$tmp/server" --name server >/dev/null
"$gen" keygen "$tmp" --agents "$AGENTS" >/dev/null
echo "bench-token-$$" > "$tmp/token"
t1=$(date +%s.%N)

# shellcheck disable=SC2086
"$agg" --db "$tmp/agg.db" --port 0 --port-file "$tmp/port" --token-file "$tmp/token" --rules "$root/rules" \
  --curve-secret-key "$tmp/server/server.key" --allow-dir "$tmp/allow" \
  --ingest-endpoint 'tcp://127.0.0.1:*' --ingest-endpoint-file "$tmp/ingest" --tick 0.25 $AGG_ARGS \
  2> "$tmp/aggregator.log" &
agg_pid=$!
for _ in $(seq 1 400); do  # up to 20 s
  [[ -s $tmp/port && -s $tmp/ingest ]] && break
  kill -0 "$agg_pid" 2>/dev/null || { cat "$tmp/aggregator.log" >&2; exit 1; }
  sleep 0.05
done
[[ -s $tmp/port && -s $tmp/ingest ]] || { echo "aggregator did not start" >&2; cat "$tmp/aggregator.log" >&2; exit 1; }
awk -v a="$t0" -v b="$t1" -v n="$((AGENTS + 1))" 'BEGIN { printf "keys      %d agent key pairs + allow-list in %.2f s\n", n, b - a }'

rc=0
"$gen" run --agents "$AGENTS" --endpoint "$(cat "$tmp/ingest")" --server-key "$tmp/server/server.pub" \
  --keys "$tmp/keys" --http-port "$(cat "$tmp/port")" --token-file "$tmp/token" --aggregator-pid "$agg_pid" \
  --sample "$SAMPLE" --rules "$root/rules" "$@" || rc=$?
echo "db        $(du -m "$tmp/agg.db" | cut -f1) MiB (+ WAL $(du -m "$tmp/agg.db-wal" 2>/dev/null | cut -f1 || echo 0) MiB)," \
  "aggregator RSS $(awk '$1 == "VmRSS:" { printf "%.0f MiB", $2 / 1024 }' "/proc/$agg_pid/status")"
if grep -q "rejected\|error" "$tmp/aggregator.log"; then
  echo "aggregator log (rejects/errors):"; grep "rejected\|error" "$tmp/aggregator.log" | head -5
fi
exit $rc

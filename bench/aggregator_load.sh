#!/usr/bin/env bash
# aggregator_load.sh: the real faultline-aggregator under a fleet-wide cascade from 2,048
# simulated agents (bench/aggregator_load.cpp), each with its own CurveZMQ key and hostname.
# Prints symptoms/s ingested, p50/p99 send->ack latency, the time from a 1,024-node job's end to
# its stored verdict (and whom it blamed), and the same load from one sender as the peer.
#
# One run drives two aggregators, one after the other, each on a fresh SQLite file: first with
# --ingest-legacy (the previous ingest pass: decoded and stored one message at a time, a savepoint
# and freshly prepared statements per batch), then the default grouped writer (decoding before the
# store lock, statements prepared once, one group per pass); a last line compares them.
# Then the same load against PostgreSQL (a server started for the bench in a temp dir,
# tests/pg/pg_server.sh): one aggregator on it, then three replicas on one database with the
# agents spread over their endpoints. INGEST=grouped (or legacy, pg1, pg3) runs one of them only;
# PG=0 skips PostgreSQL. Last, the verdict of a job as large as one generator can drive (9,800
# agents, two descriptors each under this machine's 20,000): a grouped SQLite aggregator, the
# cascade from every agent, then the job's end POST and the time until its verdict is readable
# (VERDICT_AGENTS=0 skips it; INGEST=verdict runs it alone).
#
# Steps: `faultline keygen` makes the aggregator's key; `aggregator_load keygen` makes one key pair
# per agent and the allow-list directory (HOST.pub); the aggregator starts on an ephemeral HTTP
# port and ingest endpoint (tcp://127.0.0.1:*) with a fresh SQLite file; `aggregator_load run`
# drives it; the aggregator is stopped and the temp dir removed.
#
# Usage: bench/aggregator_load.sh [BUILD_DIR] [-- more `aggregator_load run` flags]
#        e.g. bench/aggregator_load.sh build -- --batches 16 --symptoms-per-batch 4
# Env:   AGENTS (2048), VERDICT_AGENTS (9800), SAMPLE (samples/cascade64-xid79), KEEP=1 keeps the temp dir, INGEST (both),
#        AGG_ARGS (more faultline-aggregator flags, e.g. "--sync-full"), AGGREGATOR (another
#        faultline-aggregator binary, e.g. one built from another commit, to compare).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
if [[ $# -gt 0 && $1 != -- ]]; then build=$1; shift; fi
[[ ${1:-} == -- ]] && shift
agg=${AGGREGATOR:-$build/aggregator/faultline-aggregator}
cli=$build/aggregator/faultline
# The bench programs are not in `make build`: build what this script runs (quiet when up to date).
cmake --build "$build" -j2 --target faultline-aggregator aggregator_load >/dev/null
gen=$build/bench/aggregator_load
for b in "$agg" "$cli" "$gen"; do
  [[ -x $b ]] || { echo "missing $b: make build" >&2; exit 1; }
done
AGENTS=${AGENTS:-2048}
INGEST=${INGEST:-both}
VERDICT_AGENTS=${VERDICT_AGENTS:-9800}
[[ $INGEST == both || $INGEST == verdict ]] || VERDICT_AGENTS=0
keys=$(( VERDICT_AGENTS > AGENTS ? VERDICT_AGENTS : AGENTS ))
SAMPLE=${SAMPLE:-$root/samples/cascade64-xid79}
AGG_ARGS=${AGG_ARGS:-}

# Two sockets per agent in the generator (TCP + mailbox), one connection each in the aggregator.
need=$((keys * 2 + 256))
if [[ $(ulimit -n) != unlimited && $(ulimit -n) -lt $need ]]; then
  ulimit -n "$need" 2>/dev/null || { echo "ulimit -n $(ulimit -n) is below $need; raise it" >&2; exit 1; }
fi

tmp=$(mktemp -d /tmp/aggregator-load.XXXXXX)
agg_pid=
replica_pids=()
pg_dir=/tmp/faultline-pg-bench-$$
pg_port=${PG_PORT:-54331}
pg_started=0
stop_aggregator() {
  for p in $agg_pid "${replica_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  agg_pid=
  replica_pids=()
}
cleanup() {
  stop_aggregator
  if [[ $pg_started == 1 ]]; then bash "$root/tests/pg/pg_server.sh" stop "$pg_dir" "$pg_port" || true; fi
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

t0=$(date +%s.%N)
"$cli" keygen "$tmp/server" --name server >/dev/null
"$gen" keygen "$tmp" --agents "$keys" >/dev/null
echo "bench-token-$$" > "$tmp/token"
t1=$(date +%s.%N)
awk -v a="$t0" -v b="$t1" -v n="$((keys + 1))" 'BEGIN { printf "keys      %d agent key pairs + allow-list in %.2f s\n", n, b - a }'

# run_one MODE EXTRA_AGGREGATOR_FLAGS -- GENERATOR_FLAGS: one aggregator, one full load; output
# also in $tmp/MODE.out.
rc=0
# start_replica DIR STORE FLAGS...: one faultline-aggregator on STORE, its ports in DIR; pid in $last_pid.
start_replica() {
  local d=$1 store=$2
  shift 2
  mkdir -p "$d"
  # shellcheck disable=SC2086
  "$agg" --store "$store" --port 0 --port-file "$d/port" --token-file "$tmp/token" --rules "$root/rules" \
    --curve-secret-key "$tmp/server/server.key" --allow-dir "$tmp/allow" \
    --ingest-endpoint 'tcp://127.0.0.1:*' --ingest-endpoint-file "$d/ingest" --tick 0.25 "$@" $AGG_ARGS \
    2> "$d/aggregator.log" &
  last_pid=$!
  for _ in $(seq 1 400); do  # up to 20 s
    [[ -s $d/port && -s $d/ingest ]] && break
    kill -0 "$last_pid" 2>/dev/null || { cat "$d/aggregator.log" >&2; exit 1; }
    sleep 0.05
  done
  [[ -s $d/port && -s $d/ingest ]] || { echo "aggregator did not start" >&2; cat "$d/aggregator.log" >&2; exit 1; }
}

# run_one MODE REPLICAS STORE EXTRA_AGGREGATOR_FLAGS -- GENERATOR_FLAGS ($RUN_AGENTS agents, default AGENTS)
run_one() {
  local mode=$1 replicas=$2 store=$3 mode_args=$4
  shift 4
  local d=$tmp/$mode
  mkdir -p "$d"
  echo "== ingest $mode ($replicas x faultline-aggregator --store ${store/$tmp/TMP} $mode_args${mode_args:+ }$AGG_ARGS)"
  local endpoints=()
  # shellcheck disable=SC2086
  start_replica "$d" "$store" $mode_args
  agg_pid=$last_pid
  endpoints+=(--endpoint "$(cat "$d/ingest")")
  for i in $(seq 2 "$replicas"); do
    # shellcheck disable=SC2086
    start_replica "$d/r$i" "$store" $mode_args
    replica_pids+=("$last_pid")
    endpoints+=(--endpoint "$(cat "$d/r$i/ingest")")
  done
  "$gen" run --agents "${RUN_AGENTS:-$AGENTS}" "${endpoints[@]}" --server-key "$tmp/server/server.pub" \
    --keys "$tmp/keys" --http-port "$(cat "$d/port")" --token-file "$tmp/token" --aggregator-pid "$agg_pid" \
    --sample "$SAMPLE" --rules "$root/rules" "$@" | tee "$tmp/$mode.out" || rc=$?
  if [[ -f $d/agg.db ]]; then
    echo "db        $(du -m "$d/agg.db" | cut -f1) MiB (+ WAL $(du -m "$d/agg.db-wal" 2>/dev/null | cut -f1 || echo 0) MiB)," \
      "aggregator RSS $(awk '$1 == "VmRSS:" { printf "%.0f MiB", $2 / 1024 }' "/proc/$agg_pid/status")"
  else
    echo "db        PostgreSQL, first replica's RSS $(awk '$1 == "VmRSS:" { printf "%.0f MiB", $2 / 1024 }' "/proc/$agg_pid/status")"
  fi
  if grep -q "rejected\|error" "$d/aggregator.log"; then
    echo "aggregator log (rejects/errors):"; grep "rejected\|error" "$d/aggregator.log" | head -5
  fi
  stop_aggregator
}

# A PostgreSQL server for the pg modes, and a fresh database per mode, its URL in $pg_url. Called
# in this shell, not in $(...): the server it starts must be the one cleanup stops.
pg_store() {
  if [[ $pg_started == 0 ]]; then
    bash "$root/tests/pg/pg_server.sh" start "$pg_dir" "$pg_port" >/dev/null
    pg_started=1
  fi
  psql -q -h "$pg_dir" -p "$pg_port" -U postgres -c "CREATE DATABASE $1" postgres >/dev/null
  pg_url="postgresql:///$1?host=$pg_dir&port=$pg_port&user=postgres"
}

PG=${PG:-1}
[[ $INGEST == both || $INGEST == legacy ]] && run_one legacy 1 "$tmp/legacy/agg.db" --ingest-legacy "$@"
[[ $INGEST == both || $INGEST == grouped ]] && run_one grouped 1 "$tmp/grouped/agg.db" "" "$@"
if [[ $PG == 1 && ($INGEST == both || $INGEST == pg1) ]]; then pg_store bench_pg1 && run_one pg1 1 "$pg_url" "" "$@"; fi
if [[ $PG == 1 && ($INGEST == both || $INGEST == pg3) ]]; then pg_store bench_pg3 && run_one pg3 3 "$pg_url" "" "$@"; fi
if (( VERDICT_AGENTS > 0 )); then
  # Every agent in the job; no peer and no phase after the verdict (they say nothing new here).
  RUN_AGENTS=$VERDICT_AGENTS run_one verdict 1 "$tmp/verdict/agg.db" "" "$@" --job-nodes "$VERDICT_AGENTS" \
    --peer-batches 1 --after-batches 0 --timeout 600
fi
if [[ $INGEST == both ]]; then
  # "cascade    2048 senders    65536 symptoms in ... :    15470 symptoms/s ... ack p50  1936.2 ms  p99  3991.2 ms"
  fig() { awk -v phase="$2" '$1 == phase && /symptoms\/s/ { for (i = 1; i <= NF; ++i) { if ($i == "symptoms/s") r = $(i - 1); if ($i == "p50") p50 = $(i + 1); if ($i == "p99") p99 = $(i + 1) } } END { printf "%s %s %s", r, p50, p99 }' "$tmp/$1.out"; }
  for phase in peer cascade after; do
    read -r lr lp50 lp99 <<< "$(fig legacy $phase)"
    read -r gr gp50 gp99 <<< "$(fig grouped $phase)"
    [[ -n $lr && -n $gr ]] || continue
    awk -v p="$phase" -v lr="$lr" -v gr="$gr" -v a="$lp50" -v b="$lp99" -v c="$gp50" -v d="$gp99" 'BEGIN {
      printf "compare   %-8s legacy %8d symptoms/s (ack p50 %s ms, p99 %s ms) | grouped %8d symptoms/s (ack p50 %s ms, p99 %s ms) | x%.2f\n",
        p, lr, a, b, gr, c, d, gr / lr }'
  done
  for mode in pg1 pg3; do
    [[ -f $tmp/$mode.out ]] || continue
    read -r r p50 p99 <<< "$(fig $mode cascade)"
    read -r lr _ _ <<< "$(fig legacy cascade)"
    [[ -n $r && -n $lr ]] && awk -v m="$mode" -v r="$r" -v a="$p50" -v b="$p99" -v lr="$lr" 'BEGIN {
      printf "compare   cascade  %-6s %8d symptoms/s (ack p50 %s ms, p99 %s ms) | x%.2f of legacy\n", m, r, a, b, r / lr }'
  done
  for mode in legacy grouped pg1 pg3; do
    [[ -f $tmp/$mode.out ]] || continue
    c=$(awk '$1 == "cpu" && $2 == "cascade" { print $4; exit }' "$tmp/$mode.out")
    echo "compare   cpu      $mode cascade: aggregator ${c:-?} us of CPU per stored symptom"
  done
  for mode in legacy grouped pg1 pg3 verdict; do
    [[ -f $tmp/$mode.out ]] || continue
    v=$(awk '$1 == "verdict" { for (i = 1; i <= NF; ++i) if ($i == "readable") { print $(i + 3); exit } }' "$tmp/$mode.out")
    n=$(awk '$1 == "verdict" { print $2; exit }' "$tmp/$mode.out")
    c=$(awk '/faultline_verdict_compute_seconds/ { for (i = 1; i <= NF; ++i) if ($i == "faultline_verdict_compute_seconds") { print $(i + 1); exit } }' "$tmp/$mode.out")
    echo "compare   verdict  $mode: ${n:-?} job, end POST -> stored verdict readable ${v:-?} s (computed in ${c:-?} s)"
  done
fi
exit $rc

#!/usr/bin/env bash
# Dashboard speed (issue 13): the jobs page over 100,000 stored jobs and the job page of a
# 1,024-node cascade, rendered in headless Chromium, next to the same data fetched as JSON — in
# one run, as ratios (these machines are noisy). Usage: bench/dashboard.sh [BUILD] [JOBS] [NODES]
set -euo pipefail
BUILD=${1:-build}
JOBS=${2:-100000}
NODES=${3:-1024}
RUNS=${RUNS:-5}
cd "$(dirname "$0")/.."
cmake --build "$BUILD" -j2 --target dashboard_seed faultline-aggregator >/dev/null
OUT=bench/out/dashboard
mkdir -p "$OUT"
DB="$OUT/store-$JOBS-$NODES.db"
if [ ! -f "$DB" ]; then
  echo "seeding $DB: $JOBS jobs, a $NODES-node cascade" >&2
  "$BUILD/bench/dashboard_seed" "$DB.tmp" "$JOBS" "$NODES" >/dev/null
  mv "$DB.tmp" "$DB"
fi
rm -f "$OUT/port"
"$BUILD/aggregator/faultline-aggregator" --db "$DB" --port 0 --port-file "$OUT/port" --rules rules \
  --ingest-endpoint tcp://127.0.0.1:0 2>"$OUT/aggregator.log" &
AGG=$!
trap 'kill $AGG 2>/dev/null || true' EXIT
for _ in $(seq 1 200); do [ -s "$OUT/port" ] && break; sleep 0.05; done
BASE="http://127.0.0.1:$(cat "$OUT/port")"
echo "dashboard bench: $JOBS jobs, $NODES-node cascade, median of $RUNS runs, $(nproc) cores"
node bench/dashboard.mjs "$BASE" cascade "$RUNS"

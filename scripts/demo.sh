#!/usr/bin/env bash
# make demo: attribute every bundled sample and print a summary table, then one full report.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
FAULTLINE="$BUILD/aggregator/faultline"
echo "== faultline attribute on every bundle in samples/ (expected verdicts from samples/*/expected.json)"
echo
python3 scripts/check-samples.py "$FAULTLINE" samples || true
echo
echo "== the same on samples/real: logs posted in public threads, causes established there (see each README.md)"
echo
python3 scripts/check-samples.py "$FAULTLINE" samples/real || true
echo
echo "== the first-run ledger (samples/real/LEDGER.md): each real bundle's verdict on its first run, before any change for it"
echo
python3 scripts/ledger.py score || true
echo
echo "== one full report: samples/cascade64-xid79 (64 nodes, hundreds of NCCL errors, one Xid 79)"
echo
"$FAULTLINE" attribute samples/cascade64-xid79 | sed -n '1,/^coverage:/p' | awk 'NR <= 40'
echo "  ... (coverage omitted; run: $FAULTLINE attribute samples/cascade64-xid79 [--json])"
echo
echo "== metric evidence: samples/metrics/dcgm-remap-only, whose logs hold only cascade, against a Prometheus started here"
echo "   (its blocks backfilled from the sample's DCGM exporter series with promtool; 127.0.0.1 only)"
echo
PROM=$(mktemp -d)
python3 samples/metrics/dcgm-remap-only/series.py > "$PROM/series.om"
if promtool tsdb create-blocks-from openmetrics "$PROM/series.om" "$PROM/data" > "$PROM/promtool.log" 2>&1; then
  printf 'global:\n  scrape_interval: 1h\n' > "$PROM/prometheus.yml"
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  prometheus --config.file="$PROM/prometheus.yml" --storage.tsdb.path="$PROM/data" --storage.tsdb.retention.time=100y \
    --web.listen-address="127.0.0.1:$PORT" > "$PROM/log" 2>&1 &
  PROM_PID=$!
  python3 -c "
import sys, time, urllib.request
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        urllib.request.urlopen('http://127.0.0.1:$PORT/-/ready', timeout=2); sys.exit(0)
    except Exception: time.sleep(0.1)
sys.exit(1)" || echo "  (Prometheus did not start: $PROM/log)"
  echo "-- from the logs alone:"
  "$FAULTLINE" attribute samples/metrics/dcgm-remap-only/bundle | sed -n '1,3p'
  echo "-- with --prometheus http://127.0.0.1:$PORT:"
  "$FAULTLINE" attribute --prometheus "http://127.0.0.1:$PORT" samples/metrics/dcgm-remap-only/bundle | sed -n '1,/^chain:/p'
  kill "$PROM_PID" 2>/dev/null || true
  wait "$PROM_PID" 2>/dev/null || true
else
  echo "  (promtool failed: $(tail -1 "$PROM/promtool.log"))"
fi
rm -rf "$PROM"
echo
echo "== the same diagnoses as self-contained HTML pages (the dashboard's job view; open in a browser)"
HTML="$BUILD/demo-html"
mkdir -p "$HTML"
{
  echo '<!doctype html><meta charset="utf-8"><title>faultline demo</title>'
  echo '<h1>faultline: the bundled samples</h1><ul>'
} > "$HTML/index.html"
for dir in samples/*/ samples/real/*/; do
  [ -f "$dir/job.json" ] || continue
  name=$(basename "$dir")
  "$FAULTLINE" attribute "$dir" --html "$HTML/$name.html" >/dev/null 2>&1 || continue
  verdict=$(python3 -c "import json,sys; d=json.load(open('$dir/expected.json')); print(d['terminal_state'], '/', d['sub_domain'])" 2>/dev/null || true)
  echo "<li><a href=\"$name.html\">$name</a> $verdict</li>" >> "$HTML/index.html"
done
echo '</ul>' >> "$HTML/index.html"
echo "  file://$(cd "$HTML" && pwd)/index.html  ($(ls "$HTML" | grep -c '\.html$') pages)"
echo "  live: faultline-aggregator serves the same views at http://127.0.0.1:8470/ui/ (docs/dashboard.md)"

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
echo "== one full report: samples/cascade64-xid79 (64 nodes, hundreds of NCCL errors, one Xid 79)"
echo
"$FAULTLINE" attribute samples/cascade64-xid79 | sed -n '1,/^coverage:/p' | head -40
echo "  ... (coverage omitted; run: $FAULTLINE attribute samples/cascade64-xid79 [--json])"

#!/usr/bin/env bash
# Metric evidence against real PromQL servers (issue 31): Debian's Prometheus, its data backfilled
# with `promtool tsdb create-blocks-from openmetrics`, and Debian's VictoriaMetrics, fed through its
# import API; both on 127.0.0.1. Checks, with `faultline attribute --prometheus`:
#   1. a metric as the only evidence: samples/metrics/dcgm-remap-only (unattributed from its logs;
#      hardware on gpu-m01's GPU 0000:5d:00.0 from DCGM's uncorrectable remapped rows);
#   2. a metric confirming a log root: samples/timeout-hang-xid79 with DCGM's XID gauge going to
#      79 on gpu-c03 — the verdict stays the log's xid.79, the metric joins its chain;
#   3. an endpoint that is down: every query is an error entry in coverage, the log verdict stands.
# Usage: promql_test.sh FAULTLINE_BINARY SOURCE_DIR
set -euo pipefail
bin=$1 src=$2
tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "promql_test: FAIL: $*" >&2; exit 1; }
for t in prometheus promtool victoria-metrics; do command -v $t >/dev/null || fail "$t is not installed (scripts/install-deps.sh)"; done

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# wait_http URL: polls until it answers 2xx, 30 s at most.
wait_http() {
  python3 - "$1" <<'PY' || fail "no answer from $1"
import sys, time, urllib.request
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
            if 200 <= r.status < 300: sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
PY
}

remap=$src/samples/metrics/dcgm-remap-only
xid=$src/samples/timeout-hang-xid79
# The XID gauge of gpu-c03's lost GPU (its kernel says 11:27:51 at +02:00), one sample a minute.
python3 - > "$tmp/xid.om" <<'PY'
import calendar
t0, t1 = calendar.timegm((2024, 6, 6, 5, 50, 0)), calendar.timegm((2024, 6, 6, 14, 10, 0))
ev = calendar.timegm((2024, 6, 6, 9, 28, 0))
print("# TYPE DCGM_FI_DEV_XID_ERRORS gauge")
for host, pci in [("gpu-c03", "00000000:CA:00.0"), ("gpu-c01", "00000000:CA:00.0")]:
    for t in range(t0, t1 + 1, 60):
        v = 79 if host == "gpu-c03" and t >= ev else 0
        print(f'DCGM_FI_DEV_XID_ERRORS{{gpu="2",pci_bus_id="{pci}",Hostname="{host}"}} {v} {t}')
print("# EOF")
PY

# verdict NAME BUNDLE [attribute args...]: the JSON diagnosis in $tmp/NAME.json
verdict() { local name=$1 bundle=$2; shift 2; "$bin" --rules-cache off attribute --json "$@" "$bundle" > "$tmp/$name.json" || fail "attribute $name"; }
# check NAME PYTHON-EXPR: asserts over d (the diagnosis)
check() {
  python3 - "$tmp/$1.json" "$2" "$1" <<'PY' || exit 1
import json, os, sys
d = json.load(open(sys.argv[1]))
# The same bundle's verdict from its logs alone, when the check compares with it.
logs_path = os.path.join(os.path.dirname(sys.argv[1]), sys.argv[3].split("-")[0] + "-logs.json")
logs = json.load(open(logs_path)) if os.path.exists(logs_path) else None
def count(v, rule, node):
    return sum(e["count"] for e in v["chain"] if e["rule_id"] == rule and e["node"] == node)
chain = d["chain"]; cov = d["coverage"]
prom = [c for c in cov if c.get("format") == "promql"]
if not eval(sys.argv[2]):
    print(f"promql_test: FAIL: {sys.argv[3]}: {sys.argv[2]}\n  verdict: {d['terminal_state']} {d['sub_domain']} "
          f"{[r['node'] for r in d['responsible_nodes']]} {d['cause']['rule_id'] if d['cause'] else None}\n"
          f"  promql coverage: {[(c['source'], c['status'], c.get('reason')) for c in prom]}", file=sys.stderr)
    sys.exit(1)
PY
}

# Logs alone.
verdict remap-logs "$remap/bundle"
check remap-logs 'd["sub_domain"] == "unattributed" and not prom'
verdict xid-logs "$xid"
check xid-logs 'd["cause"]["rule_id"] == "xid.79" and [r["node"] for r in d["responsible_nodes"]] == ["gpu-c03"]'

# checks_against URL ENGINE
checks_against() {
  local url=$1 engine=$2
  verdict "remap-$engine" "$remap/bundle" --prometheus "$url"
  check "remap-$engine" 'd["sub_domain"] == "hardware" and d["cause"]["rule_id"] == "metric.dcgm.uncorrectable_remapped_rows" and [(r["node"], r.get("device")) for r in d["responsible_nodes"]] == [("gpu-m01", "0000:5d:00.0")]'
  check "remap-$engine" 'any(c["status"] == "ok" and "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS" in c["source"] for c in prom) and all(c["status"] in ("ok", "empty") for c in prom)'
  check "remap-$engine" 'any(e["rule_id"] == "nccl.watchdog_timeout" and e["role"] == "cascade" for e in chain)'
  verdict "xid-$engine" "$xid" --prometheus "$url"
  check "xid-$engine" 'd["cause"]["rule_id"] == "xid.79" and [r["node"] for r in d["responsible_nodes"]] == ["gpu-c03"]'
  # The gauge's change is one more xid.79 on gpu-c03 (merged into the log's chain entry); gpu-c01's
  # gauge stayed 0.
  check "xid-$engine" 'count(d, "xid.79", "gpu-c03") == count(logs, "xid.79", "gpu-c03") + 1 and count(d, "xid.79", "gpu-c01") == 0'
  echo "promql_test: $engine ok"
}

# Prometheus, its blocks backfilled from OpenMetrics (retention long enough for 2024's samples).
mkdir -p "$tmp/prom"
{ python3 "$remap/series.py" | grep -v '^# EOF'; grep -v '^# TYPE' "$tmp/xid.om"; } > "$tmp/all.om"
promtool tsdb create-blocks-from openmetrics "$tmp/all.om" "$tmp/prom/data" > "$tmp/promtool.log" 2>&1 \
  || fail "promtool: $(tail -3 "$tmp/promtool.log")"
printf 'global:\n  scrape_interval: 1h\n' > "$tmp/prom/prometheus.yml"
port=$(free_port)
prometheus --config.file="$tmp/prom/prometheus.yml" --storage.tsdb.path="$tmp/prom/data" \
  --storage.tsdb.retention.time=100y --web.listen-address="127.0.0.1:$port" > "$tmp/prom/log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$port/-/ready"
checks_against "http://127.0.0.1:$port" prometheus

# VictoriaMetrics, the same series through its Prometheus-text import (millisecond stamps).
vport=$(free_port)
victoria-metrics -storageDataPath="$tmp/vm" -retentionPeriod=100y -httpListenAddr="127.0.0.1:$vport" \
  -search.disableCache > "$tmp/vm.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$vport/health"
{ python3 "$remap/series.py" --prometheus-text
  grep -v '^#' "$tmp/xid.om" | awk '{ $NF = $NF * 1000; print }'; } > "$tmp/all.prom"
python3 - "http://127.0.0.1:$vport" "$tmp/all.prom" <<'PY' || fail "VictoriaMetrics import"
import sys, urllib.request
base, path = sys.argv[1], sys.argv[2]
urllib.request.urlopen(urllib.request.Request(base + "/api/v1/import/prometheus", data=open(path, "rb").read()), timeout=30)
urllib.request.urlopen(base + "/internal/force_flush", timeout=30)
PY
checks_against "http://127.0.0.1:$vport" victoriametrics

# An endpoint that is down: coverage says so for every query; the verdicts are the logs' own.
dead=$(free_port)
verdict remap-down "$remap/bundle" --prometheus "http://127.0.0.1:$dead" --prometheus-timeout 2
check remap-down 'd["sub_domain"] == "unattributed" and len(prom) > 10 and all(c["status"] == "error" and c["reason"] for c in prom)'
verdict xid-down "$xid" --prometheus "http://127.0.0.1:$dead" --prometheus-timeout 2
check xid-down 'd["cause"]["rule_id"] == "xid.79" and all(c["status"] == "error" for c in prom)'
echo "promql_test: ok (Prometheus and VictoriaMetrics: metric-only root, metric confirming a log root, endpoint down)"

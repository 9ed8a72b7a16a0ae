#!/usr/bin/env bash
# The five-minute start (docs/quickstart.md): one aggregator and two agents on this machine, on
# loopback, with CurveZMQ keys; a job starts on both nodes, gpu-a01's GPU falls off the bus (an
# Xid 79 written to the log its agent follows) and gpu-a02's NCCL ranks then fail; the job ends
# and the aggregator's verdict is printed, with the dashboard's address.
#
#   scripts/try-live.sh [--build DIR] [--dir DIR] [--keep] [--check]
#
#   --build DIR  where `make build` put the binaries (default: build)
#   --dir DIR    work directory (default: a new temporary one); keys, store, logs, spools
#   --keep       leave the aggregator and agents running (stop them with the printed kill line)
#   --check      exit 1 unless the verdict is hardware, xid.79, gpu-a01 (make test runs this)
#
# Needs nothing but the built binaries: no root, no Slurm, no GPU. Every port is chosen by the
# kernel (127.0.0.1, port 0) and written to a file the script reads.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build"
work=""
keep=0
check=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --dir) work="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    --check) check=1; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "try-live: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

cli="$build/aggregator/faultline"
aggregator="$build/aggregator/faultline-aggregator"
agent="$build/agent/faultline-agent"
for b in "$cli" "$aggregator" "$agent"; do
  [[ -x "$b" ]] || { echo "try-live: $b is missing: run 'make build' first" >&2; exit 2; }
done
made_work=0
if [[ -z "$work" ]]; then work="$(mktemp -d /tmp/faultline-try.XXXXXX)"; made_work=1; fi
mkdir -p "$work"
work="$(cd "$work" && pwd)"

pids=()
cleanup() {
  if [[ $keep -eq 1 ]]; then return; fi
  if [[ ${#pids[@]} -gt 0 ]]; then kill "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; fi
  # A temporary directory of our own goes with the processes (--dir DIR stays).
  if [[ $made_work -eq 1 ]]; then rm -rf "$work"; fi
}
trap cleanup EXIT

say() { printf '\n== %s\n' "$*"; }
# Polls `cmd` until it succeeds, up to $1 seconds.
wait_for() {
  local seconds="$1"; shift
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then return 1; fi
    sleep 0.2
  done
}
nonempty() { [[ -s "$1" ]]; }

say "1. keys: the aggregator's, one per node, the nodes' public keys in the allow dir"
"$cli" keygen "$work/server" --name server >/dev/null
mkdir -p "$work/agents.d"
for host in gpu-a01 gpu-a02; do
  "$cli" keygen "$work/$host" --name agent >/dev/null
  cp "$work/$host/agent.pub" "$work/agents.d/$host.pub"
done
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
echo "   $work/server/server.{key,pub}, $work/agents.d/gpu-a0{1,2}.pub, $work/token"

say "2. the aggregator: store, HTTP API and dashboard, CurveZMQ ingest"
rm -f "$work/port" "$work/ingest"
"$aggregator" --db "$work/faultline.db" --listen 127.0.0.1 --port 0 --port-file "$work/port" \
  --token-file "$work/token" --rules "$here/rules" \
  --ingest-endpoint 'tcp://127.0.0.1:*' --ingest-endpoint-file "$work/ingest" \
  --curve-secret-key "$work/server/server.key" --allow-dir "$work/agents.d" \
  2> "$work/aggregator.log" &
pids+=($!)
wait_for 30 nonempty "$work/port" && wait_for 30 nonempty "$work/ingest" ||
  { echo "try-live: the aggregator did not start; its log:" >&2; cat "$work/aggregator.log" >&2; exit 1; }
server="http://127.0.0.1:$(cat "$work/port")"
endpoint="$(cat "$work/ingest")"
echo "   API and dashboard on $server, agents' ingest on $endpoint"

say "3. two agents, each following its node's kernel log (here: a file the script writes)"
for host in gpu-a01 gpu-a02; do
  : > "$work/$host/kern.log"
  "$agent" --hostname "$host" --state-dir "$work/$host" \
    --endpoints "$endpoint" --curve-secret-key-file "$work/$host/agent.key" \
    --curve-server-public-key "$(cat "$work/server/server.pub")" \
    --journald false --kmsg false --fabricmanager-log "" --nvidia-smi "" \
    --file-globs "$work/$host/kern.log" --utc-offset-s 0 --file-poll-ms 100 \
    --rules-dirs "$here/rules" --rules-override-dir "" --heartbeat-interval-s 2 \
    2> "$work/$host/agent.log" &
  pids+=($!)
done
export FAULTLINE_SERVER="$server"
agents_live() { "$cli" --token-file "$work/token" agents --json | grep -c '"live": true' | grep -qx 2; }
wait_for 30 agents_live ||
  { echo "try-live: the agents did not check in; their logs:" >&2; cat "$work"/gpu-a0*/agent.log >&2; exit 1; }
"$cli" --token-file "$work/token" agents | sed 's/^/   /'

# Stamps: the job started a minute ago, the GPU fell off 20 s ago, the ranks failed 10 s ago.
ago() { date -u -d "@$(( $(date +%s) - $1 ))" +%Y-%m-%dT%H:%M:%S.000000+00:00; }
say "4. job 1001 started on gpu-a[01-02] (what the Slurm prolog reports)"
"$cli" --token-file "$work/token" job start 1001 --nodes 'gpu-a[01-02]' --time "$(ago 60)" | sed 's/^/   /'

say "5. gpu-a01's GPU falls off the bus; gpu-a02's NCCL ranks lose their peer"
echo "$(ago 20) gpu-a01 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus." \
  >> "$work/gpu-a01/kern.log"
for i in 1 2 3; do
  echo "$(ago 10) gpu-a02 python[5151]: gpu-a02:5151:5190 [$i] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.11<41234> with status=12 opcode=0 len=0 vendor err 129 (Recv) localGid ::ffff:10.0.0.12 remoteGids::ffff:10.0.0.11 hca mlx5_0" \
    >> "$work/gpu-a02/kern.log"
done
cat "$work/gpu-a01/kern.log" "$work/gpu-a02/kern.log" | sed 's/^/   /'
# The agents batch what they read every few hundred milliseconds; give them a moment.
stored() {
  "$cli" --token-file "$work/token" symptoms --node gpu-a01 --json | grep -q '"xid.79"' &&
    "$cli" --token-file "$work/token" symptoms --node gpu-a02 --json | grep -q '"nccl\.'
}
wait_for 30 stored || { echo "try-live: the symptoms did not reach the aggregator" >&2; exit 1; }

say "6. the job ends FAILED (what the Slurm epilog does); the verdict"
"$cli" --token-file "$work/token" job end 1001 --exit-code 1:0 | sed 's/^/   /'
"$cli" --token-file "$work/token" job 1001 | tee "$work/verdict.txt" | sed 's/^/   /'

say "the dashboard"
echo "   $server/ui/?token=$(cat "$work/token")"
echo "   (the token is kept in a cookie after the first visit)"
if [[ $keep -eq 1 ]]; then
  echo "   still running; stop with: kill ${pids[*]}"
  echo "   files: $work"
fi

if [[ $check -eq 1 ]]; then
  json="$("$cli" --token-file "$work/token" job 1001 --json)"
  python3 - "$json" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
d = d.get("diagnosis", d)
want = {"sub_domain": "hardware", "cause": "xid.79", "node": "gpu-a01"}
got = {"sub_domain": d.get("sub_domain"),
       "cause": (d.get("cause") or {}).get("rule_id"),
       "node": (d.get("responsible_nodes") or [{}])[0].get("node") if d.get("responsible_nodes") else None}
if got != want:
    print(f"try-live: expected {want}, got {got}", file=sys.stderr)
    sys.exit(1)
print("try-live: check passed:", got)
PY
fi

#!/usr/bin/env bash
# relay_bytes.sh: bytes per failed job on a site relay's upstream link (site aggregator -> central
# aggregator) in four relay configurations — verdicts + node history, + zstd, + symptom summaries,
# + summaries and zstd — against the bytes the site's agents sent the site aggregator for the same
# failures: what the thin link would carry if every node reported straight to the central.
#
# The input: every sample whose node logs are all journal files (as the e2e Harness in
# tests/aggregator/core/agents_e2e_test.cpp picks them), plus cascade64-xid79 (64 nodes), whose
# raw dmesg becomes the journal lines a node's journal would hold (boot_time from the sample's
# node.json + seconds since boot, ident "kernel"): raw dmesg in a file has no wall time, so its
# symptoms would fall outside the job. Rank output and node.json stay behind, as in the Harness.
# One agent per hostname: a sample whose host is already taken is skipped (and said so).
#
# Per configuration a fresh central + site aggregator pair and a fresh fleet, on 127.0.0.1:
#   1. The central (its allow-dir has the site's key as relays/edge1.pub), the site aggregator
#      relaying to it (--relay-interval and --relay-ack-timeout as shipped: 2 s, 10 s), and one
#      real faultline-agent per node (CurveZMQ; a file source following an empty copy of the
#      node's logs; batch interval and aggregate window as shipped: 2 s, 10 s; heartbeats every
#      5 s, not 30: an agent whose first heartbeat finds the handshake not done yet drops it and
#      is first seen one interval later; heartbeats add nothing to the relay's traffic).
#      The agents use `compression: zstd` where the relay does (--relay-zstd): like with like.
#   2. Join: once every agent is seen and the relay has sent those agent_seen node events and had
#      them acknowledged, the counters are read; this part is reported apart, not per job.
#   3. Episode: every node's logs are appended at once. Once the site holds every symptom
#      occurrence (`faultline scan -q` over the same files), each sample's job end is reported
#      with `faultline job end` (its job.json) — the epilog runs after the evidence is in — one
#      at a time, the next once the central holds the previous verdict: jobs that fail apart,
#      each verdict in a relay batch of its own (zstd gets no help from the others).
#   4. Done (polled, deadline WAIT_S per wait): every failed job has a final verdict at the
#      site, the central holds the same revisions as edge1:JOBID, and the relay outbox is empty
#      with every collected batch acknowledged.
# Revisions: the samples' jobs ended in 2024, so when a job end is reported its nodes have long
# reported past its end + margin and the evidence is in: each failed job is judged once (job_end,
# final at once). A job judged while evidence still arrives gets more revisions (late_symptoms):
# LIVE_CHUNKS=K reports the ends first and feeds the logs in K parts after them. A revision that
# changes the verdict is relayed with its whole diagnosis; one that repeats it, as a reference.
# Relay bytes = the site's faultline_relay_sent_bytes_total over the episode (payload after zstd,
# resends included). Agents->site = the site's faultline_ingest_received_bytes_total{type="batch"}
# (type + payload frames); heartbeats are printed apart (periodic, not per failure).
#
# Usage: bench/relay_bytes.sh [BUILD_DIR]   (default: build; needs faultline,
#        faultline-aggregator and faultline-agent built there, curl, python3; ~2.5 min on a
#        2-core VM)   KEEP=1 keeps the temp dir (logs, databases); WAIT_S=N per-wait deadline;
#        LIVE_CHUNKS=K (above).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
for b in aggregator/faultline aggregator/faultline-aggregator agent/faultline-agent; do
  [[ -x $build/$b ]] || { echo "missing $build/$b: cmake --build $build --target faultline faultline-aggregator faultline-agent" >&2; exit 1; }
done
for c in curl python3; do command -v "$c" >/dev/null || { echo "needs $c" >&2; exit 1; }; done
WAIT_S=${WAIT_S:-60}
SITE=edge1

tmp=$(mktemp -d /tmp/relay-bytes.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  if [[ ${KEEP:-0} == 1 ]]; then echo "kept $tmp" >&2; else rm -rf "$tmp"; fi
}
trap cleanup EXIT

# Copies, so that all four configurations run the same build even if the tree is rebuilt meanwhile.
mkdir -p "$tmp/bin"
cp "$build/aggregator/faultline" "$build/aggregator/faultline-aggregator" "$build/agent/faultline-agent" "$tmp/bin/"
cli=$tmp/bin/faultline
aggregator=$tmp/bin/faultline-aggregator
agent=$tmp/bin/faultline-agent

# ---- input: reduced bundles, $tmp/in/SAMPLE/{job.json,nodes/HOST/*.log} ----
declare -A host_sample=()
samples=() hosts=() skipped=()
take_sample() {  # sample dir -> false (and noted) when one of its hosts is taken
  local d=$1 s h
  s=$(basename "$d")
  for h in "$d"/nodes/*/; do
    h=$(basename "$h")
    if [[ -n ${host_sample[$h]:-} ]]; then
      skipped+=("$s (host $h is in ${host_sample[$h]} too)")
      return 1
    fi
  done
  for h in "$d"/nodes/*/; do
    h=$(basename "$h")
    host_sample[$h]=$s
    hosts+=("$h")
  done
  samples+=("$s")
  mkdir -p "$tmp/in/$s"
  cp "$d/job.json" "$tmp/in/$s/"
}
for d in "$root"/samples/*/; do
  d=${d%/}
  [[ -f $d/job.json && -d $d/nodes ]] || continue
  journal_only=1
  for f in "$d"/nodes/*/*; do
    b=$(basename "$f")
    [[ $b == node.json || $b == journal* ]] || journal_only=0
  done
  if (( ! journal_only )) || ! take_sample "$d"; then continue; fi
  for n in "$d"/nodes/*/; do
    out=$tmp/in/$(basename "$d")/nodes/$(basename "$n")
    mkdir -p "$out"
    for f in "$n"*; do
      [[ $(basename "$f") == node.json ]] || cp "$f" "$out/$(basename "$f").log"
    done
  done
done
cascade=$root/samples/cascade64-xid79
if take_sample "$cascade"; then
  python3 - "$cascade/nodes" "$tmp/in/cascade64-xid79/nodes" <<'EOF'
import json, os, re, sys
from datetime import datetime, timedelta, timezone
src, dst = sys.argv[1], sys.argv[2]
dmesg = re.compile(r"^\[\s*(\d+)\.(\d+)\] (.*)$")
for host in sorted(os.listdir(src)):
    boot = datetime.strptime(json.load(open(f"{src}/{host}/node.json"))["boot_time"],
                             "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
    files = [f for f in os.listdir(f"{src}/{host}") if f != "node.json"]
    if files != ["dmesg.txt"]:
        sys.exit(f"cascade64-xid79/{host}: expected only dmesg.txt, found {files}")
    os.makedirs(f"{dst}/{host}", exist_ok=True)
    with open(f"{dst}/{host}/journal.txt.log", "w") as out:
        for line in open(f"{src}/{host}/dmesg.txt"):
            m = dmesg.match(line.rstrip("\n"))
            if not m:
                sys.exit(f"cascade64-xid79/{host}: not a raw dmesg line: {line!r}")
            t = boot + timedelta(seconds=int(m.group(1)), microseconds=int(m.group(2).ljust(6, "0")[:6]))
            out.write(f"{t:%Y-%m-%dT%H:%M:%S.%f}+00:00 {host} kernel: {m.group(3)}\n")
EOF
fi
inputs=()
for h in "${hosts[@]}"; do inputs+=("$tmp/in/${host_sample[$h]}/nodes/$h"/*.log); done
input_bytes=$(cat "${inputs[@]}" | wc -c)
# Symptom occurrences the site must hold before the jobs end (the same parsers and rules).
expected=$("$cli" --rules "$root/rules" scan -q "${inputs[@]}" | awk '$1 == "records" { print $4 }')
# LIVE_CHUNKS=K (K > 1): the jobs end first and their nodes' logs arrive afterwards in K parts
# (by lines), as when an epilog reports the end while agents still ship: each part that changes
# what is known makes late_symptoms revisions. expected_part[k]: occurrences after part k.
LIVE_CHUNKS=${LIVE_CHUNKS:-1}
expected_part=()
if (( LIVE_CHUNKS > 1 )); then
  for f in "${inputs[@]}"; do
    n=$(wc -l < "$f")
    for ((k = 1; k <= LIVE_CHUNKS; k++)); do
      from=$(( (k - 1) * n / LIVE_CHUNKS + 1 )) to=$(( k * n / LIVE_CHUNKS ))
      if (( to >= from )); then sed -n "${from},${to}p" "$f"; fi > "$f.part$k"
    done
  done
  for ((k = 1; k <= LIVE_CHUNKS; k++)); do
    parts=()
    for f in "${inputs[@]}"; do for ((j = 1; j <= k; j++)); do parts+=("$f.part$j"); done; done
    expected_part[k]=$("$cli" --rules "$root/rules" scan -q "${parts[@]}" | awk '$1 == "records" { print $4 }')
  done
fi
# One line per sample: job id, then the `faultline job end` arguments.
for s in "${samples[@]}"; do
  python3 - "$tmp/in/$s/job.json" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print("\t".join([j["job_id"], "--nodes", j["nodelist"], "--state", j["state"].split()[0],
                 "--exit-code", j.get("exit_code", "0:0"), "--start-time", j["start_time"], "--time", j["end_time"]]))
EOF
done > "$tmp/job-ends.tsv"

# ---- keys: the central, the site (also its relay client key), one per agent ----
echo t0ken > "$tmp/token"
"$cli" keygen "$tmp/keys" --name central >/dev/null
"$cli" keygen "$tmp/keys" --name site >/dev/null
mkdir -p "$tmp/central.d/relays" "$tmp/site.d"
cp "$tmp/keys/site.pub" "$tmp/central.d/relays/$SITE.pub"
for h in "${hosts[@]}"; do
  "$cli" keygen "$tmp/keys/agents" --name "$h" >/dev/null
  cp "$tmp/keys/agents/$h.pub" "$tmp/site.d/$h.pub"
done
site_pub=$(tr -d '\n' < "$tmp/keys/site.pub")

# ---- helpers ----
poll() {  # SECONDS WHAT CMD...: runs CMD every 0.1 s until it succeeds; fails after SECONDS
  local deadline=$((SECONDS + $1)) what=$2
  shift 2
  until "$@"; do
    if (( SECONDS >= deadline )); then echo "timed out waiting for $what" >&2; return 1; fi
    sleep 0.1
  done
}
both_written() { [[ -s $1 && -s $2 ]]; }
scrape() { curl -sf "$1/metrics" > "$2"; }
metric() {  # METRICS_FILE SERIES -> its value (0 when absent)
  awk -v s="$2" '$1 == s { v = $2 } END { printf "%.0f\n", v + 0 }' "$1"
}

# Waits (polling every 0.1 s in one process, against a deadline) and reports over the site's
# store (read-only) and the two HTTP APIs.
cat > "$tmp/look.py" <<'EOF'
import json, sqlite3, sys, time, urllib.request

def get(url, text=False):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode() if text else json.load(r)
    except Exception:
        return None

def one(path, q, *params):
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
    try:
        return db.execute(q, params).fetchone()
    finally:
        db.close()

def metrics(url):
    text = get(f"{url}/metrics", text=True) or ""
    return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l and l[0] != "#"}

def revs(job):
    return [(r["revision"], r["status"], r["reason"], r["sub_domain"], r.get("cause")) for r in job["revisions"]]

def agents(url, n):  # the site has seen n agents
    return metrics(url).get("faultline_store_agents", 0) >= int(n)

def occurrences(db, n):  # the site holds n symptom occurrences
    return one(db, "SELECT COALESCE(SUM(count), 0) FROM symptoms")[0] == int(n)

def drained(url, db):  # every node event stored so far collected; outbox empty; every batch acked
    m = metrics(url)
    c = m.get("faultline_relay_collected_batches_total", 0)
    return (m.get("faultline_relay_outbox_batches", -1) == 0 and c > 0 and
            m.get("faultline_relay_acked_batches_total", 0) == c and
            m.get("faultline_relay_collected_items_total", 0) >= one(db, "SELECT COUNT(*) FROM node_events")[0])

def settled(site_url, central_url, site, *ids):  # final at the site, the same revisions at the central
    for i in ids:
        s, c = get(f"{site_url}/jobs/{i}"), get(f"{central_url}/jobs/{site}:{i}")
        if not s or not s.get("verdict") or s["verdict"]["status"] != "final" or not c or revs(c) != revs(s):
            return False
    return True

_quiet = {}
def quiet(url, db, secs):  # no new verdict revision at the site for SECS, and the relay drained
    n = one(db, "SELECT COUNT(*) FROM verdicts")[0]
    now = time.monotonic()
    if _quiet.get("n") != n:
        _quiet.update(n=n, since=now)
    return now - _quiet["since"] >= float(secs) and drained(url, db)

def wait(seconds, what, check, *args):
    deadline = time.monotonic() + float(seconds)
    while not check(*args):
        if time.monotonic() > deadline:
            sys.exit(f"timed out waiting for {what}")
        time.sleep(0.1)

cmd, args = sys.argv[1], sys.argv[2:]
if cmd == "wait":  # SECONDS WHAT CHECK ARGS...
    wait(args[0], args[1], globals()[args[2]], *args[3:])
elif cmd == "ended":  # SECONDS site-url central-url site job-id: after its end was reported
    seconds, site_url, central_url, site, i = args
    if (get(f"{site_url}/jobs/{i}") or {}).get("verdict"):  # judged in the request: a failed job
        wait(seconds, f"job {i}'s verdict at the central", settled, site_url, central_url, site, i)
        print(i)
elif cmd == "report":  # site-db site-url central-url site job-ids...
    db, site_url, central_url, site, ids = args[0], args[1], args[2], args[3], args[4:]
    nrev, dbytes = one(db, "SELECT COUNT(*), COALESCE(SUM(length(diagnosis)), 0) FROM verdicts")
    rows = one(db, "SELECT COUNT(*) FROM symptoms")[0]
    events = one(db, "SELECT COUNT(*) FROM node_events")[0]
    print(f"revisions={nrev} diagnosis_bytes={dbytes} symptom_rows={rows} node_events={events}")
    for i in ids:
        s, c = get(f"{site_url}/jobs/{i}"), get(f"{central_url}/jobs/{site}:{i}")
        v = s["verdict"]
        size = one(db, "SELECT COALESCE(SUM(length(diagnosis)), 0) FROM verdicts WHERE job_id = ?", i)[0]
        line = (f"job {i} {s.get('state', '?')}: {v['sub_domain']} {','.join(v.get('responsible_nodes') or []) or '-'} "
                f"{v.get('cause') or '-'}; revisions " + ", ".join(f"{r[0]} {r[2]} {r[1]}" for r in revs(s)))
        line += "" if c and revs(c) == revs(s) else " | CENTRAL DIFFERS: " + (str(revs(c)) if c else "missing")
        print(f"{line}\t; diagnosis JSON {size} B")
EOF
look() { python3 "$tmp/look.py" "$@"; }

# The samples' jobs ended in 2024: retention (180 days) would prune them within a minute.
keep_old=(--retention-days 36500 --job-retention-days 36500)

# ---- one configuration: NAME, agents' compression, relay flags ... ----
run_config() {
  local name=$1 compression=$2
  shift 2
  local d=$tmp/run-$name t0=$SECONDS
  mkdir -p "$d"
  "$aggregator" --db "$d/central.db" --port 0 --port-file "$d/central.port" --rules "$root/rules" --tick 0.05 \
    "${keep_old[@]}" --ingest-endpoint 'tcp://127.0.0.1:*' --ingest-endpoint-file "$d/central.ingest" \
    --curve-secret-key "$tmp/keys/central.key" --allow-dir "$tmp/central.d" 2> "$d/central.log" &
  local central_pid=$!
  pids+=("$central_pid")
  poll 20 "the central's ports" both_written "$d/central.port" "$d/central.ingest"
  local central_url
  central_url=http://127.0.0.1:$(cat "$d/central.port")
  "$aggregator" --db "$d/site.db" --port 0 --port-file "$d/site.port" --token-file "$tmp/token" \
    --rules "$root/rules" --tick 0.05 --settle 2 --final-timeout 10 "${keep_old[@]}" \
    --ingest-endpoint 'tcp://127.0.0.1:*' --ingest-endpoint-file "$d/site.ingest" \
    --curve-secret-key "$tmp/keys/site.key" --allow-dir "$tmp/site.d" \
    --relay-upstream "$(cat "$d/central.ingest")" --relay-site "$SITE" --relay-server-key "$tmp/keys/central.pub" \
    "$@" 2> "$d/site.log" &
  local site_pid=$!
  pids+=("$site_pid")
  poll 20 "the site's ports" both_written "$d/site.port" "$d/site.ingest"
  local site_url site_ep h f
  site_url=http://127.0.0.1:$(cat "$d/site.port")
  site_ep=$(cat "$d/site.ingest")

  local fleet=()
  for h in "${hosts[@]}"; do
    local home=$d/node-$h
    mkdir -p "$home/logs"
    for f in "$tmp/in/${host_sample[$h]}/nodes/$h"/*.log; do : > "$home/logs/$(basename "$f")"; done
    "$agent" --journald false --kmsg false --fabricmanager-log "" --nvidia-smi "" \
      --file-globs "$home/logs/*.log" --files-from-start true --utc-offset-s 0 \
      --endpoints "$site_ep" --state-dir "$home" --spool-path "$home/spool.db" \
      --rules-dirs "$root/rules" --rules-override-dir "" --log-rate-per-minute 0 \
      --hostname "$h" --agent-id "$h" --compression "$compression" --heartbeat-interval-s 5 \
      --curve-secret-key-file "$tmp/keys/agents/$h.key" --curve-server-public-key "$site_pub" \
      2> "$home/agent.log" &
    fleet+=($!)
    pids+=($!)
  done
  look wait "$WAIT_S" "every agent seen by the site" agents "$site_url" "${#hosts[@]}"
  look wait "$WAIT_S" "the join relayed" drained "$site_url" "$d/site.db"
  scrape "$site_url" "$d/join.metrics"
  echo "[$name] ${#hosts[@]} agents seen, join relayed: +$((SECONDS - t0)) s" >&2

  # One job end at a time, the next once the central holds the previous verdict: failures that
  # end apart, each verdict in a relay batch of its own (not compressed together with others).
  local line args judged ids=()
  end_jobs() {
    while IFS= read -r line; do
      IFS=$'\t' read -r -a args <<< "$line"
      "$cli" --server "$site_url" --token-file "$tmp/token" job end "${args[@]}" > /dev/null
      judged=$(look ended "$WAIT_S" "$site_url" "$central_url" "$SITE" "${args[0]}")
      [[ -z $judged ]] || ids+=("$judged")
    done < "$tmp/job-ends.tsv"
  }
  if (( LIVE_CHUNKS > 1 )); then
    end_jobs
    local k
    for ((k = 1; k <= LIVE_CHUNKS; k++)); do
      for h in "${hosts[@]}"; do
        for f in "$tmp/in/${host_sample[$h]}/nodes/$h"/*.log; do
          cat "$f.part$k" >> "$d/node-$h/logs/$(basename "$f")"
        done
      done
      look wait "$WAIT_S" "${expected_part[k]} symptom occurrences at the site" occurrences "$d/site.db" "${expected_part[k]}"
      look wait "$WAIT_S" "the revisions of part $k relayed" quiet "$site_url" "$d/site.db" 3
    done
    echo "[$name] every symptom stored at the site, in $LIVE_CHUNKS parts after the job ends: +$((SECONDS - t0)) s" >&2
  else
    for h in "${hosts[@]}"; do
      for f in "$tmp/in/${host_sample[$h]}/nodes/$h"/*.log; do cat "$f" >> "$d/node-$h/logs/$(basename "$f")"; done
    done
    look wait "$WAIT_S" "$expected symptom occurrences at the site" occurrences "$d/site.db" "$expected"
    echo "[$name] every symptom stored at the site: +$((SECONDS - t0)) s" >&2
    end_jobs
  fi
  (( ${#ids[@]} )) || { echo "[$name] no job was judged failed" >&2; return 1; }
  look wait "$WAIT_S" "final verdicts at the site and the same revisions at the central" \
    settled "$site_url" "$central_url" "$SITE" "${ids[@]}"
  look wait "$WAIT_S" "the relay outbox drained" drained "$site_url" "$d/site.db"
  scrape "$site_url" "$d/site.metrics"
  scrape "$central_url" "$d/central.metrics"
  look report "$d/site.db" "$site_url" "$central_url" "$SITE" "${ids[@]}" > "$d/report"
  echo "[$name] ${#ids[@]} failed jobs judged, relayed, acknowledged: +$((SECONDS - t0)) s" >&2
  kill -TERM "${fleet[@]}" "$site_pid" "$central_pid" 2>/dev/null || true
  wait "${fleet[@]}" "$site_pid" "$central_pid" 2>/dev/null || true
  echo "${#ids[@]} $((SECONDS - t0))" > "$d/jobs"
}

configs=(history history+zstd summaries summaries+zstd)
run_config history none
run_config history+zstd zstd --relay-zstd
run_config summaries none --relay-symptoms
run_config summaries+zstd zstd --relay-symptoms --relay-zstd
# With revisions (LIVE_CHUNKS > 1): the peer with every revision whole (--relay-full-revisions).
if (( LIVE_CHUNKS > 1 )); then
  configs+=(full+zstd)
  run_config full+zstd zstd --relay-zstd --relay-full-revisions
fi

# ---- report ----
val() { metric "$tmp/run-$1/$2.metrics" "$3"; }  # config, join|site|central, series
rfield() { head -1 "$tmp/run-$1/report" | tr ' ' '\n' | awk -F= -v k="$2" '$1 == k { print $2 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a / b }'; }
echo "input: ${#samples[@]} samples (${samples[*]}); ${#hosts[@]} nodes, one faultline-agent each;" \
  "$input_bytes bytes of node logs, $expected symptom occurrences"
for s in "${skipped[@]}"; do echo "skipped: $s"; done
echo "per configuration: a fresh central + site aggregator and fleet; agents' compression = the relay's"
echo
printf '%-15s %6s %9s %12s %9s %9s %7s %10s %14s %6s\n' config failed "relay B" "B/failed job" verdicts "as refs" \
  events summaries "agents->site B" ratio
bad=0
for c in "${configs[@]}"; do
  read -r jobs _ < "$tmp/run-$c/jobs"
  relay=$(( $(val "$c" site faultline_relay_sent_bytes_total) - $(val "$c" join faultline_relay_sent_bytes_total) ))
  join_items=$(val "$c" join faultline_relay_collected_items_total)  # agent_seen node events only
  items=$(( $(val "$c" site faultline_relay_collected_items_total) - join_items ))
  verdicts=$(rfield "$c" revisions)
  events=$(( $(rfield "$c" node_events) - join_items ))
  summaries=$(( items - verdicts - events ))
  batch=$(val "$c" site 'faultline_ingest_received_bytes_total{type="batch"}')
  printf '%-15s %6s %9s %12s %9s %9s %7s %10s %14s %6s\n' "$c" "$jobs" "$relay" "$((relay / jobs))" "$verdicts" \
    "$(val "$c" site faultline_relay_confirmed_revisions_total)" "$events" "$summaries" "$batch" "$(ratio "$batch" "$relay")"
  # The central must have stored what the site sent: every batch, revision and summary.
  if [[ $(val "$c" central 'faultline_relay_batches_total{result="stored"}') != $(val "$c" site faultline_relay_collected_batches_total) ||
        $(val "$c" central faultline_relay_verdicts_total) != "$verdicts" ||
        $(val "$c" central faultline_relay_symptoms_total) != "$summaries" ]]; then
    echo "  $c: the central's relay counters differ from the site's (KEEP=1 keeps $tmp/run-$c)"
    bad=1
  fi
done
echo
echo "relay B: the site's faultline_relay_sent_bytes_total over the episode (after zstd, resends included)"
echo "as refs: of the verdict revisions, those that repeated the verdict before them, relayed as a reference to it"
echo "agents->site B: the site's faultline_ingest_received_bytes_total{type=\"batch\"} (type + payload frames)"
printf 'join, not above: relay B for the %s agent_seen node events:' "${#hosts[@]}"
for c in "${configs[@]}"; do printf ' %s %s;' "$c" "$(val "$c" join faultline_relay_sent_bytes_total)"; done
echo
c=history
hb=$(( $(val "$c" site 'faultline_ingest_received_bytes_total{type="heartbeat"}') -
       $(val "$c" join 'faultline_ingest_received_bytes_total{type="heartbeat"}') ))
n=$(( $(val "$c" site faultline_heartbeats_total) - $(val "$c" join faultline_heartbeats_total) ))
if (( n > 0 )); then
  echo "agent heartbeats, not above ($c, after the join): $n = $hb B, $((hb / n)) B each; none crosses the relay;" \
    "${#hosts[@]} agents straight to the central: $(( ${#hosts[@]} * hb / n / 30 )) B/s (one per agent every 30 s as shipped)"
fi
echo "site store ($c): $(rfield "$c" revisions) verdict revisions, $(rfield "$c" diagnosis_bytes) B of diagnosis JSON;" \
  "$(rfield "$c" symptom_rows) symptom rows"
printf 'wall s:'
for c in "${configs[@]}"; do read -r _ w < "$tmp/run-$c/jobs"; printf ' %s %s;' "$c" "$w"; done
echo " all $SECONDS"
same=yes
for c in "${configs[@]:1}"; do
  cmp -s <(tail -n +2 "$tmp/run-history/report" | cut -f1) <(tail -n +2 "$tmp/run-$c/report" | cut -f1) || same=no
done
echo
echo "verdicts (same in every configuration: $same; the central's revisions = the site's unless marked):"
tail -n +2 "$tmp/run-history/report" | tr -d '\t' | sed 's/^/  /'
if grep -q 'CENTRAL DIFFERS' "$tmp"/run-*/report; then grep -H 'CENTRAL DIFFERS' "$tmp"/run-*/report; bad=1; fi
exit "$bad"

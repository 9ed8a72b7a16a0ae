#!/usr/bin/env bash
# Applies site.yml (both roles) to localhost (connection: local) into a scratch root, with package
# installation and service management off, and checks what results: the node's key pair, the
# aggregator's key pair, the allow-list entry, agent.yaml (accepted by the real faultline-agent),
# aggregator.env and the job-events token. A second host, edge01 (also local, its own scratch
# root), is an edge site's aggregator relaying to localhost as the central: its aggregator.env has
# the --relay-* options, its central.pub is the central's key, and the central's allow-list has
# relays/site-a.pub = the site's key (both envs are accepted by the real faultline-aggregator when
# it is found). A second GPU node, sitenode01 (its own scratch root), belongs to the edge site
# (faultline_aggregator_group=site_aggregators) and is rolled out in the same batch as the central's
# node, after it: its agent.yaml trusts the site's server.pub and ships to the site, its key is
# filed at the site only, and its health check asks the site. Then: a second apply changes nothing, check mode changes nothing, a health check
# that does not find the agent live fails the batch, the health check (default command mode, the real
# `faultline agents --json`) passes against a live aggregator + agent run from the applied files and
# fails once the agent is stopped, and a relay without ingest fails. Last, two replicas of one
# PostgreSQL store (faultline_aggregator_store): the URL only in a root-only env file, the unit's
# drop-in, a shared key pair and token.
#   apply_test.sh SOURCE_DIR FAULTLINE_AGENT_BINARY [all|check-fresh|apply] [FAULTLINE_AGGREGATOR_BINARY]
# check-fresh: only check mode on an empty root (must neither fail nor write anything); apply:
# everything else. CTest runs the two as separate tests so that they can run side by side.
set -euo pipefail

src=$(cd "$1" && pwd)
agent_bin=$(realpath "$2")
mode=${3:-all}
# Default: the build tree's, beside the agent's directory.
agg_bin=${4:-$(dirname "$agent_bin")/../aggregator/faultline-aggregator}
[ -x "$agent_bin" ] || { echo "apply_test: no faultline-agent binary at $agent_bin" >&2; exit 1; }

tmp=$(mktemp -d /tmp/faultline-ansible.XXXXXX)
pids=()  # every process started here; the trap kills what is still running
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
root=$tmp/root            # localhost: the central aggregator and the GPU node
site_root=$tmp/site-root  # edge01: the edge site's aggregator
node_root=$tmp/node-root  # sitenode01: a GPU node of the edge site
mkdir -p "$root" "$site_root" "$node_root"

export ANSIBLE_CONFIG=$src/ansible/ansible.cfg
export ANSIBLE_HOME=$tmp/ansible-home
export ANSIBLE_LOCAL_TEMP=$tmp/ansible-tmp
export ANSIBLE_REMOTE_TEMP=$tmp/ansible-tmp
export ANSIBLE_NOCOLOR=1
export ANSIBLE_FORCE_COLOR=0
export ANSIBLE_DEPRECATION_WARNINGS=0
export ANSIBLE_MODULE_COMPRESSION=ZIP_STORED  # less CPU per task; nothing goes over a wire here

# faultline_root per host (not an extra var, which would win over it): the relay tasks write
# into the central's root, the agent role files a node's key in its aggregators' roots.
cat > "$tmp/inventory.ini" <<INI
[aggregators]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$root

[site_aggregators]
edge01 ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$site_root

[gpu_nodes]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$root
sitenode01 ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$node_root faultline_aggregator_group=site_aggregators
INI
mkdir -p "$tmp/host_vars"
echo 'faultline_agent_hostname: testnode01' > "$tmp/host_vars/localhost.yml"
cat > "$tmp/host_vars/edge01.yml" <<VARS
faultline_aggregator_relay_upstream: tcp://localhost:7400
faultline_aggregator_relay_site: site-a
faultline_aggregator_relay_symptoms: true
faultline_aggregator_relay_rate_bytes_per_sec: 50000
faultline_aggregator_relay_max_bytes: 1048576
faultline_aggregator_relay_interval: 5
VARS

# What `faultline agents --json` prints, call by call: agents.py MODE. ok: both nodes' agents
# live, this build's version, the same start, a newer heartbeat each call; dead: not live; old: an
# older version live (the new one never connected); crashloop: a new start every call; hung: the
# heartbeat never advances.
agent_version=$("$agent_bin" --version | awk '{print $NF}')
cat > "$tmp/agents.py" <<PY
import json, os, sys
mode = sys.argv[1]
count_file = "$tmp/agents-calls-" + mode
n = int(open(count_file).read()) if os.path.exists(count_file) else 0
open(count_file, "w").write(str(n + 1))
# MODE is one mode for both nodes, or "A+B": testnode01 A, sitenode01 B (one playbook run checks two).
modes = dict(zip(["testnode01", "sitenode01"], mode.split("+") * (2 if "+" not in mode else 1)))
def agent(name):
    m = modes[name]
    return {"agent_id": name, "live": m != "dead",
            "agent_version": "0.0.1" if m == "old" else "$agent_version",
            "started": "2026-01-01T00:00:%02d.000Z" % (n if m == "crashloop" else 0),
            "last_heartbeat": "2026-01-01T00:01:%02d.000Z" % (0 if m == "hung" else n % 60)}
print(json.dumps([agent("testnode01"), agent("sitenode01")]))
PY

cat > "$tmp/vars.yml" <<VARS
faultline_install_package: false
faultline_manage_services: false
faultline_agent_user: root
faultline_aggregator_user: root
faultline_agent_keygen_command: $agent_bin keygen
faultline_aggregator_keygen_command: $agent_bin keygen
# Both nodes in one batch (the central's first): a batch that mixes aggregator groups.
faultline_agent_serial: 2
faultline_agent_edge_mode: true
faultline_agent_edge_rate_limit_bytes_per_sec: 12345
faultline_agent_extra_rules_dirs: [/etc/faultline/site-rules]
faultline_agent_extra_config: {spool_max_bytes: 1048576}
faultline_aggregator_retention_days: 14
faultline_aggregator_sacct_command: sacct --json --allusers
faultline_aggregator_extra_options: [--settle, 300]
faultline_agent_health_check: command
faultline_agent_health_check_command: python3 $tmp/agents.py ok
faultline_agent_health_check_retries: 1
faultline_agent_health_check_delay: 0
faultline_agent_health_check_stable_seconds: 0
faultline_agent_expected_version: "$agent_version"
VARS

fail() { echo "apply_test: FAIL: $*" >&2; exit 1; }

# run NAME [ansible-playbook args...]: output in $tmp/NAME.log; prints the recap line. The
# inventory: $inventory if set.
run() {
  local name=$1 t0=$SECONDS; shift
  if ! (cd "$src/ansible" && ansible-playbook -i "${inventory:-$tmp/inventory.ini}" -e "@$tmp/vars.yml" site.yml "$@") \
      > "$tmp/$name.log" 2>&1; then
    echo "apply_test: run $name failed after $((SECONDS - t0)) s" >&2
    cat "$tmp/$name.log" >&2
    return 1
  fi
  echo "run $name: $((SECONDS - t0)) s; $(grep -E '^(localhost|edge01|sitenode01) +:' "$tmp/$name.log" | tail -3 | tr '\n' ' ')"
}
# Tasks changed on all hosts (the recap's last line per host).
changed() {
  local n=0 h
  for h in localhost edge01 sitenode01; do
    n=$((n + $(grep -E "^$h +:" "$tmp/$1.log" | tail -1 | sed -E 's/.*changed=([0-9]+).*/\1/')))
  done
  echo $n
}

# 1. Check mode on an empty root: no failure, nothing written. Then the same with the services
# managed (a fresh host as an operator dry-runs it: no unit installed yet, so nothing to enable,
# start, restart or reload), and the shipped group_vars: a site aggregator without the central's
# ingest is refused with a clear message (nothing hard-coded stands in for it).
if [ "$mode" != apply ]; then
  empty_roots() {
    local r
    for r in "$root" "$site_root" "$node_root"; do
      [ -z "$(find "$r" -mindepth 1 -print -quit)" ] || fail "check mode ($1) wrote into $r: $(find "$r" -mindepth 1)"
    done
  }
  run check-empty --check || fail "check mode on an empty root failed"
  empty_roots "services off"
  run check-empty-services --check --diff -e faultline_manage_services=true \
    || fail "check mode on an empty root with faultline_manage_services=true failed"
  grep -qE '^skipping: .*' <(sed -n '/Enable and start faultline-aggregator/,/^TASK/p' "$tmp/check-empty-services.log") \
    || fail "check mode with services: 'Enable and start faultline-aggregator' was not skipped for want of its unit"
  empty_roots "services on"
  shipped=$tmp/shipped
  mkdir -p "$shipped"
  cp -r "$src/ansible/inventory/group_vars" "$shipped/"
  # The same aggregators, no nodes, and no host_vars (edge01's upstream is in $tmp/host_vars).
  sed '/^\[gpu_nodes\]/q' "$tmp/inventory.ini" > "$shipped/inventory.ini"
  if inventory=$shipped/inventory.ini run check-no-upstream --check 2>/dev/null; then
    fail "a site aggregator without faultline_aggregator_relay_upstream passed (the shipped group_vars hard-code one?)"
  fi
  grep -q 'faultline_aggregator_relay_upstream is not set' "$tmp/check-no-upstream.log" \
    || fail "a site aggregator without faultline_aggregator_relay_upstream: no clear error: $(grep -E 'fatal|msg' "$tmp/check-no-upstream.log")"
  empty_roots "no upstream"
  # The example inventory's edge site, uncommented: its nodes reach the site's aggregator on the
  # site's network, so they get no edge mode (the thin link is the relay's).
  python3 - "$src/ansible/inventory/example.ini" > "$shipped/example.ini" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
start = lines.index("# [site_a_aggregator]")
config = re.compile(r"^# (\[[a-z_:]+\]|[A-Za-z0-9_.\[\]:-]+|[a-z_]+=\S+)$")
print("\n".join(l[2:] if i >= start and config.match(l) else l for i, l in enumerate(lines)))
PY
  grep -qx 'faultline_aggregator_group=site_a_aggregator' "$shipped/example.ini" || fail "example.ini: no site example to check"
  ANSIBLE_INVENTORY_UNPARSED_FAILED=1 ansible-inventory -i "$shipped/example.ini" --host gpu-a001.site-a.example.net > "$tmp/site-node-vars.json" \
    || fail "ansible-inventory on the example inventory's site"
  python3 -c 'import json, sys
v = json.load(open(sys.argv[1]))
assert v.get("faultline_aggregator_group") == "site_a_aggregator", v
assert str(v.get("faultline_agent_edge_mode", False)).lower() not in ("true", "yes", "1"), v' "$tmp/site-node-vars.json" \
    || fail "example.ini: the edge site's nodes (on their site's network) get edge mode: $(cat "$tmp/site-node-vars.json")"
  if [ "$mode" = check-fresh ]; then
    echo "apply_test: ok (check mode on an empty root, services off and on; a site without its upstream refused)"
    exit 0
  fi
fi

# 2. Apply.
run apply || fail "first apply failed"
[ "$(changed apply)" -gt 0 ] || fail "first apply changed nothing"

curve=$root/etc/faultline/curve
for f in agent.key agent.pub server.key server.pub; do
  [ -s "$curve/$f" ] || fail "missing $curve/$f"
done
[ "$(stat -c %a "$curve/agent.key")" = 640 ] || fail "agent.key mode $(stat -c %a "$curve/agent.key")"
[ "$(stat -c %a "$curve/server.key")" = 640 ] || fail "server.key mode $(stat -c %a "$curve/server.key")"
for f in agent.pub server.pub agent.key server.key; do
  key=$(tr -d '\n' < "$curve/$f")
  [ ${#key} -eq 40 ] || fail "$f is not a 40-character Z85 key: '$key'"
done
[ "$(cat "$curve/agent.pub")" != "$(cat "$curve/server.pub")" ] || fail "agent and server share a key"
[ -z "$(find "$curve" -name '.keygen.*')" ] || fail "keygen scratch directory left behind"

allow=$root/etc/faultline/agents.d/testnode01.pub
[ -f "$allow" ] || fail "no allow-list entry $allow"
cmp -s "$allow" "$curve/agent.pub" || fail "allow-list entry differs from the node's public key"

conf=$root/etc/faultline/agent.yaml
grep -qx 'hostname: "testnode01"' "$conf" || fail "agent.yaml hostname"
grep -qx 'endpoints: \["tcp://localhost:7400"\]' "$conf" || fail "agent.yaml endpoints"
grep -qx 'curve_secret_key_file: "/etc/faultline/curve/agent.key"' "$conf" || fail "agent.yaml key path"
server_pub=$(tr -d '\n' < "$curve/server.pub")
grep -qxF "curve_server_public_key: $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$server_pub")" "$conf" \
  || fail "agent.yaml does not carry the aggregator's public key"
grep -qx 'rate_limit_bytes_per_sec: 12345' "$conf" || fail "agent.yaml edge rate cap"
grep -qx 'rules_dirs: \["/usr/share/faultline/rules", "/etc/faultline/site-rules"\]' "$conf" || fail "agent.yaml rules_dirs"
grep -qx 'spool_max_bytes: 1048576' "$conf" || fail "agent.yaml extra config"
# The real agent accepts the file (paths inside it are for the real root: point the key and the
# rules at the scratch root and the source tree).
"$agent_bin" --config "$conf" --curve-secret-key-file "$curve/agent.key" --rules-dirs "$src/rules" \
  --rules-override-dir "" --check-config > "$tmp/check-config.log" 2>&1 \
  || { cat "$tmp/check-config.log" >&2; fail "faultline-agent --check-config rejects agent.yaml"; }

# aggregator.env, read the way systemd reads it: quotes removed, then split into words.
env=$root/etc/faultline/aggregator.env
opts=$(sed -n 's/^FAULTLINE_AGGREGATOR_OPTS=//p' "$env")
python3 - "$opts" <<'PY' || fail "aggregator.env: $opts"
import shlex, sys
args = shlex.split(shlex.split(sys.argv[1])[0])
want = ["--listen", "127.0.0.1", "--port", "8470", "--retention-days", "14",
        "--job-retention-days", "180", "--sacct-command", "sacct --json --allusers", "--sacct-interval", "60",
        "--ingest-endpoint", "tcp://0.0.0.0:7400", "--curve-secret-key", "/etc/faultline/curve/server.key",
        "--allow-dir", "/etc/faultline/agents.d", "--settle", "300"]
if args != want:
    sys.exit(f"got {args}")
PY
token=$root/etc/faultline/token
[ "$(stat -c %a "$token")" = 640 ] || fail "token mode $(stat -c %a "$token")"
[ "$(wc -c < "$token")" -ge 32 ] || fail "token too short"
[ -d "$root/etc/faultline/agents.d" ] || fail "no allow-list directory"

# The edge site's relay: its own key pair, the central's key as central.pub, the --relay-* options,
# and its public key in the central's allow-list under relays/.
site_curve=$site_root/etc/faultline/curve
for f in server.key server.pub central.pub; do
  [ -s "$site_curve/$f" ] || fail "missing $site_curve/$f"
done
[ "$(cat "$site_curve/server.pub")" != "$(cat "$curve/server.pub")" ] || fail "site and central share a key"
cmp -s "$site_curve/central.pub" "$curve/server.pub" || fail "the site's central.pub is not the central's server.pub"
relay_key=$root/etc/faultline/agents.d/relays/site-a.pub
[ -f "$relay_key" ] || fail "no relay entry $relay_key in the central's allow-list"
cmp -s "$relay_key" "$site_curve/server.pub" || fail "relays/site-a.pub differs from the site's server.pub"
[ ! -e "$site_root/etc/faultline/agents.d/relays" ] || fail "the site got a relays/ directory of its own"
site_env=$site_root/etc/faultline/aggregator.env
site_opts=$(sed -n 's/^FAULTLINE_AGGREGATOR_OPTS=//p' "$site_env")
python3 - "$site_opts" <<'PY' || fail "site aggregator.env: $site_opts"
import shlex, sys
args = shlex.split(shlex.split(sys.argv[1])[0])
want = ["--listen", "127.0.0.1", "--port", "8470", "--retention-days", "14",
        "--job-retention-days", "180", "--sacct-command", "sacct --json --allusers", "--sacct-interval", "60",
        "--ingest-endpoint", "tcp://0.0.0.0:7400", "--curve-secret-key", "/etc/faultline/curve/server.key",
        "--allow-dir", "/etc/faultline/agents.d",
        "--relay-upstream", "tcp://localhost:7400", "--relay-site", "site-a",
        "--relay-server-key", "/etc/faultline/curve/central.pub", "--relay-symptoms", "--relay-zstd",
        "--relay-rate", "50000", "--relay-max-bytes", "1048576", "--relay-interval", "5",
        "--relay-ack-timeout", "10", "--settle", "300"]
if args != want:
    sys.exit(f"got {args}")
PY

# The edge site's node, in the central node's batch: it trusts the site's key (not the first
# node's), ships to the site, is filed in the site's allow-list only, and its health check asks the
# site. The central node's entry stays at the central only.
node_curve=$node_root/etc/faultline/curve
node_conf=$node_root/etc/faultline/agent.yaml
[ -s "$node_curve/agent.pub" ] || fail "missing $node_curve/agent.pub"
[ "$(cat "$node_curve/agent.pub")" != "$(cat "$curve/agent.pub")" ] || fail "the two nodes share a key"
grep -qx 'hostname: "sitenode01"' "$node_conf" || fail "site node's agent.yaml hostname"
grep -qx 'endpoints: \["tcp://edge01:7400"\]' "$node_conf" || fail "site node's agent.yaml endpoints: $(grep endpoints "$node_conf")"
site_pub=$(tr -d '\n' < "$site_curve/server.pub")
grep -qxF "curve_server_public_key: $(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$site_pub")" "$node_conf" \
  || fail "site node's agent.yaml does not carry the site aggregator's public key: $(grep curve_server "$node_conf")"
site_allow=$site_root/etc/faultline/agents.d/sitenode01.pub
[ -f "$site_allow" ] || fail "no allow-list entry $site_allow at the site"
cmp -s "$site_allow" "$node_curve/agent.pub" || fail "site allow-list entry differs from the site node's public key"
[ ! -e "$root/etc/faultline/agents.d/sitenode01.pub" ] || fail "the site node was filed at the central"
[ ! -e "$site_root/etc/faultline/agents.d/testnode01.pub" ] || fail "the central node was filed at the site"
grep -qE '^ok: \[sitenode01 -> edge01\]' <(sed -n '/Wait until the aggregator hears the agent (command)/,/^TASK/p' "$tmp/apply.log") \
  || fail "the site node's health check did not ask the site aggregator"
grep -qE '^ok: \[localhost( -> localhost)?\]' <(sed -n '/Wait until the aggregator hears the agent (command)/,/^TASK/p' "$tmp/apply.log") \
  || fail "the central node's health check did not ask the central aggregator"
"$agent_bin" --config "$node_conf" --curve-secret-key-file "$node_curve/agent.key" --rules-dirs "$src/rules" \
  --rules-override-dir "" --check-config > "$tmp/check-config-site.log" 2>&1 \
  || { cat "$tmp/check-config-site.log" >&2; fail "faultline-agent --check-config rejects the site node's agent.yaml"; }

# The real aggregator takes both envs' options (paths moved into the scratch roots, ephemeral
# ports, no sacct): the central loads the relay key with the node's, the site starts its relay.
# check_aggregator NAME ROOT LOG_LINE: runs it until it logs LOG_LINE, then stops it.
# aggregator_args ROOT: the options of ROOT's aggregator.env, NUL-separated, as run here.
aggregator_args() {
  python3 - "$(sed -n 's/^FAULTLINE_AGGREGATOR_OPTS=//p' "$1/etc/faultline/aggregator.env")" "$1" <<'PY'
import shlex, sys
args, out = iter(shlex.split(shlex.split(sys.argv[1])[0])), []
for a in args:
    if a in ("--sacct-command", "--sacct-interval"):
        next(args)
    elif a in ("--port", "--ingest-endpoint"):
        next(args)
        out += [a, "0" if a == "--port" else "tcp://127.0.0.1:*"]
    else:
        out.append(sys.argv[2] + a if a.startswith("/etc/faultline/") else a)
sys.stdout.write("".join(a + "\0" for a in out))
PY
}
check_aggregator() {
  local name=$1 r=$2 want=$3 args pid deadline=$((SECONDS + 30))
  mapfile -d '' args < <(aggregator_args "$r")
  [ ${#args[@]} -gt 0 ] || fail "no options in $r/etc/faultline/aggregator.env"
  "$agg_bin" --db "$tmp/$name.db" --rules "$src/rules" "${args[@]}" > "$tmp/$name-aggregator.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  until grep -qsF -- "$want" "$tmp/$name-aggregator.log"; do
    if ! kill -0 "$pid" 2>/dev/null || [ "$SECONDS" -ge "$deadline" ]; then
      kill "$pid" 2>/dev/null || true
      cat "$tmp/$name-aggregator.log" >&2
      fail "faultline-aggregator with the $name's aggregator.env did not log: $want"
    fi
    sleep 0.1
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" || true
  ! grep -F 'allow-list:' "$tmp/$name-aggregator.log" >&2 || fail "the $name's allow-list has bad entries"
}
if [ -x "$agg_bin" ]; then
  check_aggregator central "$root" "2 agent keys from $root/etc/faultline/agents.d"
  check_aggregator site "$site_root" "relaying site site-a to tcp://localhost:7400, with symptom summaries, zstd"
else
  echo "apply_test: no faultline-aggregator at $agg_bin: the envs are not run" >&2
fi

applied() {
  sha256sum "$curve"/* "$conf" "$env" "$token" "$relay_key" "$site_curve"/* "$site_env" "$node_curve"/* "$node_conf" \
    "$site_allow" | sha256sum
}
sum_before=$(applied)

# 3. Idempotent: a second apply changes nothing, keys included.
run apply-again || fail "second apply failed"
[ "$(changed apply-again)" -eq 0 ] || fail "second apply changed $(changed apply-again) task(s): $(grep -E '^changed:' "$tmp/apply-again.log")"
[ "$sum_before" = "$(applied)" ] || fail "second apply rewrote keys or config"

# 4. Check mode on the applied root: nothing would change.
run check-applied --check --diff || fail "check mode on the applied root failed"
[ "$(changed check-applied)" -eq 0 ] || fail "check mode would change $(changed check-applied) task(s)"

# 5. The health check stops the rollout when the aggregator does not list the agent as live, hears
# another version, sees it restart (a crash loop) or its heartbeat stop; it passes the healthy one.
# (--start-at-task: only the health check runs, the rest was covered above.)
# Two playbook runs, each with one kind of trouble per node (testnode01+sitenode01).
health_start='faultline_agent : Version of the installed agent'
for pair in dead+old crashloop+hung; do
  if run "unhealthy-$pair" -e "faultline_agent_health_check_command='python3 $tmp/agents.py $pair'" \
      -e faultline_agent_health_check_retries=2 --start-at-task "$health_start" 2>/dev/null; then
    fail "agents that are $pair passed the health check"
  fi
  grep -q 'Wait until the aggregator hears the agent' "$tmp/unhealthy-$pair.log" || fail "health check ($pair) did not run"
done
# A dead agent or another version is stopped by the first look; the first look passes a
# crash-looping or hung agent and the second look stops it. Each node fails on its own.
look() {  # LOG TASK HOST: the task failed for HOST
  grep -qE "^fatal: \[$3( -> [^]]*)?\]" <(sed -n "/$2/,/^TASK\\|PLAY RECAP/p" "$tmp/$1.log")
}
look unhealthy-dead+old 'Wait until the aggregator hears the agent (command)' localhost \
  || fail "the dead agent was not stopped by the first look"
look unhealthy-dead+old 'Wait until the aggregator hears the agent (command)' sitenode01 \
  || fail "the agent of another version was not stopped by the first look"
look unhealthy-crashloop+hung 'The same agent process still runs' localhost \
  || fail "the crash-looping agent was not stopped by the second look"
look unhealthy-crashloop+hung 'The same agent process still runs' sitenode01 \
  || fail "the hung agent was not stopped by the second look"
# (A healthy agent passes: every apply above ran the check with agents.py ok.)
grep -q 'The same agent process still runs, with a newer heartbeat (command)' "$tmp/apply.log" \
  || fail "the apply did not run the health check's second look"

# 6. Live: the real aggregator with the applied central's options (ephemeral ports, scratch db,
# --agent-timeout 3) and the real agent as testnode01 with the applied agent.yaml (only paths,
# endpoint and sources moved into the scratch setup, and a 1 s heartbeat: the applied edge-mode
# 60 s would outlast the 3 s timeout). The role's health check, in its default command mode with
# the real CLI, passes; once the agent is stopped and the aggregator no longer lists it live, fails.
cli_bin=$(realpath -m "$(dirname "$agg_bin")/faultline")
if [ -x "$agg_bin" ] && [ -x "$cli_bin" ]; then
  live=$tmp/live
  mkdir -p "$live/agent"
  : > "$live/app.log"
  # poll SECONDS CMD...: runs CMD every 0.1 s until it succeeds; 1 if it has not after SECONDS.
  poll() {
    local deadline=$((SECONDS + $1)); shift
    until "$@"; do
      [ "$SECONDS" -lt "$deadline" ] || return 1
      sleep 0.1
    done
  }
  wait_for() {  # wait_for WHAT SECONDS CMD...: poll, or fail with the logs
    local what=$1; shift
    poll "$@" || { tail -n 20 "$live"/*.log >&2 || true; fail "live health check: $what"; }
  }
  running() { kill -0 "$1" 2>/dev/null || fail "live health check: $2 exited: $(cat "$live/$2.log")"; }
  mapfile -d '' args < <(aggregator_args "$root")
  [ ${#args[@]} -gt 0 ] || fail "no options in $env"
  "$agg_bin" --db "$live/aggregator.db" --rules "$src/rules" "${args[@]}" --agent-timeout 3 \
    --port-file "$live/port" --ingest-endpoint-file "$live/ingest" > "$live/aggregator.log" 2>&1 &
  agg_pid=$!
  pids+=("$agg_pid")
  wait_for "the aggregator did not bind its ports" 30 \
    eval 'running "$agg_pid" aggregator && [ -s "$live/port" ] && [ -s "$live/ingest" ]'
  port=$(tr -d '\n' < "$live/port")
  ingest=$(tr -d '\n' < "$live/ingest")
  agents_json=("$cli_bin" --server "http://127.0.0.1:$port" agents --json)
  "$agent_bin" --config "$conf" --curve-secret-key-file "$curve/agent.key" --endpoints "$ingest" \
    --state-dir "$live/agent" --spool-path "$live/agent/spool.db" --rules-dirs "$src/rules" \
    --rules-override-dir "" --journald false --kmsg false --fabricmanager-log "" --nvidia-smi "" \
    --file-globs "$live/app.log" --heartbeat-interval-s 1 > "$live/agent.log" 2>&1 &
  agent_pid=$!
  pids+=("$agent_pid")
  # is_live true|false: the CLI lists testnode01 with live = $1.
  is_live() {
    "${agents_json[@]}" 2>/dev/null | python3 -c '
import json, sys
want = sys.argv[1] == "true"
rows = [a for a in json.load(sys.stdin) if a.get("agent_id") == "testnode01"]
sys.exit(0 if rows and all(bool(a.get("live")) == want for a in rows) else 1)' "$1"
  }
  wait_for "the aggregator never listed testnode01 live" 20 eval 'running "$agent_pid" agent && is_live true'
  # The role's own command and URL: the CLI found on PATH, the API where the aggregator's
  # variables say it listens (its faultline_aggregator_http_listen, 127.0.0.1, and _http_port, here
  # the ephemeral port), nothing hard-coded.
  health=(--limit localhost --start-at-task 'faultline_agent : Version of the installed agent'
          -e faultline_agent_binary="$agent_bin" -e faultline_agent_expected_version= -e faultline_agent_health_check_stable_seconds=1
          -e "$(python3 -c 'import json, sys, yaml
k = "faultline_agent_health_check_command"
print(json.dumps({k: yaml.safe_load(open(sys.argv[1]))[k]}))' "$src/ansible/roles/faultline_agent/defaults/main.yml")"
          -e faultline_aggregator_http_port="$port")
  PATH=$(dirname "$cli_bin"):$PATH run live-healthy "${health[@]}" -e faultline_agent_health_check_retries=5 \
    -e faultline_agent_health_check_delay=1 || fail "the health check failed against the live aggregator and agent"
  grep -qE '^ok: \[localhost( -> localhost)?\]' \
    <(sed -n '/Wait until the aggregator hears the agent (command)/,/^TASK/p' "$tmp/live-healthy.log") \
    || fail "the live health check did not run: $(cat "$tmp/live-healthy.log")"
  run live-healthy-http --limit localhost -e faultline_aggregator_http_port="$port" -e faultline_agent_health_check=http \
    --start-at-task 'faultline_agent : Version of the installed agent' -e faultline_agent_binary="$agent_bin" \
    -e faultline_agent_expected_version= -e faultline_agent_health_check_stable_seconds=1 \
    -e faultline_agent_health_check_retries=5 -e faultline_agent_health_check_delay=1 \
    || fail "the HTTP health check failed against the live aggregator and agent"
  grep -qE '^ok: \[localhost( -> localhost)?\]' \
    <(sed -n '/Wait until the aggregator hears the agent (HTTP/,/^TASK/p' "$tmp/live-healthy-http.log") \
    || fail "the live HTTP health check did not run: $(cat "$tmp/live-healthy-http.log")"
  kill -TERM "$agent_pid"
  wait_for "the agent did not stop on SIGTERM" 10 eval '! kill -0 "$agent_pid" 2>/dev/null'
  wait "$agent_pid" 2>/dev/null || true
  if poll 10 is_live false; then
    if PATH=$(dirname "$cli_bin"):$PATH run live-gone "${health[@]}" 2>/dev/null; then
      fail "the health check passed after the agent was stopped"
    fi
    grep -q 'Wait until the aggregator hears the agent' "$tmp/live-gone.log" || fail "live health check (gone): did not run"
  else
    echo "apply_test: the aggregator still lists the stopped agent live after 10 s: the negative live check is skipped" >&2
  fi
  kill "$agg_pid" 2>/dev/null || true
  wait "$agg_pid" 2>/dev/null || true
  ! grep -F 'allow-list:' "$live/aggregator.log" >&2 || fail "the central's allow-list has bad entries (live run)"
else
  echo "apply_test: no faultline-aggregator/faultline at $(dirname "$agg_bin"): the live health check is skipped" >&2
fi

# 7. A site relay without the agents' ingest (no key pair to authenticate with) stops before
# anything is written.
if run relay-without-ingest --limit edge01 -e faultline_aggregator_ingest=false 2>/dev/null; then
  fail "a site relay without ingest was applied"
fi
grep -q 'faultline_aggregator_ingest is off' "$tmp/relay-without-ingest.log" || fail "relay without ingest: no clear failure"

# 8. Replicas on one PostgreSQL store: two aggregators (replica01, replica02, their own roots) with
# the same faultline_aggregator_store URL. The URL (with a password) is only in the root-only
# aggregator-store.env, never in a world-readable file or in ansible's output; the unit's drop-in
# starts the daemon with --store from it; replica02 has replica01's key pair and token; a second
# apply changes nothing; emptying the URL removes the drop-in and the env file.
rep_root1=$tmp/replica01-root
rep_root2=$tmp/replica02-root
mkdir -p "$rep_root1" "$rep_root2"
secret='s3cr%40t-pw'
store_url="postgresql://faultline:$secret@127.0.0.1:1/faultline?connect_timeout=3&application_name=a%20b"
cat > "$tmp/replicas.ini" <<INI
[aggregators]
replica01 ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$rep_root1
replica02 ansible_connection=local ansible_python_interpreter=/usr/bin/python3 faultline_root=$rep_root2

[aggregators:vars]
faultline_aggregator_store=$store_url
faultline_aggregator_leader_poll=2

[site_aggregators]
[gpu_nodes]
INI
run_replicas() { inventory=$tmp/replicas.ini run "$@" > /dev/null; }
replicas_changed() {
  grep -E '^replica0[12] +:' "$tmp/$1.log" | sed -E 's/.*changed=([0-9]+).*/\1/' | awk '{n += $1} END {print n + 0}'
}
run_replicas replicas-check --check || fail "check mode on two new replicas failed"
[ -z "$(find "$rep_root1" "$rep_root2" -mindepth 1 -print -quit)" ] || fail "check mode wrote into the replicas' roots"
run_replicas replicas || fail "applying two replicas failed"
for r in "$rep_root1" "$rep_root2"; do
  store_env=$r/etc/faultline/aggregator-store.env
  dropin=$r/etc/systemd/system/faultline-aggregator.service.d/store.conf
  [ -f "$store_env" ] && [ -f "$dropin" ] || fail "no aggregator-store.env or drop-in under $r"
  [ "$(stat -c %a "$store_env")" = 600 ] || fail "aggregator-store.env mode $(stat -c %a "$store_env")"
  leaked=$(find "$r" -type f -perm -o=r -exec grep -lF -- "$secret" {} + || true)
  [ -z "$leaked" ] || fail "the store password is in world-readable files: $leaked"
  # The daemon's arguments as systemd makes them: the drop-in's last ExecStart, ${VAR} one word,
  # $VAR split (aggregator.env's quoting), paths of the applied root.
  python3 - "$dropin" "$store_env" "$r/etc/faultline/aggregator.env" "$store_url" > "$tmp/replica-args" <<'PY' \
    || fail "replica under $r: $(cat "$tmp/replica-args")"
import re, shlex, sys
dropin, store_env, agg_env, url = sys.argv[1:5]
lines = open(dropin).read().splitlines()
execs = [l.split("=", 1)[1] for l in lines if l.startswith("ExecStart=")]
assert execs[0] == "" and len(execs) == 2, f"drop-in must reset ExecStart: {execs}"
assert any(l == "EnvironmentFile=/etc/faultline/aggregator-store.env" for l in lines), "no EnvironmentFile"
env = {}
for path in (store_env, agg_env):
    for l in open(path).read().splitlines():
        m = re.match(r"^([A-Z_]+)=(.*)$", l)
        if m:
            env[m.group(1)] = shlex.split(m.group(2))[0]
assert env["FAULTLINE_AGGREGATOR_STORE"] == url, env
args = []
for w in execs[1].split():
    if w.startswith("${"):
        args.append(env[w[2:-1]])
    elif w.startswith("$"):
        args += shlex.split(env[w[1:]])
    else:
        args.append(w)
assert args[:5] == ["/usr/bin/faultline-aggregator", "--store", url, "--token-file", "/etc/faultline/token"], args
assert args[-4:] == ["--leader-poll", "2", "--settle", "300"], args
sys.stdout.write("\0".join(args[1:]))
PY
done
for f in curve/server.key curve/server.pub token; do
  cmp -s "$rep_root1/etc/faultline/$f" "$rep_root2/etc/faultline/$f" || fail "replica02's $f is not replica01's"
done
[ "$(stat -c %a "$rep_root2/etc/faultline/curve/server.key")" = 640 ] || fail "replica02 server.key mode"
[ "$(stat -c %a "$rep_root2/etc/faultline/token")" = 640 ] || fail "replica02 token mode"
! grep -F -- "$secret" "$tmp/replicas.log" >&2 || fail "the store password is in ansible's output"
# The real aggregator takes the drop-in's arguments (as run here: the applied root's paths, no
# sacct, ephemeral ports): it goes for the URL (an unreachable port) and says so, password redacted.
if [ -x "$agg_bin" ]; then
  mapfile -d '' rargs < "$tmp/replica-args"
  for i in "${!rargs[@]}"; do
    case ${rargs[$i]} in /etc/faultline/*) rargs[$i]=$rep_root2${rargs[$i]} ;; esac
  done
  if timeout 60 "$agg_bin" --rules "$src/rules" "${rargs[@]}" > "$tmp/replica-aggregator.log" 2>&1; then
    fail "faultline-aggregator started on an unreachable store"
  fi
  grep -qF 'postgresql://faultline:***@127.0.0.1:1/faultline' "$tmp/replica-aggregator.log" \
    || { cat "$tmp/replica-aggregator.log" >&2; fail "the aggregator did not report the store URL (redacted)"; }
  ! grep -F -- "$secret" "$tmp/replica-aggregator.log" >&2 || fail "the aggregator printed the store password"
fi
run_replicas replicas-again || fail "second apply of the replicas failed"
[ "$(replicas_changed replicas-again)" -eq 0 ] || fail "second apply of the replicas changed: $(grep -E '^changed:' "$tmp/replicas-again.log")"
run_replicas replicas-sqlite -e faultline_aggregator_store= || fail "emptying the store URL failed"
for r in "$rep_root1" "$rep_root2"; do
  [ ! -e "$r/etc/faultline/aggregator-store.env" ] && [ ! -e "$r/etc/systemd/system/faultline-aggregator.service.d/store.conf" ] \
    || fail "emptying the store URL left the drop-in or aggregator-store.env under $r"
done

# 9. Rollback (faultline_agent_rollback): the installed agent (here the build's, standing in for an
# older one) opens a copy of the node's spool; a spool of a newer schema than it knows is moved
# aside with a clear line, one it accepts stays.
spool_dir=$node_root/var/lib/faultline-agent
mkdir -p "$spool_dir"
make_spool() {  # make_spool USER_VERSION: a spool file with that schema version
  rm -f "$spool_dir/spool.db" "$spool_dir/spool.db-wal" "$spool_dir/spool.db-shm"
  python3 -c 'import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); c.execute("PRAGMA user_version=%d" % int(sys.argv[2])); c.commit(); c.close()' \
    "$spool_dir/spool.db" "$1"
}
rollback=(--limit sitenode01 -e faultline_agent_rollback=true -e "faultline_agent_binary=$agent_bin")
make_spool 999
run rollback-newer "${rollback[@]}" || fail "the rollback run failed on a newer spool"
[ ! -e "$spool_dir/spool.db" ] || fail "rollback: the newer spool was not moved aside"
aside=$(ls "$spool_dir"/spool.db.newer-* 2>/dev/null | head -1)
[ -n "$aside" ] || fail "rollback: no spool.db.newer-* beside the moved spool: $(ls "$spool_dir")"
grep -q "faultline rollback: the installed agent refuses the spool .*spool schema version 999 is newer than this agent.*moved aside to .*spool.db.newer-" \
  "$tmp/rollback-newer.log" || fail "rollback: no clear line about the moved spool: $(grep -A3 'move a spool' "$tmp/rollback-newer.log")"
make_spool 0
run rollback-current "${rollback[@]}" || fail "the rollback run failed on a spool the agent accepts"
[ -e "$spool_dir/spool.db" ] || fail "rollback: a spool the installed agent accepts was moved"
[ "$(ls "$spool_dir"/spool.db.newer-* 2>/dev/null | wc -l)" -eq 1 ] || fail "rollback: a spool the installed agent accepts was moved aside"
grep -q "the installed agent accepts the spool" "$tmp/rollback-current.log" || fail "rollback: the accepted spool was not reported"

echo "apply_test: ok (apply with a site relay, idempotent second apply, check mode, health check, live health check, relay assert, PostgreSQL replicas, rollback)"

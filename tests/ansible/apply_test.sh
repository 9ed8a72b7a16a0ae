#!/usr/bin/env bash
# Applies site.yml (both roles) to localhost (connection: local) into a scratch root, with package
# installation and service management off, and checks what results: the node's key pair, the
# aggregator's key pair, the allow-list entry, agent.yaml (accepted by the real faultline-agent),
# aggregator.env and the job-events token. Then: a second apply changes nothing, check mode changes nothing, and a
# health check that does not find the agent live fails the batch.
#   apply_test.sh SOURCE_DIR FAULTLINE_AGENT_BINARY [all|check-fresh|apply]
# check-fresh: only check mode on an empty root (must neither fail nor write anything); apply:
# everything else. CTest runs the two as separate tests so that they can run side by side.
set -euo pipefail

src=$(cd "$1" && pwd)
agent_bin=$(realpath "$2")
mode=${3:-all}
[ -x "$agent_bin" ] || { echo "apply_test: no faultline-agent binary at $agent_bin" >&2; exit 1; }

tmp=$(mktemp -d /tmp/faultline-ansible.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
root=$tmp/root
mkdir -p "$root"

export ANSIBLE_CONFIG=$src/ansible/ansible.cfg
export ANSIBLE_HOME=$tmp/ansible-home
export ANSIBLE_LOCAL_TEMP=$tmp/ansible-tmp
export ANSIBLE_REMOTE_TEMP=$tmp/ansible-tmp
export ANSIBLE_NOCOLOR=1
export ANSIBLE_FORCE_COLOR=0
export ANSIBLE_DEPRECATION_WARNINGS=0
export ANSIBLE_MODULE_COMPRESSION=ZIP_STORED  # less CPU per task; nothing goes over a wire here

cat > "$tmp/inventory.ini" <<INI
[aggregators]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3

[gpu_nodes]
localhost ansible_connection=local ansible_python_interpreter=/usr/bin/python3
INI

# What `faultline agents --json` prints once the node's agent is heard (and once it is not).
echo '[{"agent_id": "testnode01", "live": true, "agent_version": "0.1.0"}]' > "$tmp/agents.json"
echo '[{"agent_id": "testnode01", "live": false}]' > "$tmp/agents-dead.json"

cat > "$tmp/vars.yml" <<VARS
faultline_root: $root
faultline_install_package: false
faultline_manage_services: false
faultline_agent_user: root
faultline_aggregator_user: root
faultline_agent_keygen_command: $agent_bin keygen
faultline_aggregator_keygen_command: $agent_bin keygen
faultline_agent_hostname: testnode01
faultline_agent_edge_mode: true
faultline_agent_edge_rate_limit_bytes_per_sec: 12345
faultline_agent_extra_rules_dirs: [/etc/faultline/site-rules]
faultline_agent_extra_config: {spool_max_bytes: 1048576}
faultline_aggregator_retention_days: 14
faultline_aggregator_sacct_command: sacct --json --allusers
faultline_aggregator_extra_options: [--settle, 300]
faultline_aggregator_ingest: true
faultline_agent_health_check: command
faultline_agent_health_check_command: cat $tmp/agents.json
faultline_agent_health_check_retries: 1
faultline_agent_health_check_delay: 0
VARS

fail() { echo "apply_test: FAIL: $*" >&2; exit 1; }

# run NAME [ansible-playbook args...]: output in $tmp/NAME.log; prints the recap line.
run() {
  local name=$1; shift
  if ! (cd "$src/ansible" && ansible-playbook -i "$tmp/inventory.ini" -e "@$tmp/vars.yml" site.yml "$@") \
      > "$tmp/$name.log" 2>&1; then
    cat "$tmp/$name.log" >&2
    return 1
  fi
  grep -E '^localhost +:' "$tmp/$name.log" | tail -1
}
changed() { grep -E '^localhost +:' "$tmp/$1.log" | tail -1 | sed -E 's/.*changed=([0-9]+).*/\1/'; }

# 1. Check mode on an empty root: no failure, nothing written.
if [ "$mode" != apply ]; then
  run check-empty --check || fail "check mode on an empty root failed"
  [ -z "$(find "$root" -mindepth 1 -print -quit)" ] || fail "check mode wrote into $root: $(find "$root" -mindepth 1)"
  if [ "$mode" = check-fresh ]; then
    echo "apply_test: ok (check mode on an empty root)"
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

sum_before=$(sha256sum "$curve"/* "$conf" "$env" "$token" | sha256sum)

# 3. Idempotent: a second apply changes nothing, keys included.
run apply-again || fail "second apply failed"
[ "$(changed apply-again)" -eq 0 ] || fail "second apply changed $(changed apply-again) task(s): $(grep -E '^changed:' "$tmp/apply-again.log")"
[ "$sum_before" = "$(sha256sum "$curve"/* "$conf" "$env" "$token" | sha256sum)" ] || fail "second apply rewrote keys or config"

# 4. Check mode on the applied root: nothing would change.
run check-applied --check --diff || fail "check mode on the applied root failed"
[ "$(changed check-applied)" -eq 0 ] || fail "check mode would change $(changed check-applied) task(s)"

# 5. The health check stops the rollout when the aggregator does not list the agent as live.
# (--start-at-task: only the health check runs, the rest was covered above.)
if run unhealthy -e "faultline_agent_health_check_command='cat $tmp/agents-dead.json'" \
    --start-at-task 'faultline_agent : Wait until the aggregator hears the agent (command)' 2>/dev/null; then
  fail "an agent that is not live passed the health check"
fi
grep -q 'Wait until the aggregator hears the agent' "$tmp/unhealthy.log" || fail "health check did not run"

echo "apply_test: ok (apply, idempotent second apply, check mode, health check)"

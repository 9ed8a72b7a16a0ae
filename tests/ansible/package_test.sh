#!/usr/bin/env bash
# Builds the Debian packages from an already built tree (cpack -G DEB into a scratch directory)
# and inspects them without installing: contents, control fields, conffiles, maintainer scripts,
# the packaged agent accepting its packaged config and rules, and the packaged units passing
# `systemd-analyze verify` (ExecStart pointed at the packaged binary, any message is a failure).
#   package_test.sh BUILD_DIR SOURCE_DIR HAVE_AGGREGATOR(0|1)
set -euo pipefail

build=$(realpath "$1")
src=$(realpath "$2")
have_aggregator=${3:-0}

tmp=$(mktemp -d /tmp/faultline-package.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/out" > "$tmp/cpack.log" 2>&1 \
  || { cat "$tmp/cpack.log" >&2; fail "cpack"; }

deb() { ls "$tmp"/out/"$1"_*.deb 2>/dev/null | head -1; }
rules_deb=$(deb faultline-rules); agent_deb=$(deb faultline-agent); agg_deb=$(deb faultline-aggregator)
[ -n "$rules_deb" ] && [ -n "$agent_deb" ] && [ -n "$agg_deb" ] || fail "missing packages: $(ls "$tmp/out")"

has() {  # has DEB PATH: the package holds PATH
  dpkg-deb -c "$1" | awk '{print $6}' | sed 's#/$##' | grep -qxF ".$2" || fail "$(basename "$1") lacks $2"
}
field() { dpkg-deb -f "$1" "$2"; }

# --- contents ---
n_src=$(cd "$src/rules" && find . -name '*.yaml' | wc -l)
n_pkg=$(dpkg-deb -c "$rules_deb" | awk '{print $6}' | grep -c '^\./usr/share/faultline/rules/.*\.yaml$')
[ "$n_src" -eq "$n_pkg" ] || fail "faultline-rules has $n_pkg rule files, the tree $n_src"
has "$rules_deb" /usr/share/faultline/rules/VERSION
[ "$(field "$rules_deb" Architecture)" = all ] || fail "faultline-rules is not Architecture: all"

has "$agent_deb" /usr/bin/faultline-agent
has "$agent_deb" /etc/faultline/agent.yaml
has "$agent_deb" /etc/faultline/rules.d
if [ -f "$src/systemd/faultline-agent.service" ]; then
  has "$agent_deb" /lib/systemd/system/faultline-agent.service
fi
has "$agg_deb" /usr/bin/faultline
has "$agg_deb" /etc/faultline/aggregator.env
if [ "$have_aggregator" = 1 ]; then has "$agg_deb" /usr/bin/faultline-aggregator; fi
if [ -f "$src/systemd/faultline-aggregator.service" ]; then
  has "$agg_deb" /lib/systemd/system/faultline-aggregator.service
fi
for s in "$src"/aggregator/slurm/*.sh; do
  [ -e "$s" ] && has "$agg_deb" "/usr/lib/faultline/slurm/$(basename "$s")"
done
# Nothing of one package in another (dpkg would refuse to install them side by side).
dup=$(for d in "$rules_deb" "$agent_deb" "$agg_deb"; do dpkg-deb -c "$d" | awk '$1 !~ /^d/ {print $6}'; done | sort | uniq -d)
[ -z "$dup" ] || fail "files in two packages: $dup"

# --- control ---
for d in "$agent_deb" "$agg_deb"; do
  dep=$(field "$d" Depends)
  grep -q 'faultline-rules (>= ' <<<"$dep" || fail "$(basename "$d"): Depends lacks faultline-rules: $dep"
  grep -q 'adduser' <<<"$dep" || fail "$(basename "$d"): Depends lacks adduser: $dep"
  grep -q 'libc6' <<<"$dep" || fail "$(basename "$d"): no shared-library dependencies: $dep"
done

# --- maintainer scripts ---
for pair in "$agent_deb:faultline-agent" "$agg_deb:faultline-aggregator"; do
  d=${pair%%:*}; name=${pair#*:}
  ctl=$tmp/control-$name
  dpkg-deb -e "$d" "$ctl"
  grep -qxE "/etc/faultline/${name#faultline-}.(yaml|env)" "$ctl/conffiles" || fail "$name: conffiles: $(cat "$ctl/conffiles")"
  for s in postinst prerm postrm; do
    [ -x "$ctl/$s" ] || fail "$name: no executable $s"
    sh -n "$ctl/$s" || fail "$name: $s is not valid sh"
    ! grep -q '@FL_' "$ctl/$s" || fail "$name: $s has an unreplaced @FL_ placeholder"
  done
  grep -q "adduser --system --ingroup \"\$DAEMON_USER\"" "$ctl/postinst" || fail "$name: postinst creates no system user"
  grep -q "^DAEMON_USER=$name\$" "$ctl/postinst" || fail "$name: postinst user is not $name"
  # Starting, restarting and stopping happen only under a running systemd.
  grep -B8 'deb-systemd-invoke "$action"' "$ctl/postinst" | grep -q '/run/systemd/system' \
    || fail "$name: postinst starts the service without checking for a running systemd"
  grep -q 'deb-systemd-invoke stop' "$ctl/prerm" || fail "$name: prerm does not stop the service"
  grep -q '"\$1" = purge' "$ctl/postrm" || fail "$name: postrm has no purge branch"
done
grep -q '^JOURNAL_READER=yes$' "$tmp/control-faultline-agent/postinst" || fail "agent user not added to systemd-journal"

# prerm calls stop on remove and nothing on upgrade under a running systemd (faked in a private
# mount namespace: /run/systemd/system and the installed unit on tmpfs), and nothing without one.
if command -v unshare >/dev/null && [ "$(id -u)" = 0 ]; then
  mkdir -p "$tmp/fakebin"
  for c in deb-systemd-invoke systemctl; do
    printf '#!/bin/sh\necho "%s $*" >> %s/calls\n' "$c" "$tmp" > "$tmp/fakebin/$c"
    chmod +x "$tmp/fakebin/$c"
  done
  prerm=$tmp/control-faultline-agent/prerm
  if [ ! -d /run/systemd/system ]; then
    PATH=$tmp/fakebin:$PATH sh "$prerm" remove
    [ ! -e "$tmp/calls" ] || fail "prerm acted without a running systemd: $(cat "$tmp/calls")"
  fi
  unshare -m --propagation private sh -ec "
    mount -t tmpfs tmpfs /run; mkdir -p /run/systemd/system
    mount -t tmpfs tmpfs /lib/systemd/system; touch /lib/systemd/system/faultline-agent.service
    export PATH='$tmp/fakebin':\$PATH
    sh '$prerm' upgrade 9.9; sh '$prerm' remove" || fail "prerm under a faked systemd"
  [ "$(cat "$tmp/calls" 2>/dev/null)" = "deb-systemd-invoke stop faultline-agent.service" ] \
    || fail "prerm under systemd: expected one stop on remove, got: $(cat "$tmp/calls" 2>/dev/null)"
fi

# --- the packaged agent with its packaged config and rules ---
root=$tmp/root
for d in "$rules_deb" "$agent_deb" "$agg_deb"; do dpkg-deb -x "$d" "$root"; done
"$root/usr/bin/faultline-agent" --config "$root/etc/faultline/agent.yaml" \
  --rules-dirs "$root/usr/share/faultline/rules" --rules-override-dir "" --check-config \
  > "$tmp/check.log" 2>&1 || { cat "$tmp/check.log" >&2; fail "packaged agent rejects its packaged config"; }
"$root/usr/bin/faultline" --rules "$root/usr/share/faultline/rules" rules check > "$tmp/rules.log" 2>&1 \
  || { cat "$tmp/rules.log" >&2; fail "packaged faultline CLI rejects the packaged rules"; }

# --- units ---
units=$(find "$root/lib/systemd/system" -name '*.service' 2>/dev/null || true)
for u in $units; do
  exe=$(sed -n 's/^ExecStart=[-@+!:]*\([^ ]*\).*/\1/p' "$u" | head -1)
  [ -x "$root$exe" ] || fail "$(basename "$u"): ExecStart binary $exe is not in the packages"
  mkdir -p "$tmp/units"
  sed "s#^ExecStart=\\([-@+!:]*\\)$exe#ExecStart=\\1$root$exe#" "$u" > "$tmp/units/$(basename "$u")"
  if ! systemd-analyze verify "$tmp/units/$(basename "$u")" > "$tmp/verify.log" 2>&1 || [ -s "$tmp/verify.log" ]; then
    cat "$tmp/verify.log" >&2
    fail "systemd-analyze verify $(basename "$u")"
  fi
done

echo "package_test: ok ($(cd "$tmp/out" && ls *.deb | tr '\n' ' ')units: $(echo $units | wc -w))"

#!/usr/bin/env bash
# Builds the Debian packages from an already built tree (cpack -G DEB into a scratch directory)
# and inspects them without installing: contents, control fields, conffiles, maintainer scripts,
# the packaged agent accepting its packaged config and rules, and the packaged units passing
# `systemd-analyze verify` (ExecStart pointed at the packaged binary, any message is a failure).
# Every flag in a unit's ExecStart (and in the packaged aggregator.env's examples) is one its binary
# lists in --help. Debian metadata: Maintainer, /usr/share/doc/<package>/{copyright,changelog.Debian.gz},
# and lintian (when installed) with no tag left but the overridden ones. `make package` needs only
# the build dependencies. Then, as root with overlayfs, the three packages are installed with
# `dpkg --root` into a throw-away root (the host's /usr, /etc and /var under copy-on-write overlays
# in a private mount namespace: nothing reaches the host): files, users, the job-events token the
# aggregator's postinst makes (root:faultline-aggregator 0640, kept across a reinstall, gone on
# purge), and the aggregator started as its unit starts it, as its user, in that root.
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
  # The listing is read whole before it is searched: `grep -q` at the end of a pipe exits at its
  # first match, and under pipefail the writer's SIGPIPE would fail a package that has the path.
  local listing
  listing=$(dpkg-deb -c "$1" | awk '{print $6}' | sed 's#/$##')
  grep -qxF ".$2" <<< "$listing" || fail "$(basename "$1") lacks $2"
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

# --- control and Debian metadata ---
for d in "$rules_deb" "$agent_deb" "$agg_deb"; do
  name=$(field "$d" Package)
  [ "$(field "$d" Maintainer)" = "faultline developers <faultline-dev@lists.invalid>" ] \
    || fail "$name: Maintainer is '$(field "$d" Maintainer)'"
  has "$d" "/usr/share/doc/$name/copyright"
  has "$d" "/usr/share/doc/$name/changelog.Debian.gz"
  mkdir -p "$tmp/meta-$name"
  dpkg-deb -x "$d" "$tmp/meta-$name"
  doc=$tmp/meta-$name/usr/share/doc/$name
  grep -q '^Copyright: [0-9]\{4\} faultline developers' "$doc/copyright" || fail "$name: copyright: $(head -5 "$doc/copyright")"
  if [ -f "$src/LICENSE" ]; then
    grep -qF "$(head -1 "$src/LICENSE")" "$doc/copyright" || fail "$name: copyright lacks the tree's LICENSE"
  fi
  gzip -t "$doc/changelog.Debian.gz" || fail "$name: changelog.Debian.gz is not gzip"
  head -1 < <(gzip -dc "$doc/changelog.Debian.gz") | grep -qF "faultline ($(field "$d" Version))" \
    || fail "$name: changelog's first entry is not version $(field "$d" Version): $(gzip -dc "$doc/changelog.Debian.gz" | head -1)"
done
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

# Every flag a unit passes, and every flag the packaged aggregator.env shows as an example, is one
# its binary accepts (listed in its --help).
flags_ok() {  # flags_ok WHAT BINARY FLAG...
  local what=$1 bin=$2 f; shift 2
  "$bin" --help > "$tmp/help.txt" 2>&1 || true
  for f in "$@"; do
    grep -qE -- "(^|[ ,])$f( |,|$)" "$tmp/help.txt" || fail "$what: $f is not an option of $(basename "$bin") (--help)"
  done
}
for u in $units; do
  exe=$(sed -n 's/^ExecStart=[-@+!:]*\([^ ]*\).*/\1/p' "$u" | head -1)
  mapfile -t flags < <(sed -n 's/^ExecStart=//p' "$u" | tr ' ' '\n' | grep -E '^--[a-z]' | sed 's/=.*//')
  [ ${#flags[@]} -gt 0 ] || fail "$(basename "$u"): no flags in ExecStart (the test would prove nothing)"
  flags_ok "$(basename "$u") ExecStart" "$root$exe" "${flags[@]}"
done
# (Quoted option values, e.g. the sacct command's own flags, are not the aggregator's.)
mapfile -t env_flags < <(sed 's/"[^"]*"//g' "$root/etc/faultline/aggregator.env" | grep -oE -- '--[a-z][a-z-]+' | sort -u)
[ "$have_aggregator" != 1 ] || flags_ok "aggregator.env" "$root/usr/bin/faultline-aggregator" "${env_flags[@]}"

# --- lintian: no tag but the overridden ones (each override says why) ---
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 --display-level '>=warning' "$rules_deb" "$agent_deb" "$agg_deb" > "$tmp/lintian.log" 2>&1 || true
  if grep -E '^[EW]: ' "$tmp/lintian.log" >&2; then fail "lintian reports the tags above"; fi
  for d in "$rules_deb" "$agent_deb" "$agg_deb"; do
    name=$(field "$d" Package)
    o=$tmp/meta-$name/usr/share/lintian/overrides/$name
    [ ! -f "$o" ] || ! grep -vE '^(#|$)' "$o" | grep -vqE '^[a-z0-9-]+: [a-z0-9-]+' \
      || fail "$name: a malformed lintian override: $(cat "$o")"
    # Every override is in a block under a comment.
    [ ! -f "$o" ] || awk '/^[^#]/ && (NR == 1 || prev == "") {bad = 1} {prev = $0} END {exit bad}' "$o" \
      || fail "$name: a lintian override without a comment saying why"
  done
else
  echo "package_test: no lintian: the lintian check is skipped" >&2
fi

# --- `make package` needs only the build dependencies ---
make -n -C "$src" package > "$tmp/make-n.log" 2>&1 || { cat "$tmp/make-n.log" >&2; fail "make -n package"; }
grep -q 'install-deps.sh --package' "$tmp/make-n.log" || fail "make package does not install only the build dependencies: $(cat "$tmp/make-n.log")"
! grep -qE 'install-deps.sh *$|npm|ctest' "$tmp/make-n.log" || fail "make package runs more than a packaging build: $(cat "$tmp/make-n.log")"
pkg_deps=$(bash "$src/scripts/install-deps.sh" --list --package) || fail "install-deps.sh --list --package"
for p in postgresql-15 chromium nodejs npm ansible-core clang catch2; do
  ! grep -qx "$p" <<<"$pkg_deps" || fail "install-deps.sh --package installs $p"
done
for p in cmake dpkg-dev libcapnp-dev libpq-dev; do
  grep -qx "$p" <<<"$pkg_deps" || fail "install-deps.sh --package lacks $p"
done

# --- installed into a throw-away root ---
installed=skipped
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && grep -qw overlay /proc/filesystems && [ "$have_aggregator" = 1 ]; then
  cat > "$tmp/install-root.sh" <<'SH'
set -euo pipefail
sys=$1 ov=$2 rules_deb=$3 agent_deb=$4 agg_deb=$5
fail() { echo "package_test: FAIL (installed root): $*" >&2; exit 1; }
for d in usr etc var; do
  mkdir -p "$ov/$d/up" "$ov/$d/work" "$sys/$d"
  mount -t overlay overlay -o "lowerdir=/$d,upperdir=$ov/$d/up,workdir=$ov/$d/work" "$sys/$d"
done
for l in bin lib lib64 sbin; do [ ! -e "/$l" ] || ln -sfn "$(readlink "/$l" || echo "usr/$l")" "$sys/$l"; done
mkdir -p "$sys/dev" "$sys/proc" "$sys/tmp" "$sys/run"
mount --bind /dev "$sys/dev"
mount -t proc proc "$sys/proc"
mount -t tmpfs tmpfs "$sys/tmp"
mount -t tmpfs tmpfs "$sys/run"
# A fresh host: whatever the machine has of faultline is hidden (whiteouts in the overlay only).
rm -rf "$sys/etc/faultline" "$sys/var/lib/faultline" "$sys/var/lib/faultline-agent"
in_root() { chroot "$sys" "$@"; }

dpkg --root="$sys" -i "$rules_deb" "$agent_deb" "$agg_deb" > "$sys/tmp/dpkg.log" 2>&1 \
  || { cat "$sys/tmp/dpkg.log" >&2; fail "dpkg -i"; }
for f in /usr/bin/faultline-agent /usr/bin/faultline-aggregator /usr/bin/faultline \
         /lib/systemd/system/faultline-agent.service /lib/systemd/system/faultline-aggregator.service \
         /etc/faultline/agent.yaml /etc/faultline/aggregator.env /usr/share/faultline/rules/VERSION; do
  [ -e "$sys$f" ] || fail "not installed: $f"
done
for u in faultline-agent faultline-aggregator; do
  in_root getent passwd "$u" > /dev/null || fail "no user $u"
  [ "$(in_root stat -c %U "/var/lib/${u/-aggregator/}")" = "$u" ] 2>/dev/null \
    || fail "state directory of $u: $(in_root stat -c '%U %a %n' "/var/lib/${u/-aggregator/}" 2>&1)"
done
in_root id -nG faultline-agent | grep -qw systemd-journal || ! in_root getent group systemd-journal >/dev/null \
  || fail "faultline-agent is not in systemd-journal"
# The job-events token the unit's --token-file names.
token=/etc/faultline/token
[ -s "$sys$token" ] || fail "the aggregator's postinst made no $token"
[ "$(in_root stat -c '%U:%G %a' "$token")" = "root:faultline-aggregator 640" ] \
  || fail "$token: $(in_root stat -c '%U:%G %a' "$token")"
[ "$(tr -d '\n' < "$sys$token" | wc -c)" -ge 32 ] || fail "$token is short: $(wc -c < "$sys$token") bytes"
ls "$sys/etc/faultline/" | grep -q '^\.token' && fail "a scratch token file was left behind"
sum=$(sha256sum < "$sys$token")
# A unit enabled (deb-systemd-helper, a file operation), none started (no running systemd).
if [ -x "$sys/usr/bin/deb-systemd-helper" ]; then
  [ -L "$sys/etc/systemd/system/multi-user.target.wants/faultline-aggregator.service" ] || fail "faultline-aggregator.service not enabled"
fi

# The aggregator as its unit starts it (ExecStart: ${STATE_DIRECTORY}, the packaged aggregator.env's
# options), as its user, in the installed root; only the HTTP port is made ephemeral.
unit=$sys/lib/systemd/system/faultline-aggregator.service
exec_start=$(sed -n 's/^ExecStart=//p' "$unit")
opts=$(. "$sys/etc/faultline/aggregator.env"; printf '%s' "${FAULTLINE_AGGREGATOR_OPTS:-}")
exec_start=${exec_start//'${STATE_DIRECTORY}'/\/var\/lib\/faultline}
exec_start=${exec_start//'$FAULTLINE_AGGREGATOR_OPTS'/$opts}
read -ra args <<<"$exec_start"
# chroot itself, not the in_root function: a function sent to the background runs in a subshell,
# whose pid $! would be (and TERM would reach the subshell, leaving the aggregator running).
chroot "$sys" setpriv --reuid=faultline-aggregator --regid=faultline-aggregator --init-groups \
  "${args[@]}" --port 0 --port-file /tmp/port > "$sys/tmp/aggregator.log" 2>&1 &
pid=$!
for _ in $(seq 300); do
  [ -s "$sys/tmp/port" ] && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$sys/tmp/port" ]; then
  kill "$pid" 2>/dev/null || true
  cat "$sys/tmp/aggregator.log" >&2
  fail "the packaged aggregator did not start as its unit starts it: ${args[*]}"
fi
kill -TERM "$pid"; wait "$pid" || true

# A reinstall (an upgrade's postinst) keeps the token; purge removes it and the state.
dpkg --root="$sys" -i "$agg_deb" > "$sys/tmp/dpkg2.log" 2>&1 || { cat "$sys/tmp/dpkg2.log" >&2; fail "dpkg -i again"; }
[ "$(sha256sum < "$sys$token")" = "$sum" ] || fail "a reinstall replaced $token"
dpkg --root="$sys" --purge faultline-aggregator > "$sys/tmp/dpkg3.log" 2>&1 || { cat "$sys/tmp/dpkg3.log" >&2; fail "dpkg --purge"; }
[ ! -e "$sys$token" ] || fail "purge left $token"
[ ! -e "$sys/var/lib/faultline" ] || fail "purge left /var/lib/faultline"
echo ok
SH
  unshare -m --propagation private bash "$tmp/install-root.sh" "$tmp/sysroot" "$tmp/overlay" \
    "$rules_deb" "$agent_deb" "$agg_deb" > "$tmp/install-root.log" 2>&1 \
    || { cat "$tmp/install-root.log" >&2; fail "installing the packages into a throw-away root"; }
  installed=ok
else
  echo "package_test: not root, no unshare or overlayfs, or no aggregator: the throw-away root install is skipped" >&2
  # Without an install, the postinst is read: it makes the token only when absent.
  grep -q '\[ ! -e /etc/faultline/token \]' "$tmp/control-faultline-aggregator/postinst" \
    || fail "the aggregator's postinst does not create /etc/faultline/token"
fi

echo "package_test: ok ($(cd "$tmp/out" && ls *.deb | tr '\n' ' ')units: $(echo $units | wc -w); installed root: $installed)"

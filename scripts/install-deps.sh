#!/usr/bin/env bash
# Installs the Debian 12 packages faultline needs.
#   install-deps.sh            everything to build, test, benchmark and demo (`make deps`)
#   install-deps.sh --package  only what building the three binaries and the .deb files takes
#                              (`make package`): no PostgreSQL server, Chromium, Ansible, clang,
#                              Node.js or npm packages on a packaging host
#   install-deps.sh --list [--package]   prints the package names instead, one a line
# Idempotent: does nothing (no apt-get update) when everything is already installed.
set -euo pipefail

set_name=all list=0
for a in "$@"; do
  case $a in
    --package) set_name=package ;;
    --list) list=1 ;;
    *) echo "install-deps: unknown option $a (--package, --list)" >&2; exit 2 ;;
  esac
done

# Configure (with BUILD_TESTING=OFF) and build faultline, faultline-agent and faultline-aggregator,
# then cpack -G DEB: dpkg-shlibdeps (dpkg-dev) and file(1) work out the shared-library Depends.
BUILD_PACKAGES=(
  build-essential cmake pkg-config dpkg-dev file
  libboost-dev libboost-system-dev libboost-program-options-dev
  capnproto libcapnp-dev
  libsystemd-dev
  libzmq3-dev cppzmq-dev
  libssl-dev
  libsqlite3-dev
  libpq-dev
  libfmt-dev libre2-dev libyaml-cpp-dev
  nlohmann-json3-dev libcli11-dev libzstd-dev libmimalloc-dev
  libvectorscan-dev
)

# Everything else: tests (Catch2, journal fixtures, PostgreSQL, Ansible, lintian, the browser
# tests' Chromium, Prometheus and VictoriaMetrics for metric evidence), fuzzing (clang),
# benchmarks (ripgrep) and the demo.
PACKAGES=(
  "${BUILD_PACKAGES[@]}"
  ninja-build git python3 python3-yaml tzdata
  systemd-journal-remote
  libfaketime nftables
  openssl sqlite3
  postgresql-15 postgresql-client-15
  catch2 zstd
  ripgrep
  clang libclang-rt-14-dev
  ansible-core ansible-lint lintian
  chromium fonts-dejavu-core
  prometheus victoria-metrics
)
# Node.js and npm drive Chromium in the browser tests (tests/browser); the image may bring its own.
if [ "$set_name" = all ] && { ! command -v node >/dev/null || ! command -v npm >/dev/null; }; then
  PACKAGES+=(nodejs npm)
fi
if [ "$set_name" = package ]; then PACKAGES=("${BUILD_PACKAGES[@]}"); fi
if [ "$list" = 1 ]; then printf '%s\n' "${PACKAGES[@]}"; exit 0; fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

[ "$set_name" = all ] || exit 0

# The browser tests' npm packages, exactly as the lockfile says (puppeteer-core only: it drives
# Debian's Chromium and downloads no browser). Skipped when the lockfile has not changed since.
BROWSER="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if ! cmp -s "$BROWSER/package-lock.json" "$BROWSER/node_modules/.package-lock.json.installed" 2>/dev/null; then
  echo "install-deps: npm ci in tests/browser" >&2
  (cd "$BROWSER" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$BROWSER/package-lock.json" "$BROWSER/node_modules/.package-lock.json.installed"
fi

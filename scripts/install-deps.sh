#!/usr/bin/env bash
# Installs every Debian 12 package faultline needs to build, test, benchmark and demo.
# Idempotent: does nothing (no apt-get update) when everything is already installed.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git python3 tzdata
  libboost-dev libboost-system-dev libboost-program-options-dev
  capnproto libcapnp-dev
  libsystemd-dev systemd-journal-remote
  libfaketime nftables
  libzmq3-dev cppzmq-dev
  libssl-dev openssl
  libsqlite3-dev sqlite3
  libpq-dev postgresql-15 postgresql-client-15
  libfmt-dev catch2 libre2-dev libyaml-cpp-dev
  nlohmann-json3-dev libcli11-dev libzstd-dev zstd libmimalloc-dev
  ripgrep libvectorscan-dev
  clang libclang-rt-14-dev
  ansible-core ansible-lint
  chromium fonts-dejavu-core
)
# Node.js and npm drive Chromium in the browser tests (tests/browser); the image may bring its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then PACKAGES+=(nodejs npm); fi

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

# The browser tests' npm packages, exactly as the lockfile says (puppeteer-core only: it drives
# Debian's Chromium and downloads no browser). Skipped when the lockfile has not changed since.
BROWSER="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if ! cmp -s "$BROWSER/package-lock.json" "$BROWSER/node_modules/.package-lock.json.installed" 2>/dev/null; then
  echo "install-deps: npm ci in tests/browser" >&2
  (cd "$BROWSER" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$BROWSER/package-lock.json" "$BROWSER/node_modules/.package-lock.json.installed"
fi

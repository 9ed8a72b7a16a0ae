#!/usr/bin/env bash
# Runs one fuzz target's replay build (tests/fuzz/CMakeLists.txt registers it as the ctest
# fuzz_<name>, label "fuzz", part of `make test`).
#   run_replay.sh BINARY NAME SOURCE_DIR WORK_DIR "SEED GLOBS"
# Inputs: tests/fuzz/seeds/<name>/ (hand-written inputs and every input that once failed) plus the
# files the globs (relative to SOURCE_DIR) name, then FAULTLINE_FUZZ_MUTANTS (default 2000)
# deterministic mutants of them. A failing input aborts the run; a failing mutant is left in
# WORK_DIR (the path is printed): commit it to seeds/<name>/ with the fix.
set -euo pipefail
bin=$1 name=$2 src=$3 work=$4 globs=${5:-}
mkdir -p "$work"
inputs=()
[ -d "$src/tests/fuzz/seeds/$name" ] && inputs+=("$src/tests/fuzz/seeds/$name")
read -r -a patterns <<<"$globs"  # split on blanks, no globbing yet
shopt -s nullglob
for g in "${patterns[@]}"; do
  for f in "$src"/$g; do
    [ -f "$f" ] && inputs+=("$f")
  done
done
shopt -u nullglob
exec "$bin" --mutants "${FAULTLINE_FUZZ_MUTANTS:-2000}" --out "$work" "${inputs[@]}"

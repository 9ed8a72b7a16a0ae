#!/usr/bin/env bash
# Runs one libFuzzer target (tests/fuzz/CMakeLists.txt registers it as the ctest libfuzz_<name>,
# configuration "fuzz": `make fuzz`).
#   run_fuzz.sh BINARY NAME SOURCE_DIR WORK_DIR "SEED GLOBS"
# Seeds: tests/fuzz/seeds/<name>/ (hand-written inputs and every input that once failed) plus the
# files the globs (relative to SOURCE_DIR) name: the golden fixtures and samples.
# FAULTLINE_FUZZ_SECONDS unset (`ctest -C fuzz -L libfuzzer` by hand): a short run (FAULTLINE_FUZZ_SHORT seconds,
# default 4) over the seeds into a fresh corpus. Set (`make fuzz`): that long, into a corpus kept
# in WORK_DIR/corpus/<name> across runs. Prints one summary line: inputs tried, seconds, the
# coverage libFuzzer reached (cov: edges, ft: features), corpus.
# A crash, leak, timeout or sanitizer report fails the run; the input is saved as
# WORK_DIR/artifacts/<name>-crash-* (commit it to seeds/<name>/ with the fix).
set -euo pipefail
bin=$1 name=$2 src=$3 work=$4 globs=${5:-}

if [ -n "${FAULTLINE_FUZZ_SECONDS:-}" ]; then
  secs=$FAULTLINE_FUZZ_SECONDS
  corpus=$work/corpus/$name
else
  secs=${FAULTLINE_FUZZ_SHORT:-4}
  corpus=$work/short/$name
  rm -rf "$corpus"
fi
seeds=$work/seeds/$name
mkdir -p "$corpus" "$work/artifacts" "$work/logs"
rm -rf "$seeds"
mkdir -p "$seeds"
if [ -d "$src/tests/fuzz/seeds/$name" ]; then cp "$src/tests/fuzz/seeds/$name"/* "$seeds"/ 2>/dev/null || true; fi
read -r -a patterns <<<"$globs"  # split on blanks, no globbing yet
shopt -s nullglob
for g in "${patterns[@]}"; do
  for f in "$src"/$g; do
    [ -f "$f" ] || continue
    rel=${f#"$src"/}
    cp "$f" "$seeds/${rel//\//_}"
  done
done
shopt -u nullglob

log=$work/logs/$name.log
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
rc=0
# -timeout: one input taking longer is a finding (a hang). -rss_limit_mb: so is memory beyond it.
timeout $((secs + 300)) "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$work/artifacts/$name-" "$corpus" "$seeds" >"$log" 2>&1 || rc=$?
runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
took=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -1)
cov=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -1 || true)
echo "fuzz_$name: ${runs:-?} inputs in ${took:-?} s, ${cov:-cov: ?}, seeds $(ls "$seeds" | wc -l), corpus $(ls "$corpus" | wc -l), exit $rc"
if [ "$rc" -ne 0 ]; then
  grep -E 'ERROR|SUMMARY|runtime error|==[0-9]+==|Test unit written|fuzz:' "$log" | head -40 || true
  echo "full log: $log"
fi
exit "$rc"

#!/usr/bin/env bash
# Throughput benchmark: faultline's parsers + rule engine vs ripgrep running the same patterns,
# in three input formats.
#
#   bash bench/extract.sh BUILD_DIR          (make bench does: build, then this)
#   SIZE=100000000 bash bench/extract.sh build
#
# Generates (or reuses) three deterministic logs of SIZE bytes each (default 300 MB) under
# bench/out/ with bench/gen_mixed_log.py --format:
#   journal : journalctl -o short-iso-precise of many GPU hosts
#   dmesg   : raw dmesg ("[  123.456789] msg") of one node, kernel messages only
#   ranks   : a job's srun --label output ("R: msg"): NCCL INFO/WARN, PyTorch, tracebacks
# then, per format and in the same run:
#   engine : faultline scan -q FILE              (format detection, parsing, every rule)
#   rg -j1 : rg -j1 -c -f PATTERNS FILE          (the rules' expanded patterns, see rg_patterns.py)
# each under /usr/bin/time -v (wall time, user+sys CPU, peak RSS), and the start-up of both:
# `faultline scan -q` on an empty file (rule loading) with a cold rule cache (a new directory: the
# YAML loaded and compiled, the cache written) and a warm one, next to `rg --version`. The engine
# runs use the warm cache (bench/out/rules-cache), as `faultline scan` does after its first run.
# Prints a table and, as the last line, "ratio X": the lowest over the three formats of engine
# lines/s per core / ripgrep (-j1) lines/s per core. See bench/README.md. When
# BUILD_DIR/bench/template_bench is built (make bench builds it), the template miner's cost per
# record next to the engine's and its templates per MiB on the same logs come first.
set -euo pipefail

BUILD_DIR=${1:-build}
SIZE=${SIZE:-300000000}
FORMATS=${FORMATS:-journal dmesg ranks}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT="$HERE/out"
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR="$ROOT/$BUILD_DIR" ;; esac
FAULTLINE="$BUILD_DIR/aggregator/faultline"

bash "$ROOT/scripts/install-deps.sh"
if [ ! -x "$FAULTLINE" ]; then
  echo "bench: $FAULTLINE not found; build first (make bench, or cmake --build $BUILD_DIR --target faultline)" >&2
  exit 1
fi
RG=$(command -v rg)
TIME=/usr/bin/time
[ -x "$TIME" ] || { echo "bench: /usr/bin/time (GNU time) is required" >&2; exit 1; }

mkdir -p "$OUT"
GEN_SHA=$(sha256sum "$HERE/gen_mixed_log.py" | cut -c1-16)

# --- the patterns ----------------------------------------------------------------------------
PAT_RE2="$OUT/patterns.re2"
PAT_RG="$OUT/patterns.rg"
"$FAULTLINE" rules list --patterns > "$PAT_RE2"
read -r PAT_TOTAL PAT_USED < <(python3 "$HERE/rg_patterns.py" "$PAT_RE2" "$PAT_RG" "$RG")

run() {  # run NAME CMD...: stdout to $OUT/NAME.out, /usr/bin/time -v report to $OUT/NAME.time
  local name=$1; shift
  echo "bench: running $name: $*" >&2
  local rc=0
  "$TIME" -v -o "$OUT/$name.time" "$@" > "$OUT/$name.out" || rc=$?
  # rg exits 1 when nothing matched; anything else is a failure.
  if [ $rc -ne 0 ] && ! { [ "${name#engine}" = "$name" ] && [ $rc -eq 1 ]; }; then
    echo "bench: $name failed (exit $rc)" >&2
    cat "$OUT/$name.out" >&2
    exit 1
  fi
}

# --- start-up: rule loading (faultline) next to the floor (rg --version) ----------------------
: > "$OUT/empty.log"
CACHE="$OUT/rules-cache"
rm -rf "$CACHE" "$OUT/rules-cache-cold"
for i in 1 2 3; do
  rm -rf "$OUT/rules-cache-cold"
  run "startup_cold_$i" "$FAULTLINE" --rules-cache "$OUT/rules-cache-cold" scan -q "$OUT/empty.log"
  run "startup_engine_$i" "$FAULTLINE" --rules-cache "$CACHE" scan -q "$OUT/empty.log"
  run "startup_rg_$i" "$RG" --version
done
rm -rf "$OUT/rules-cache-cold"

for FMT in $FORMATS; do
  LOG="$OUT/mixed-$FMT-$SIZE.log"
  META="$LOG.meta"
  if [ -f "$LOG" ] && [ -f "$META" ] && [ "$(stat -c %s "$LOG")" = "$SIZE" ] &&
     grep -qx "generator=$GEN_SHA" "$META" && grep -qx "bytes=$SIZE" "$META"; then
    echo "bench: reusing $LOG" >&2
  else
    echo "bench: generating $LOG ($SIZE bytes, $FMT)" >&2
    rm -f "$LOG" "$META"
    python3 "$HERE/gen_mixed_log.py" "$LOG" "$SIZE" --format "$FMT" --meta "$META"
  fi
  # Warm the page cache so neither side pays for the first read from disk.
  cat "$LOG" > /dev/null
  run "engine_$FMT" "$FAULTLINE" --rules-cache "$CACHE" scan -q "$LOG"
  run "rg_j1_$FMT" "$RG" -j1 -c -f "$PAT_RG" "$LOG"
done

# --- the template miner (issue 30) next to the engine, on the same logs ------------------------
# bench/template_bench.cpp: the miner's CPU per record as a share of the engine's (scan -q in
# process), templates per MiB. Printed ahead of the table so "ratio X" stays the last line.
TEMPLATE_BENCH="$BUILD_DIR/bench/template_bench"
if [ -x "$TEMPLATE_BENCH" ]; then
  LOGS=()
  for FMT in $FORMATS; do LOGS+=("$OUT/mixed-$FMT-$SIZE.log"); done
  echo "bench: running template_bench on ${LOGS[*]}" >&2
  "$TEMPLATE_BENCH" --rules "$ROOT/rules" "${LOGS[@]}" > "$OUT/template_bench.out"
  echo "template miner (bench/template_bench; ratios of CPU per record, same run):"
  cat "$OUT/template_bench.out"
  echo
else
  echo "bench: $TEMPLATE_BENCH not built (cmake --build $BUILD_DIR --target template_bench): no template figures" >&2
fi

python3 - "$OUT" "$SIZE" "$PAT_TOTAL" "$PAT_USED" "$(nproc)" $FORMATS <<'PY'
import re, sys
out, size, pat_total, pat_used, ncpu, *formats = sys.argv[1:]
size = int(size)

def tv(name):
    kv = {}
    for line in open(f"{out}/{name}.time"):
        if ": " in line:
            k, v = line.strip().rsplit(": ", 1)
            kv[k] = v
    def field(label):
        return next(v for k, v in kv.items() if k.startswith(label))
    w = field("Elapsed (wall clock) time").split(":")
    wall = sum(float(x) * 60 ** i for i, x in enumerate(reversed(w)))
    user, sys_ = float(field("User time (seconds)")), float(field("System time (seconds)"))
    rss = int(field("Maximum resident set size (kbytes)"))
    return dict(wall=wall, cpu=user + sys_, rss=rss)

print(f"size      {size} bytes ({size / 2**20:.1f} MiB) per format, cpus {ncpu}")
print(f"patterns  {pat_used} of {pat_total} used by rg (see rg_patterns.py for the rewrite)")
st_c = min(tv(f"startup_cold_{i}")["wall"] for i in (1, 2, 3))
# The first warm-named run wrote the cache (cold): the other two read it.
st_e = min(tv(f"startup_engine_{i}")["wall"] for i in (2, 3))
st_r = min(tv(f"startup_rg_{i}")["wall"] for i in (1, 2, 3))
st_rss = tv("startup_engine_2")["rss"]
print(f"start-up  faultline scan -q (empty file, all rules) warm rule cache {st_e * 1000:.0f} ms"
      f" (peak RSS {st_rss / 1024:.1f} MiB), cold {st_c * 1000:.0f} ms; rg --version {st_r * 1000:.0f} ms (best wall)")
print()
hdr = (f"{'format':<8} {'run':<7} {'lines':>10} {'wall s':>7} {'cpu s':>7} {'peak RSS MiB':>13} "
       f"{'lines/s/core':>13} {'MB/s/core':>10} {'records':>10} {'matched':>8} {'rg lines':>9} {'ratio':>6}")
print(hdr)
print("-" * len(hdr))
ratios = []
for fmt in formats:
    meta = dict(l.strip().split("=", 1) for l in open(f"{out}/mixed-{fmt}-{size}.log.meta") if "=" in l)
    lines = int(meta["lines"])
    e, g = tv(f"engine_{fmt}"), tv(f"rg_j1_{fmt}")
    m = re.search(r"records (\d+) matched (\d+) symptoms (\d+)", open(f"{out}/engine_{fmt}.out").read())
    records, matched = int(m.group(1)), int(m.group(2))
    rg_count = int((open(f"{out}/rg_j1_{fmt}.out").read().strip() or "0").split(":")[-1])
    ratio = (lines / max(e["cpu"], 0.01)) / (lines / max(g["cpu"], 0.01))
    ratios.append((ratio, fmt))
    for name, r, extra in (("engine", e, f"{records:>10} {matched:>8} {'':>9} {ratio:>6.2f}"),
                           ("rg -j1", g, f"{'':>10} {'':>8} {rg_count:>9} {'':>6}")):
        print(f"{fmt:<8} {name:<7} {lines:>10} {r['wall']:>7.2f} {r['cpu']:>7.2f} {r['rss'] / 1024:>13.1f} "
              f"{lines / max(r['cpu'], 0.01):>13,.0f} {size / max(r['cpu'], 0.01) / 1e6:>10.1f} {extra}")
print()
print("ratio = engine lines/s per core / rg -j1 lines/s per core (user+sys CPU time, same file, same run).")
print("rg maps the file: its peak RSS counts the file's page-cache pages; the engine streams 256 KiB reads.")
print("matched: engine records won by a rule (joined multi-line records, one rule each); rg: matching lines.")
low = min(ratios)
print(f"lowest: {low[1]}")
print(f"ratio {low[0]:.2f}")
PY

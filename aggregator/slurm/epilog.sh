#!/bin/sh
# faultline EpilogSlurmctld: tells the aggregator that a job ended, with its state and exit
# code, so a verdict is made at once; then sends what the job's own output files say.
# Install as (slurm.conf):
#   EpilogSlurmctld=/usr/lib/faultline/slurm/epilog.sh
# Runs once per job on the slurmctld host; never fails the job (always exits 0).
# State: SLURM_JOB_STATE when Slurm provides it; otherwise FAILED for a non-zero exit code
# (SLURM_JOB_EXIT_CODE2 is "exit:signal"), COMPLETED for 0:0. The sacct poll later refines
# states the epilog cannot see (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY) and the verdict is revised.
#
# Job output: the job's stdout/stderr (slurm-%j.out on a shared filesystem) is followed by no
# agent. After the end event, `faultline job output` extracts its symptoms here (only symptoms
# travel, not the file) and the verdict gets a "job_output" revision. Paths come from
# SLURM_JOB_STDOUT/SLURM_JOB_STDERR, else from `scontrol show job`; the tasks per node
# (NumTasks/NumNodes) place ranks on nodes. This needs read access to the files: where users'
# directories are private to SlurmUser, run this script as the compute nodes' Epilog instead
# (it then reports from the batch host only, FAULTLINE_BATCH_HOST_ONLY=1).
# Settings (optional) in /etc/faultline/slurm.env:
#   FAULTLINE_SERVER=http://aggregator:8470  FAULTLINE_TOKEN_FILE=/etc/faultline/token
#   FAULTLINE_BIN=/usr/bin/faultline  FAULTLINE_JOB_OUTPUT=1 (0: do not send job output)
#   FAULTLINE_OUTPUT_TIMEOUT=120 (seconds for reading and sending it)
[ -r /etc/faultline/slurm.env ] && . /etc/faultline/slurm.env
FAULTLINE_BIN=${FAULTLINE_BIN:-/usr/bin/faultline}
FAULTLINE_SERVER=${FAULTLINE_SERVER:-http://127.0.0.1:8470}
FAULTLINE_TOKEN_FILE=${FAULTLINE_TOKEN_FILE:-/etc/faultline/token}
FAULTLINE_SCONTROL=${FAULTLINE_SCONTROL:-scontrol}

[ -n "$SLURM_JOB_ID" ] || exit 0
if [ "${FAULTLINE_BATCH_HOST_ONLY:-0}" = 1 ]; then
  first=$("$FAULTLINE_SCONTROL" show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | head -n 1)
  [ -n "$first" ] && [ "$first" != "${SLURMD_NODENAME:-$(hostname -s)}" ] && exit 0
fi
# The job as slurmctld still knows it: output paths and the task layout (NumTasks/NumNodes).
info=$("$FAULTLINE_SCONTROL" show job -o "$SLURM_JOB_ID" 2>/dev/null)
field() { printf '%s\n' "$info" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
tasks=$(field NumTasks)
nodes=$(field NumNodes)
layout=""
case "$tasks$nodes" in
  ''|*[!0-9]*) ;;
  *) [ "$nodes" -gt 0 ] && [ $((tasks % nodes)) -eq 0 ] && layout="--ntasks-per-node $((tasks / nodes))" ;;
esac
exit_code=${SLURM_JOB_EXIT_CODE2:-}
if [ -z "$exit_code" ] && [ -n "$SLURM_JOB_EXIT_CODE" ]; then
  # Raw wait status: exit code in the high byte, signal in the low 7 bits.
  exit_code="$(( (SLURM_JOB_EXIT_CODE >> 8) & 255 )):$(( SLURM_JOB_EXIT_CODE & 127 ))"
fi
set -- job end "$SLURM_JOB_ID" --nodes "${SLURM_JOB_NODELIST:-}"
[ -n "$exit_code" ] && set -- "$@" --exit-code "$exit_code"
[ -n "$SLURM_JOB_STATE" ] && set -- "$@" --state "$SLURM_JOB_STATE"
[ -n "$SLURM_JOB_START_TIME" ] && set -- "$@" --start-time "$SLURM_JOB_START_TIME"
[ -n "$SLURM_JOB_END_TIME" ] && set -- "$@" --time "$SLURM_JOB_END_TIME"
# The workload: earlier successful runs of the same name, user and partition are the baseline of
# a failed job's unrecognized error lines (docs/aggregator.md).
[ -n "$SLURM_JOB_NAME" ] && set -- "$@" --name "$SLURM_JOB_NAME"
[ -n "$SLURM_JOB_USER" ] && set -- "$@" --user "$SLURM_JOB_USER"
[ -n "$SLURM_JOB_PARTITION" ] && set -- "$@" --partition "$SLURM_JOB_PARTITION"
# shellcheck disable=SC2086
if ! "$FAULTLINE_BIN" --server "$FAULTLINE_SERVER" --token-file "$FAULTLINE_TOKEN_FILE" --timeout 5 "$@" $layout; then
  logger -t faultline-epilog "job $SLURM_JOB_ID: could not report end to $FAULTLINE_SERVER" 2>/dev/null
fi

[ "${FAULTLINE_JOB_OUTPUT:-1}" = 0 ] && exit 0
# Output patterns Slurm left unexpanded: %j job id, %u user, %x job name, %% a percent sign.
expand() {
  printf '%s' "$1" | sed -e "s/%%/\x01/g" -e "s/%j/$SLURM_JOB_ID/g" -e "s/%A/$SLURM_JOB_ID/g" \
    -e "s/%u/${SLURM_JOB_USER:-%u}/g" -e "s/%x/${SLURM_JOB_NAME:-%x}/g" -e "s/\x01/%/g"
}
out=$(expand "${SLURM_JOB_STDOUT:-$(field StdOut)}")
err=$(expand "${SLURM_JOB_STDERR:-$(field StdErr)}")
set --
for f in "$out" "$err"; do
  [ -n "$f" ] || continue
  [ "$f" = "$out" ] && [ $# -gt 0 ] && continue  # stderr into the same file
  if [ -f "$f" ] && [ -r "$f" ]; then
    set -- "$@" "$f"
  else
    logger -t faultline-epilog "job $SLURM_JOB_ID: cannot read its output $f" 2>/dev/null
  fi
done
[ $# -gt 0 ] || exit 0
# shellcheck disable=SC2086
if ! timeout "${FAULTLINE_OUTPUT_TIMEOUT:-120}" "$FAULTLINE_BIN" --server "$FAULTLINE_SERVER" \
    --token-file "$FAULTLINE_TOKEN_FILE" --timeout 30 job output "$SLURM_JOB_ID" "$@" \
    --nodes "${SLURM_JOB_NODELIST:-}" $layout >/dev/null; then
  logger -t faultline-epilog "job $SLURM_JOB_ID: could not send its output to $FAULTLINE_SERVER" 2>/dev/null
fi
exit 0

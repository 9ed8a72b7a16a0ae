#!/bin/sh
# faultline EpilogSlurmctld: tells the aggregator that a job ended, with its state and exit
# code, so a verdict is made at once. Install as (slurm.conf):
#   EpilogSlurmctld=/usr/lib/faultline/slurm/epilog.sh
# Runs once per job on the slurmctld host; never fails the job (always exits 0).
# State: SLURM_JOB_STATE when Slurm provides it; otherwise FAILED for a non-zero exit code
# (SLURM_JOB_EXIT_CODE2 is "exit:signal"), COMPLETED for 0:0. The sacct poll later refines
# states the epilog cannot see (TIMEOUT, NODE_FAIL, OUT_OF_MEMORY) and the verdict is revised.
[ -r /etc/faultline/slurm.env ] && . /etc/faultline/slurm.env
FAULTLINE_BIN=${FAULTLINE_BIN:-/usr/bin/faultline}
FAULTLINE_SERVER=${FAULTLINE_SERVER:-http://127.0.0.1:8470}
FAULTLINE_TOKEN_FILE=${FAULTLINE_TOKEN_FILE:-/etc/faultline/token}

[ -n "$SLURM_JOB_ID" ] || exit 0
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
if ! "$FAULTLINE_BIN" --server "$FAULTLINE_SERVER" --token-file "$FAULTLINE_TOKEN_FILE" --timeout 5 "$@"; then
  logger -t faultline-epilog "job $SLURM_JOB_ID: could not report end to $FAULTLINE_SERVER" 2>/dev/null
fi
exit 0

#!/bin/sh
# faultline PrologSlurmctld: tells the aggregator that a job started and on which nodes.
# Install as (slurm.conf):  PrologSlurmctld=/usr/lib/faultline/slurm/prolog.sh
# Runs once per job on the slurmctld host. Never fails the job: every error is logged and
# the script exits 0 (the aggregator's sacct poll fills in what was missed).
# Settings (optional) in /etc/faultline/slurm.env:
#   FAULTLINE_SERVER=http://aggregator:8470  FAULTLINE_TOKEN_FILE=/etc/faultline/token
#   FAULTLINE_BIN=/usr/bin/faultline
[ -r /etc/faultline/slurm.env ] && . /etc/faultline/slurm.env
FAULTLINE_BIN=${FAULTLINE_BIN:-/usr/bin/faultline}
FAULTLINE_SERVER=${FAULTLINE_SERVER:-http://127.0.0.1:8470}
FAULTLINE_TOKEN_FILE=${FAULTLINE_TOKEN_FILE:-/etc/faultline/token}

[ -n "$SLURM_JOB_ID" ] || exit 0
set -- job start "$SLURM_JOB_ID" --nodes "${SLURM_JOB_NODELIST:-}"
# Slurm 23.02+ exports the start time; otherwise the CLI stamps "now".
[ -n "$SLURM_JOB_START_TIME" ] && set -- "$@" --time "$SLURM_JOB_START_TIME"
# The workload: earlier successful runs of the same name, user and partition are the baseline of
# a failed job's unrecognized error lines (docs/aggregator.md).
[ -n "$SLURM_JOB_NAME" ] && set -- "$@" --name "$SLURM_JOB_NAME"
[ -n "$SLURM_JOB_USER" ] && set -- "$@" --user "$SLURM_JOB_USER"
[ -n "$SLURM_JOB_PARTITION" ] && set -- "$@" --partition "$SLURM_JOB_PARTITION"
if ! "$FAULTLINE_BIN" --server "$FAULTLINE_SERVER" --token-file "$FAULTLINE_TOKEN_FILE" --timeout 5 "$@"; then
  logger -t faultline-prolog "job $SLURM_JOB_ID: could not report start to $FAULTLINE_SERVER" 2>/dev/null
fi
exit 0

#!/usr/bin/env bash
# Stop the one-node SLURM cluster that tests/cluster/slurm_up.sh started.
#
# Stops slurmd and slurmctld by the pids in their pid files, and munged only
# if slurm_up.sh started it (a machine's own munged is left alone). Running it
# when nothing is up does nothing. Packages and /etc/slurm/slurm.conf stay, so
# the next slurm_up.sh starts in seconds.
set -euo pipefail

STATE="${PGLE_SLURM_STATE:-/var/tmp/pgle-slurm}"
say() { echo "slurm_down: $*" >&2; }

if [[ "$(id -u)" != 0 ]] && command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
  exec sudo -n --preserve-env=PGLE_SLURM_STATE bash "$0" "$@"
fi

stop() {  # stop NAME PIDFILE: TERM, wait up to 10 s, then KILL
  local name=$1 pidfile=$2 pid
  [[ -s "$pidfile" ]] || return 0
  pid=$(cat "$pidfile")
  if ! kill -0 "$pid" 2>/dev/null; then
    rm -f "$pidfile"
    return 0
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do
    kill -0 "$pid" 2>/dev/null || { say "stopped $name ($pid)."; rm -f "$pidfile"; return 0; }
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  say "killed $name ($pid) after 10 s."
  rm -f "$pidfile"
}

# slurmd first: it ends the job steps it runs; then the controller.
stop slurmd "$STATE/slurmd.pid"
stop slurmctld "$STATE/slurmctld.pid"
if [[ -e "$STATE/munged-started" ]]; then
  stop munged /run/munge/munged.pid
  rm -f "$STATE/munged-started"
fi
exit 0

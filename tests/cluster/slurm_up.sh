#!/usr/bin/env bash
# Start a one-node SLURM cluster on this machine for pgle's multi-process tests.
#
# Installs Debian's slurm-wlm and munge when they are missing, writes a
# slurm.conf for one node called "localhost", starts munged, slurmctld and
# slurmd as plain daemons (no systemd, no cgroups: this runs in containers and
# on bare CI machines), and waits until the node is idle. Running it again
# while the cluster is up does nothing but check it.
#
# Environment:
#   PGLE_SLURM_STATE  folder for state, spool, pid and log files
#                     (default /var/tmp/pgle-slurm)
#   PGLE_SLURM_WAIT   seconds to wait for the node to become idle (default 60)
#
# Exit status: 0 when `sinfo` shows the node idle, non-zero otherwise, with the
# reason on stderr and the daemons' logs named.
set -euo pipefail

STATE="${PGLE_SLURM_STATE:-/var/tmp/pgle-slurm}"
WAIT="${PGLE_SLURM_WAIT:-60}"
CONF=/etc/slurm/slurm.conf
# Marks a slurm.conf this script wrote; any other one belongs to a real
# cluster and must never be overwritten.
MARKER="# written by pgle tests/cluster/slurm_up.sh"
NODE=localhost

say() { echo "slurm_up: $*" >&2; }
die() { say "error: $*"; exit 1; }

alive() {  # alive PIDFILE: the pid in PIDFILE is a running process
  [[ -s "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null
}

node_state() {
  sinfo -h -n "$NODE" -o %T 2>/dev/null | head -n1 || true
}

# Already up: nothing to do. Our own cluster (slurm.conf carries the marker)
# counts as up only while both daemons live: slurmctld keeps showing a dead
# slurmd's node idle for SlurmdTimeout seconds, and sinfo retries for seconds
# when no slurmctld answers. A cluster set up some other way is asked directly.
if [[ -e "$CONF" ]] && grep -qF "$MARKER" "$CONF" && command -v sinfo >/dev/null; then
  if alive "$STATE/slurmctld.pid" && alive "$STATE/slurmd.pid" \
      && [[ "$(node_state)" =~ ^(idle|mixed|allocated) ]]; then
    say "cluster already up (node $NODE $(node_state))."
    exit 0
  fi
elif command -v sinfo >/dev/null && [[ -n "${SLURM_CONF:-}" || -e "$CONF" ]]; then
  # Someone else's cluster (CI's image, a developer's own): whatever its node is called, use it
  # as it is; never touch its munge or configuration. slurm_fixture.py asks sinfo for the node.
  up=$(timeout 20 sinfo -h -t idle,mixed,allocated -o %n 2>/dev/null | head -n1 || true)
  if [[ -n "$up" ]]; then
    say "a SLURM cluster is already up (node $up); using it."
    exit 0
  fi
fi

if [[ "$(id -u)" != 0 ]]; then
  # Daemons, /etc/slurm and apt need root; re-run through sudo when it works
  # without a password, otherwise say so in one line.
  if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    exec sudo -n --preserve-env=PGLE_SLURM_STATE,PGLE_SLURM_WAIT bash "$0" "$@"
  fi
  die "needs root (or password-less sudo) to install and start slurm."
fi

# --- install -----------------------------------------------------------------
need_install=0
for bin in slurmctld slurmd srun sinfo munged; do
  command -v "$bin" >/dev/null || [[ -x "/usr/sbin/$bin" ]] || need_install=1
done
if (( need_install )); then
  t0=$(date +%s)
  say "installing slurm-wlm and munge with apt-get ..."
  export DEBIAN_FRONTEND=noninteractive
  # Package scripts would try to start the services through invoke-rc.d;
  # without an init system that fails or hangs, and this script starts them
  # itself below. policy-rc.d exit 101 = "action forbidden", only while we install.
  created_policy=0
  if [[ ! -e /usr/sbin/policy-rc.d ]]; then
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    created_policy=1
  fi
  cleanup_policy() { if (( created_policy )); then rm -f /usr/sbin/policy-rc.d; fi; }
  trap cleanup_policy EXIT
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
  cleanup_policy
  trap - EXIT
  say "installed in $(( $(date +%s) - t0 ))s."
fi
export PATH="$PATH:/usr/sbin:/sbin"

mkdir -p "$STATE"

# --- munge -------------------------------------------------------------------
# munged runs as the munge user and refuses keys or folders it does not own.
mkdir -p /etc/munge /var/lib/munge /var/log/munge /run/munge
if [[ ! -s /etc/munge/munge.key ]]; then
  if command -v mungekey >/dev/null; then
    mungekey --create --keyfile=/etc/munge/munge.key
  else
    dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
  fi
fi
chown -R munge:munge /etc/munge /var/lib/munge /var/log/munge /run/munge
chmod 0700 /etc/munge /var/lib/munge /var/log/munge
chmod 0755 /run/munge
chmod 0400 /etc/munge/munge.key
if ! alive /run/munge/munged.pid; then
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2 /run/munge/munge.socket.2.lock
  runuser -u munge -- /usr/sbin/munged
  # slurm_down.sh stops munged only if this script started it.
  touch "$STATE/munged-started"
fi
for _ in $(seq 50); do munge -n </dev/null >/dev/null 2>&1 && break; sleep 0.1; done
munge -n </dev/null | unmunge >/dev/null || die "munge does not work (see /var/log/munge/munged.log)."

# --- slurm.conf --------------------------------------------------------------
mkdir -p "$STATE/ctld" "$STATE/spool"
# slurm.conf takes no arithmetic; at least 2 CPUs so that `srun -n 2` fits on
# a one-core machine too (config_overrides below lets slurmd accept that).
cpus=$(nproc)
if (( cpus < 2 )); then cpus=2; fi
if [[ -e "$CONF" ]] && ! grep -qF "$MARKER" "$CONF"; then
  die "$CONF exists and was not written by this script; refusing to overwrite a real cluster's configuration."
fi
mkdir -p /etc/slurm
new_conf=$(cat <<EOF
$MARKER
# One-node cluster for tests: every daemon and job runs as root on localhost.
ClusterName=pgle
SlurmctldHost=$NODE(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# No cgroups in containers: track processes through /proc, bind nothing.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
# Trust the CPU count below over what slurmd detects (VMs report odd topologies).
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool
SlurmctldPidFile=$STATE/slurmctld.pid
SlurmdPidFile=$STATE/slurmd.pid
SlurmctldLogFile=$STATE/slurmctld.log
SlurmdLogFile=$STATE/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
# Short timeouts: a test job that dies must not block the next one for minutes.
KillWait=5
MinJobAge=30
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
)
if [[ ! -e "$CONF" ]] || [[ "$(cat "$CONF")" != "$new_conf" ]]; then
  printf '%s\n' "$new_conf" > "$CONF"
fi

# --- daemons -----------------------------------------------------------------
if ! alive "$STATE/slurmctld.pid"; then
  # -c: start from an empty job state; jobs of an earlier test cluster are gone.
  slurmctld -c -f "$CONF" || die "slurmctld did not start (see $STATE/slurmctld.log)."
fi
if ! alive "$STATE/slurmd.pid"; then
  # -N: this node's name in slurm.conf, whatever the machine's hostname is.
  slurmd -N "$NODE" -f "$CONF" || die "slurmd did not start (see $STATE/slurmd.log)."
fi

deadline=$(( $(date +%s) + WAIT ))
state=""
while (( $(date +%s) < deadline )); do
  state=$(node_state)
  case "$state" in
    idle*|mixed*|allocated*)
      # sinfo can say idle before slurmd has registered; one real job step
      # proves munge credentials, slurmctld and slurmd all work.
      if timeout 30 srun -n 1 -t 1 -J pgle-slurm-up true; then
        say "cluster up: node $NODE $state, $cpus CPUs."
        exit 0
      fi ;;
    down*|drain*)
      # A node that was down in an earlier run's saved state: bring it back.
      scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
die "node $NODE is '${state:-unknown}' after ${WAIT}s, not idle (logs: $STATE/slurmctld.log, $STATE/slurmd.log)."

#!/usr/bin/env bash
# A one-node Slurm cluster on this machine (slurmctld + slurmd + munged, as root), for the Slurm
# tests (tests/runs/test_slurm.py) and for trying `hydra/launcher=slurm` without a cluster.
#
#   sudo .ci/slurm_cluster.sh start    # install slurm-wlm + munge (apt) when missing, configure, start, wait until idle
#   sudo .ci/slurm_cluster.sh status   # sinfo; exit 0 when the node answers
#   sudo .ci/slurm_cluster.sh stop     # stop the daemons this script started (by their pid files)
#
# The node is this host with its real CPU count and memory (`slurmd -C`), one partition `debug`
# (the default), no accounting database (sacct does not answer: the launcher reads squeue) and
# no cgroup plugin (proctrack/linuxproc, task/none: they work in a container). It writes
# /etc/slurm/slurm.conf (refusing to replace one it did not write) and keeps its state, spool,
# pid and log files in $MEDIMG_SLURM_DIR (default /var/tmp/medimg-slurm).
set -euo pipefail

DIR=${MEDIMG_SLURM_DIR:-/var/tmp/medimg-slurm}
CONF=/etc/slurm/slurm.conf
MARK="# written by medimg_bench .ci/slurm_cluster.sh (one-node test cluster)"
CLUSTER=medimg-local

say() { echo "slurm_cluster: $*" >&2; }

answers() { timeout 10 sinfo -h >/dev/null 2>&1; }

install() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null \
      && command -v sbatch >/dev/null; then
    return 0
  fi
  command -v apt-get >/dev/null || { say "slurmctld/slurmd/munged missing and no apt-get: install Slurm and munge"; return 1; }
  say "installing slurm-wlm and munge (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq -o DPkg::Lock::Timeout=600 slurm-wlm munge >/dev/null \
    || { apt-get update -qq -o DPkg::Lock::Timeout=600 >/dev/null \
         && apt-get install -y -qq -o DPkg::Lock::Timeout=600 slurm-wlm munge >/dev/null; }
}

start_munge() {
  if munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    return 0  # a munged already answers (the system's, or one started before)
  fi
  if [ ! -s /etc/munge/munge.key ]; then
    mkdir -p /etc/munge
    dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
  fi
  local user=root
  if id munge >/dev/null 2>&1; then user=munge; fi
  mkdir -p /run/munge /var/lib/munge /var/log/munge
  chown -R "$user" /etc/munge /run/munge /var/lib/munge /var/log/munge
  chmod 700 /etc/munge && chmod 400 /etc/munge/munge.key && chmod 755 /run/munge
  if [ "$user" = root ]; then
    munged --force
  else
    runuser -u munge -- munged
  fi
  mkdir -p "$DIR" && touch "$DIR/munged.ours"  # stop ends it too
  for _ in $(seq 50); do
    munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  say "munged does not answer"; return 1
}

write_conf() {
  if [ -e "$CONF" ] && ! grep -qF "$MARK" "$CONF"; then
    say "$CONF exists and was not written by this script: not replacing it"; return 1
  fi
  local host node
  host=$(hostname -s)
  # `slurmd -C`: this machine's CPUs, sockets, cores, threads and memory (MB), as slurmd sees them
  node=$(slurmd -C | head -1 | sed -e "s/^NodeName=[^ ]*/NodeName=$host NodeAddr=127.0.0.1/")
  mkdir -p "$DIR/ctld" "$DIR/spool" /etc/slurm
  cat >"$CONF" <<EOF
$MARK
ClusterName=$CLUSTER
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# a requeued job may start again this many seconds later (default 120 s)
AuthInfo=cred_expire=15
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ReturnToService=2
# a cancelled or requeued job gets SIGTERM, then SIGKILL this many seconds later
KillWait=2
# finished jobs stay visible to squeue/scontrol this long (there is no sacct here)
MinJobAge=900
SlurmctldTimeout=30
SlurmdTimeout=60
$node State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start() {
  if answers; then
    say "a Slurm cluster already answers:"; sinfo >&2; return 0
  fi
  [ "$(id -u)" = 0 ] || { say "start needs root (slurmctld and slurmd run as root here)"; return 1; }
  install
  start_munge
  write_conf
  pid_alive "$DIR/slurmctld.pid" || slurmctld
  pid_alive "$DIR/slurmd.pid" || slurmd -N "$(hostname -s)"
  for _ in $(seq 120); do
    if answers && sinfo -h -o %T | grep -qx idle; then
      say "up:"; sinfo >&2; return 0
    fi
    sleep 0.5
  done
  say "the node is not idle after 60 s:"; sinfo >&2 || true
  tail -20 "$DIR/slurmctld.log" "$DIR/slurmd.log" >&2 || true
  return 1
}

stop_daemon() {
  local pidfile=$1
  if pid_alive "$pidfile"; then
    local pid
    pid=$(cat "$pidfile")
    kill "$pid"
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
  fi
}

stop() {
  # only the daemons this script started (their pid files in $DIR; munged when it started it)
  stop_daemon "$DIR/slurmd.pid"
  stop_daemon "$DIR/slurmctld.pid"
  if [ -e "$DIR/munged.ours" ]; then
    stop_daemon /run/munge/munged.pid
    rm -f "$DIR/munged.ours"
  fi
  say "stopped"
}

status() {
  if answers; then sinfo; else say "no Slurm cluster answers (sinfo fails)"; return 1; fi
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Start a real Slurm 22.05 on 127.0.0.1 for the Slurm backend's tests and for trying the
# observer by hand: munge, slurmdbd on MariaDB, slurmctld and three slurmd "nodes" n1..n3
# (4 fake GPUs each, GRES device files are symlinks to /dev/null), partitions gpu (default)
# and debug, accounts research (fairshare 70) and prod (30), QOS normal/high/low.
# Debian 12, run as root, no systemd. Idempotent: what already runs is left as it is.
#
# Usage: deploy/local/infra/slurm-up.sh            then: export SLURM_CONF=... (printed last)
#        deploy/local/infra/slurm-down.sh          stops what this script started
# Environment:
#   INFRA_DIR        state root (default /tmp/observer-infra); Slurm lives in $INFRA_DIR/slurm
#   SLURMCTLD_PORT   default 6817;  SLURMDBD_PORT default 6819;  slurmd n1..n3 use 17001-17003
#   SLURM_PRIVATE_DATA  PrivateData of slurmctld and slurmdbd, e.g. "jobs" or "jobs,usage";
#                    default unset (every user sees every job). It lives in etc/private-data.conf
#                    (slurmctld's) and etc/private-data-dbd.conf (slurmdbd's): a change is applied with
#                    `scontrol reconfigure` and SIGHUP to slurmdbd, without a restart.
#
# A configuration change is made holding $D/tests.lock, the lock the tests take for the cluster,
# so a restart or reconfiguration never lands in the middle of another session's test; a caller
# that holds it already (the tests' harness, which runs this script under it) sets
# TESTS_LOCK_HELD=1.
#
# What the cluster enforces, so probes can meet real limits:
#   QOS high  Priority=1000 (jumps the queue), MaxTRESPerUser=gres/gpu=8
#   QOS low   Priority=10, MaxTRESPerJob=gres/gpu=2: a bigger job pends with QOSMaxGRESPerJob
#   PrivateData is unset by default: the observer must see every tenant's jobs. A production
#   cluster with PrivateData=jobs,usage needs the observer's user to be an operator
#   (sacctmgr modify user <observer> set AdminLevel=Operator); the observer here is root, the
#   SlurmUser, which sees everything either way. Users alice (account research) and bob (prod)
#   are what the isolation probe reads each other's jobs as.
#   Memory is not confined by cgroups here (no systemd); JobAcctGatherParams=OverMemoryKill
#   polls RSS every second and kills a step that outgrows its --mem instead.
set -euo pipefail

root=${INFRA_DIR:-/tmp/observer-infra}
D=$root/slurm
ctld_port=${SLURMCTLD_PORT:-6817}
dbd_port=${SLURMDBD_PORT:-6819}
host=$(hostname -s)
conf=$D/etc/slurm.conf
T0=$(date +%s%N)
elapsed() {
  local ms=$((($(date +%s%N) - T0) / 1000000))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

mkdir -p "$D"/{etc,state,spool,run,log,fakedev}

need=()
for cmd in munged slurmctld slurmd sbatch slurmdbd mariadbd; do
  command -v "$cmd" >/dev/null || need+=("$cmd")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "installing packages (missing: ${need[*]})"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends \
    munge slurmctld slurmd slurm-client slurmdbd mariadb-server >/dev/null
fi

alive() { local pid; pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
wait_tcp() {
  for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 did not open" >&2
  return 1
}
# Changes are written holding the tests' lock (fd 9), taken only when something changes, and
# kept to the end; every daemon started here gets `9>&-`, or it would hold the lock forever.
locked=0
lock_tests() {
  [ "$locked" = 1 ] && return 0
  # TESTS_LOCK_HELD: the caller (the tests' harness) holds it already, and would wait forever
  if [ -z "${TESTS_LOCK_HELD:-}" ]; then
    exec 9>"$D/tests.lock"
    flock 9
  fi
  locked=1
}
# write $1 from stdin only when it differs; returns 1 when unchanged
write_if_changed() {
  local new
  new=$(cat)
  if [ -f "$1" ] && [ "$(cat "$1")" = "$new" ]; then return 1; fi
  lock_tests
  printf '%s\n' "$new" >"$1"
}

# ---- munge (the package's postinst makes the key); left running by slurm-down if it was up
mkdir -p /run/munge && chown munge:munge /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 2>/dev/null
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
fi
if ! munge -n >/dev/null 2>&1; then
  runuser -u munge -- /usr/sbin/munged && touch "$D/run/started-munge"
fi
munge -n | unmunge >/dev/null

# ---- MariaDB: started only if it is down
if ! mysqladmin ping >/dev/null 2>&1; then
  /etc/init.d/mariadb start >/dev/null && touch "$D/run/started-mariadb"
fi
# The database lives as long as the state dir: a fresh state dir numbers jobs from 1 again,
# and old accounting rows with the same ids would make sacct answer for the wrong job.
if [ ! -e "$D/state/.accounting-db" ]; then
  mysql -e "DROP DATABASE IF EXISTS observer_slurm_acct"
  rm -f "$D/state/.accounting-configured"
  touch "$D/state/.accounting-db"
fi
mysql -e "CREATE DATABASE IF NOT EXISTS observer_slurm_acct;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpass';
  GRANT ALL ON observer_slurm_acct.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

# slurmd drops a gpu GRES without a device file ("Removing file-less GPU")
for i in 0 1 2 3; do ln -sfn /dev/null "$D/fakedev/nvidia$i"; done

# the configuration shared with slurm24-up.sh's cluster, on this one's name, ports and paths
cluster=observer dir=$D node_ports=17001-17003 db_name=observer_slurm_acct db_port=
# shellcheck source=deploy/local/infra/slurm-conf.sh
source "$(dirname "$0")/slurm-conf.sh"
private_changed=0
# not a pipe: the lock must be taken by this shell, not by a subshell that exits at once
write_if_changed "$D/etc/private-data.conf" <<<"$(private_data_conf)" && private_changed=1
write_if_changed "$D/etc/private-data-dbd.conf" <<<"$(private_data_conf)" && private_changed=1
chmod 600 "$D/etc/private-data-dbd.conf"
changed=0
write_if_changed "$D/etc/slurmdbd.conf" <<<"$(slurmdbd_conf)" && changed=1
chmod 600 "$D/etc/slurmdbd.conf"
write_if_changed "$conf" <<<"$(slurm_conf)" && changed=1
write_if_changed "$D/etc/gres.conf" <<<"$(gres_conf)" && changed=1

daemons=(slurmd-n1 slurmd-n2 slurmd-n3 slurmctld slurmdbd)
if [ "$changed" = 1 ]; then
  # a new configuration needs fresh daemons (node and port changes are not reconfigurable)
  for p in "${daemons[@]}"; do alive "$D/run/$p.pid" && kill "$(cat "$D/run/$p.pid")"; done
  for p in "${daemons[@]}"; do while alive "$D/run/$p.pid"; do sleep 0.1; done; done
elif [ "$private_changed" = 1 ]; then
  # PrivateData is reconfigurable: slurmctld re-reads on reconfigure, slurmdbd on SIGHUP
  if alive "$D/run/slurmctld.pid"; then SLURM_CONF=$conf scontrol reconfigure; fi
  if alive "$D/run/slurmdbd.pid"; then kill -HUP "$(cat "$D/run/slurmdbd.pid")"; fi
fi

export SLURM_CONF=$conf
if ! alive "$D/run/slurmdbd.pid"; then
  slurmdbd 9>&- # reads slurmdbd.conf from the directory of $SLURM_CONF
fi
wait_tcp "$dbd_port"
configured=$D/state/.accounting-configured # skips ~3 s of sacctmgr calls on a re-run
if [ ! -e "$configured" ]; then
  for _ in $(seq 1 100); do timeout 3 sacctmgr -n show cluster >/dev/null 2>&1 && break; sleep 0.2; done
  # sacctmgr refuses to add what exists ("Nothing new added"); a reused database is fine
  add() { timeout 10 sacctmgr -i add "$@" >/dev/null 2>&1 || true; }
  add cluster observer
  add qos high Priority=1000
  add qos low Priority=10
  add account research Description=research Organization=lab Fairshare=70
  add account prod Description=prod Organization=lab Fairshare=30
  id alice >/dev/null 2>&1 || useradd -m alice
  id bob >/dev/null 2>&1 || useradd -m bob
  add user root account=research,prod qos=normal,high,low DefaultQOS=normal
  add user alice account=research qos=normal,low DefaultQOS=normal
  add user bob account=prod qos=normal,high DefaultQOS=normal
fi

alive "$D/run/slurmctld.pid" || slurmctld -f "$conf" 9>&-
wait_tcp "$ctld_port"
for n in n1 n2 n3; do alive "$D/run/slurmd-$n.pid" || slurmd -f "$conf" -N "$n" 9>&-; done

# all three nodes registered (any responding state: a drained node from a test is still up)
registered() {
  timeout 5 sinfo -h -N -o '%N %T' 2>/dev/null | sort -u |
    grep -cE ' (idle|mixed|allocated|completing|drained|draining)$' || true
}
for _ in $(seq 1 150); do [ "$(registered)" = 3 ] && break; sleep 0.1; done
if [ "$(registered)" != 3 ]; then
  echo "slurm nodes did not register:" >&2
  sinfo -N >&2 || true
  exit 1
fi
if [ ! -e "$configured" ]; then
  # slurmdbd knows gres/gpu only once slurmctld has registered AccountingStorageTRES
  timeout 10 sacctmgr -i modify qos high set MaxTRESPerUser=gres/gpu=8 >/dev/null
  timeout 10 sacctmgr -i modify qos low set MaxTRESPerJob=gres/gpu=2 >/dev/null
  touch "$configured"
fi

echo "slurm up in $(elapsed): 3 nodes x 4 GPUs, partitions gpu (default) and debug"
echo "export SLURM_CONF=$conf"

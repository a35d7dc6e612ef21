#!/usr/bin/env bash
# Start a real Slurm 24.11 beside slurm-up.sh's 22.05, for recording its JSON and testing the
# parsers against it: Debian 13 (trixie) in a debootstrap chroot with its own munge (key and
# socket), its own MariaDB (port 3317, the chroot's socket), slurmdbd, slurmctld and three
# slurmd "nodes" n1..n3, the same layout as slurm-up.sh: 4 fake GPUs each (GRES device files
# are symlinks to /dev/null), partitions gpu (default) and debug, accounts research (fairshare
# 70) and prod (30) with users alice and bob, QOS normal/high/low with the same limits.
# Run as root on the host (Debian 12 here), no systemd. Idempotent: what already runs is left.
#
# Usage: deploy/local/infra/slurm24-up.sh          then: export PATH=... (printed last)
#        deploy/local/infra/slurm24-down.sh        stops what this script started
# The clients are wrappers in $INFRA_DIR/slurm24/bin (squeue, sinfo, scontrol, sbatch, sacct,
# sacctmgr, scancel, srun) that run the chroot's program in the chroot with its SLURM_CONF,
# whatever SLURM_CONF the caller has; they run in the chroot's /tmp, where a job's default
# output goes.
# Environment:
#   INFRA_DIR        state root (default /tmp/observer-infra); this Slurm lives in $INFRA_DIR/slurm24:
#                    the chroot in root/, Slurm's files in root/srv/slurm (/srv/slurm inside)
#   DEBIAN_MIRROR    default http://deb.debian.org/debian
#   SLURMCTLD_PORT   default 6917;  SLURMDBD_PORT default 6919;  slurmd n1..n3 use 17101-17103
#
# A configuration change is made holding $D/tests.lock, the lock the tests take for the cluster.
set -euo pipefail

root=${INFRA_DIR:-/tmp/observer-infra}
D=$root/slurm24
R=$D/root     # the trixie chroot
S=/srv/slurm  # Slurm's files as the chroot sees them; $R$S on the host
ctld_port=${SLURMCTLD_PORT:-6917}
dbd_port=${SLURMDBD_PORT:-6919}
db_port=3317
host=$(hostname -s)
conf=$S/etc/slurm.conf
T0=$(date +%s%N)
elapsed() {
  local ms=$((($(date +%s%N) - T0) / 1000000))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

mkdir -p "$D"

# ---- the chroot: debootstrap, then the packages; each marker is written once its step worked
if [ ! -e "$D/.debootstrapped" ]; then
  command -v debootstrap >/dev/null || {
    echo "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  }
  echo "debootstrap trixie into $R"
  rm -rf --one-file-system "$R"
  debootstrap --variant=minbase trixie "$R" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$D/debootstrap.log"
  touch "$D/.debootstrapped"
fi
# the packages' scripts, slurmd and the job accounting read /proc; hwloc reads /sys
mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
mountpoint -q "$R/sys" || mount -t sysfs sysfs "$R/sys"
if [ ! -e "$D/.installed" ]; then
  # no daemon starts from a package's postinst: this script starts them
  printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
  chmod +x "$R/usr/sbin/policy-rc.d"
  echo "installing Slurm 24.11, munge and MariaDB in the chroot"
  chroot "$R" env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends \
      munge slurmctld slurmd slurm-client slurmdbd mariadb-server' >"$D/apt.log" 2>&1 ||
    { tail -20 "$D/apt.log" >&2; exit 1; }
  touch "$D/.installed"
fi

in_root() { chroot "$R" "$@"; }
alive() { local pid; pid=$(cat "$R$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
wait_tcp() {
  for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 did not open" >&2
  return 1
}
mkdir -p "$R$S"/{etc,state,run,log,fakedev} "$R$S"/spool/n{1,2,3} "$D/bin"
locked=0
lock_tests() { # fd 9, kept to the end; every daemon started here gets `9>&-`
  [ "$locked" = 1 ] && return 0
  exec 9>"$D/tests.lock"
  flock 9
  locked=1
}
write_if_changed() { # write $1 from stdin only when it differs; returns 1 when unchanged
  local new
  new=$(cat)
  if [ -f "$1" ] && [ "$(cat "$1")" = "$new" ]; then return 1; fi
  lock_tests
  printf '%s\n' "$new" >"$1"
}

# ---- the clients, run in the chroot with this cluster's configuration
for cmd in squeue sinfo scontrol sbatch sacct sacctmgr scancel srun sdiag; do
  write_if_changed "$D/bin/$cmd" <<EOF || true
#!/bin/sh
exec chroot $R /bin/sh -c 'cd /tmp && exec "\$0" "\$@"' env SLURM_CONF=$conf $cmd "\$@"
EOF
  chmod +x "$D/bin/$cmd"
done

# ---- munge: the chroot's own key (made by the package) and socket (the chroot's /run/munge)
mkdir -p "$R/run/munge" && in_root chown munge:munge /run/munge
if ! in_root munge -n >/dev/null 2>&1; then
  in_root runuser -u munge -- /usr/sbin/munged 9>&-
fi
in_root sh -c 'munge -n | unmunge >/dev/null'

# ---- MariaDB on 127.0.0.1:3317 and the chroot's socket
write_if_changed "$R/etc/mysql/mariadb.conf.d/90-observer.cnf" <<EOF || true
[mysqld]
port = $db_port
bind-address = 127.0.0.1
[client]
port = $db_port
EOF
if ! in_root mariadb-admin ping >/dev/null 2>&1; then
  in_root /etc/init.d/mariadb start >/dev/null 9>&-
fi
# The database lives as long as the state dir: a fresh one numbers jobs from 1 again.
if [ ! -e "$R$S/state/.accounting-db" ]; then
  in_root mariadb -e "DROP DATABASE IF EXISTS observer_slurm24_acct"
  rm -f "$R$S/state/.accounting-configured"
  touch "$R$S/state/.accounting-db"
fi
in_root mariadb -e "CREATE DATABASE IF NOT EXISTS observer_slurm24_acct;
  CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpass';
  GRANT ALL ON observer_slurm24_acct.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"

for i in 0 1 2 3; do ln -sfn /dev/null "$R$S/fakedev/nvidia$i"; done

changed=0
write_if_changed "$R$S/etc/slurmdbd.conf" <<EOF && changed=1
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StoragePort=$db_port
StorageLoc=observer_slurm24_acct
StorageUser=slurm
StoragePass=slurmpass
LogFile=$S/log/slurmdbd.log
PidFile=$S/run/slurmdbd.pid
EOF
chmod 600 "$R$S/etc/slurmdbd.conf"

# As slurm-up.sh's, on this cluster's ports and paths (its comments say why each line is there).
write_if_changed "$R$conf" <<EOF && changed=1
ClusterName=observer24
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/run/slurmctld.pid
SlurmdPidFile=$S/run/slurmd-%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
JobAcctGatherParams=OverMemoryKill
MpiDefault=none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=100
SlurmdParameters=config_overrides
ReturnToService=2
KillWait=5
MinJobAge=300
GresTypes=gpu
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort=$dbd_port
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits,qos
AccountingStoreFlags=job_comment
PriorityType=priority/multifactor
PriorityCalcPeriod=1
PriorityWeightFairshare=1000
PriorityWeightAge=100
PriorityWeightQOS=2000
PriorityWeightPartition=500
NodeName=n[1-3] NodeHostname=$host NodeAddr=127.0.0.1 Port=[17101-17103] CPUs=8 RealMemory=4000 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP
PartitionName=debug Nodes=n[1-3] MaxTime=30 State=UP PriorityTier=2
EOF
# 24.11's slurmd loads a cgroup plugin unless told not to, and the chroot mounts no cgroups
write_if_changed "$R$S/etc/cgroup.conf" <<EOF && changed=1
CgroupPlugin=disabled
EOF
write_if_changed "$R$S/etc/gres.conf" <<EOF && changed=1
AutoDetect=off
NodeName=n[1-3] Name=gpu File=$S/fakedev/nvidia[0-3]
EOF

daemons=(slurmd-n1 slurmd-n2 slurmd-n3 slurmctld slurmdbd)
if [ "$changed" = 1 ]; then
  for p in "${daemons[@]}"; do alive "$S/run/$p.pid" && kill "$(cat "$R$S/run/$p.pid")"; done
  for p in "${daemons[@]}"; do while alive "$S/run/$p.pid"; do sleep 0.1; done; done
fi

export SLURM_CONF=$conf # read in the chroot by everything started below
alive "$S/run/slurmdbd.pid" || in_root slurmdbd 9>&-
wait_tcp "$dbd_port"
configured=$R$S/state/.accounting-configured
if [ ! -e "$configured" ]; then
  for _ in $(seq 1 100); do timeout 3 "$D/bin/sacctmgr" -n show cluster >/dev/null 2>&1 && break; sleep 0.2; done
  add() { timeout 10 "$D/bin/sacctmgr" -i add "$@" >/dev/null 2>&1 || true; }
  add cluster observer24
  add qos high Priority=1000
  add qos low Priority=10
  add account research Description=research Organization=lab Fairshare=70
  add account prod Description=prod Organization=lab Fairshare=30
  in_root id alice >/dev/null 2>&1 || in_root useradd -m alice
  in_root id bob >/dev/null 2>&1 || in_root useradd -m bob
  add user root account=research,prod qos=normal,high,low DefaultQOS=normal
  add user alice account=research qos=normal,low DefaultQOS=normal
  add user bob account=prod qos=normal,high DefaultQOS=normal
fi

alive "$S/run/slurmctld.pid" || in_root slurmctld -f "$conf" 9>&-
wait_tcp "$ctld_port"
for n in n1 n2 n3; do alive "$S/run/slurmd-$n.pid" || in_root slurmd -f "$conf" -N "$n" 9>&-; done

registered() {
  timeout 5 "$D/bin/sinfo" -h -N -o '%N %T' 2>/dev/null | sort -u |
    grep -cE ' (idle|mixed|allocated|completing|drained|draining)$' || true
}
for _ in $(seq 1 150); do [ "$(registered)" = 3 ] && break; sleep 0.1; done
if [ "$(registered)" != 3 ]; then
  echo "slurm 24.11 nodes did not register:" >&2
  "$D/bin/sinfo" -N >&2 || true
  exit 1
fi
if [ ! -e "$configured" ]; then
  timeout 10 "$D/bin/sacctmgr" -i modify qos high set MaxTRESPerUser=gres/gpu=8 >/dev/null
  timeout 10 "$D/bin/sacctmgr" -i modify qos low set MaxTRESPerJob=gres/gpu=2 >/dev/null
  touch "$configured"
fi

echo "slurm 24.11 up in $(elapsed): 3 nodes x 4 GPUs, partitions gpu (default) and debug"
echo "export PATH=$D/bin:\$PATH  # the clients; in the chroot SLURM_CONF=$conf ($R$conf here)"

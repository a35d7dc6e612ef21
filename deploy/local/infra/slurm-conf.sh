# The configuration of the local test clusters, one body for every release: sourced by
# slurm-up.sh (22.05 on the host) and slurm24-up.sh (24.11 in its chroot), which set
#   cluster   ClusterName          dir        Slurm's files as its daemons see them
#   host      this machine's name  ctld_port, dbd_port, node_ports (n1..n3, "17001-17003")
#   db_name   slurmdbd's database  db_port    its MariaDB port, empty for the default
# PrivateData lives in files of its own, so a test changes it without touching the rest:
# etc/private-data.conf for slurmctld, etc/private-data-dbd.conf for slurmdbd (24.11's refuses
# an included file that others can read, and its clients, run as any user, read slurm.conf's).
# shellcheck shell=bash

slurmdbd_conf() {
  cat <<EOF
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
${db_port:+StoragePort=$db_port
}StorageLoc=$db_name
StorageUser=slurm
StoragePass=slurmpass
LogFile=$dir/log/slurmdbd.log
PidFile=$dir/run/slurmdbd.pid
Include $dir/etc/private-data-dbd.conf
EOF
}

# Fast scheduling for tests: the main scheduler every 2 s and backfill every 1 s (defaults
# 60 s and 30 s), priorities recomputed every minute, KillWait 5 s so cancels end quickly.
# CR_Core_Memory makes --mem a limit that OverMemoryKill enforces; DefMemPerCPU=100 keeps a
# job without --mem from taking a whole node's memory. AccountingStoreFlags=job_comment
# lets sacct return the run id the backend puts in --comment. MaxJobCount holds
# bench/slurm_load.py's 10,000 queued jobs beside those ended within MinJobAge (300 s).
slurm_conf() {
  cat <<EOF
ClusterName=$cluster
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
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
MaxJobCount=50000
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
NodeName=n[1-3] NodeHostname=$host NodeAddr=127.0.0.1 Port=[$node_ports] CPUs=8 RealMemory=4000 Gres=gpu:4 State=UNKNOWN
PartitionName=gpu Nodes=n[1-3] Default=YES MaxTime=INFINITE State=UP
PartitionName=debug Nodes=n[1-3] MaxTime=30 State=UP PriorityTier=2
Include $dir/etc/private-data.conf
EOF
}

gres_conf() {
  cat <<EOF
AutoDetect=off
NodeName=n[1-3] Name=gpu File=$dir/fakedev/nvidia[0-3]
EOF
}

# PrivateData from SLURM_PRIVATE_DATA (unset: every user sees every job)
private_data_conf() {
  if [ -n "${SLURM_PRIVATE_DATA:-}" ]; then
    echo "PrivateData=$SLURM_PRIVATE_DATA"
  else
    echo "# PrivateData unset: every user sees every job (SLURM_PRIVATE_DATA sets it)"
  fi
}

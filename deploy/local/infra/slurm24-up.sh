#!/usr/bin/env bash
# Start a real Slurm 24.11 beside slurm-up.sh's 22.05, for recording its JSON and testing the
# parsers against it: Debian 13 (trixie) in a debootstrap chroot with its own munge (key and
# socket), its own MariaDB (port 3317, the chroot's socket), slurmdbd, slurmctld and three
# slurmd "nodes" n1..n3, the same layout as slurm-up.sh: 4 fake GPUs each (GRES device files
# are symlinks to /dev/null), partitions gpu (default) and debug, accounts research (fairshare
# 70) and prod (30) with users alice and bob (the host's uids), QOS normal/high/low with the
# same limits, and the same slurm.conf (slurm-conf.sh renders both).
# Run as root on the host (Debian 12 here), no systemd. Idempotent: what already runs is left.
#
# Jobs run in the chroot, so what they need of the host is bind-mounted at the same path:
# $INFRA_DIR/shared (read-write: the tests' and the backend's output_dir for job logs lives
# there) and, read-only, the observer's Python (the directory holding its virtual environment's
# project, the code it imports, the interpreter's binary, standard library and libpython), so a
# probe job runs `observer probe` as it does on a 22.05 node; the chroot installs the libraries
# that interpreter's modules link (libffi8).
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
#   OBSERVER_PYTHON  the observer's Python to mount (default: the repository's .venv/bin/python)
#   SLURM_PRIVATE_DATA  as slurm-up.sh's (etc/private-data.conf, applied without a restart)
#
# A configuration change is made holding $D/tests.lock, the lock the tests take for the cluster
# (TESTS_LOCK_HELD=1: the caller holds it already).
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
  if findmnt -rn -o TARGET | grep -q "^$R/"; then
    echo "$R has mounts: run slurm24-down.sh first" >&2
    exit 1
  fi
  echo "debootstrap trixie into $R"
  rm -rf --one-file-system "$R"
  debootstrap --variant=minbase trixie "$R" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >"$D/debootstrap.log"
  touch "$D/.debootstrapped"
fi
# the packages' scripts, slurmd and the job accounting read /proc; hwloc reads /sys
mountpoint -q "$R/proc" || mount -t proc proc "$R/proc"
mountpoint -q "$R/sys" || mount -t sysfs sysfs "$R/sys"
# Slurm, munge and MariaDB, and libffi8 for the mounted Python's ctypes (probes load libcuda)
packages=(munge slurmctld slurmd slurm-client slurmdbd mariadb-server libffi8)
missing=()
for p in "${packages[@]}"; do chroot "$R" dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  # no daemon starts from a package's postinst: this script starts them
  printf '#!/bin/sh\nexit 101\n' >"$R/usr/sbin/policy-rc.d"
  chmod +x "$R/usr/sbin/policy-rc.d"
  echo "installing ${missing[*]} in the chroot"
  chroot "$R" env DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update -qq &&
    apt-get install -y -qq --no-install-recommends "$@"' sh "${missing[@]}" >"$D/apt.log" 2>&1 ||
    { tail -20 "$D/apt.log" >&2; exit 1; }
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
  # TESTS_LOCK_HELD: the caller (the tests' harness) holds it already, and would wait forever
  if [ -z "${TESTS_LOCK_HELD:-}" ]; then
    exec 9>"$D/tests.lock"
    flock 9
  fi
  locked=1
}
write_if_changed() { # write $1 from stdin only when it differs; returns 1 when unchanged
  local new
  new=$(cat)
  if [ -f "$1" ] && [ "$(cat "$1")" = "$new" ]; then return 1; fi
  lock_tests
  printf '%s\n' "$new" >"$1"
}

# ---- what jobs need of the host, at the same path in the chroot
share() { # $1: a host path; $2: ro or rw. A file is mounted on an empty file.
  local target=$R$1
  mountpoint -q "$target" 2>/dev/null && return 0
  if [ -d "$1" ]; then mkdir -p "$target"; else mkdir -p "$(dirname "$target")" && touch "$target"; fi
  mount --bind -o "$2" "$1" "$target"
}
mkdir -p "$root/shared"
share "$root/shared" rw
repo=$(cd "$(dirname "$0")/../../.." && pwd)
python=${OBSERVER_PYTHON:-$repo/.venv/bin/python}
if [ -x "$python" ]; then
  # the venv's project, the code its `observer` imports (an editable install may point at
  # another checkout), each link to the interpreter, the standard library and libpython; a
  # path inside another one listed is mounted with it. Never the project's parent: a clone
  # under /tmp would mount the host's /tmp over the chroot's own.
  paths=$(cd / && "$python" -c '
import os, sys, sysconfig, observer
code = os.path.dirname(os.path.dirname(observer.__file__))
paths = [os.path.dirname(sys.prefix), code, sysconfig.get_path("stdlib")]
link = os.path.join(sys.prefix, "bin", "python3")
while os.path.islink(link):
    link = os.path.join(os.path.dirname(link), os.readlink(link))
    paths.append(link)
if sysconfig.get_config_var("Py_ENABLE_SHARED"):
    paths.append(os.path.join(sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("INSTSONAME")))
paths = sorted({os.path.normpath(p) for p in paths if os.path.exists(p)} - {"/"})
print("\n".join(p for p in paths if not any(p.startswith(q + "/") for q in paths)))')
  while read -r path; do share "$path" ro; done <<<"$paths"
else
  echo "no observer Python at $python (OBSERVER_PYTHON): probe jobs cannot run on this cluster" >&2
fi

# ---- the clients, run in the chroot; as root, or as the user SLURM24_RUN_AS names (chroot
# needs root: the isolation probe's run_as_command here is `env SLURM24_RUN_AS={user}`).
# SLURM_CONF is a path on the host, as for 22.05: the chroot's own file ($R$conf), or one under
# $root/shared (a test's variant); any other (22.05's, or none) means the chroot's.
for cmd in squeue sinfo scontrol sbatch sacct sacctmgr scancel srun sdiag; do
  write_if_changed "$D/bin/$cmd" <<EOF || true
#!/bin/sh
case "\${SLURM_CONF:-}" in
  $R/*) conf=\${SLURM_CONF#$R} ;;
  $root/shared/*) conf=\$SLURM_CONF ;;
  *) conf=$conf ;;
esac
exec chroot \${SLURM24_RUN_AS:+--userspec=\$SLURM24_RUN_AS:\$SLURM24_RUN_AS} $R \\
  /bin/sh -c 'cd /tmp && exec "\$0" "\$@"' env SLURM_CONF="\$conf" $cmd "\$@"
EOF
  chmod +x "$D/bin/$cmd"
done

# ---- alice and bob with the host's uids: the isolation probe runs as them on the host, and
# munge vouches for the uid, which the chroot's slurmctld names from its own /etc/passwd
for user in alice bob; do
  id "$user" >/dev/null 2>&1 || useradd -m "$user"
  uid=$(id -u "$user")
  if in_root id "$user" >/dev/null 2>&1 && [ "$(in_root id -u "$user")" != "$uid" ]; then
    in_root userdel -r "$user" 2>/dev/null # made again below: another may hold the uid now
  fi
done
for user in alice bob; do
  in_root id "$user" >/dev/null 2>&1 || in_root useradd -m -u "$(id -u "$user")" "$user"
done

# ---- the host's names (debootstrap writes no /etc/hosts): without them munged cannot name its
# origin, and slurmctld looks up the null address it gets instead in DNS at every request,
# some of which wait seconds
cmp -s /etc/hosts "$R/etc/hosts" || cp /etc/hosts "$R/etc/hosts"

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

# the configuration of slurm-up.sh's cluster, on this one's name, ports and paths
cluster=observer24 dir=$S node_ports=17101-17103 db_name=observer_slurm24_acct
# shellcheck source=deploy/local/infra/slurm-conf.sh
source "$(dirname "$0")/slurm-conf.sh"
private_changed=0
write_if_changed "$R$S/etc/private-data.conf" <<<"$(private_data_conf)" && private_changed=1
write_if_changed "$R$S/etc/private-data-dbd.conf" <<<"$(private_data_conf)" && private_changed=1
chmod 600 "$R$S/etc/private-data-dbd.conf"
changed=0
write_if_changed "$R$S/etc/slurmdbd.conf" <<<"$(slurmdbd_conf)" && changed=1
chmod 600 "$R$S/etc/slurmdbd.conf"
write_if_changed "$R$conf" <<<"$(slurm_conf)" && changed=1
write_if_changed "$R$S/etc/gres.conf" <<<"$(gres_conf)" && changed=1
# 24.11's slurmd loads a cgroup plugin unless told not to, and the chroot mounts no cgroups
write_if_changed "$R$S/etc/cgroup.conf" <<<"CgroupPlugin=disabled" && changed=1

daemons=(slurmd-n1 slurmd-n2 slurmd-n3 slurmctld slurmdbd)
if [ "$changed" = 1 ]; then
  for p in "${daemons[@]}"; do alive "$S/run/$p.pid" && kill "$(cat "$R$S/run/$p.pid")"; done
  for p in "${daemons[@]}"; do while alive "$S/run/$p.pid"; do sleep 0.1; done; done
elif [ "$private_changed" = 1 ]; then
  if alive "$S/run/slurmctld.pid"; then "$D/bin/scontrol" reconfigure; fi
  if alive "$S/run/slurmdbd.pid"; then kill -HUP "$(cat "$R$S/run/slurmdbd.pid")"; fi
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

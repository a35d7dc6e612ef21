#!/usr/bin/env bash
# Stop, by PID file, the Slurm that slurm-up.sh started, and MariaDB/munge only if slurm-up.sh
# started them. State and accounting stay, so slurm-up.sh brings the same cluster back;
# `rm -rf "$INFRA_DIR/slurm"` as well to start from nothing.
set -uo pipefail

D=${INFRA_DIR:-/tmp/observer-infra}/slurm
export SLURM_CONF=$D/etc/slurm.conf

alive() { local pid; pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
stop() { # pid file; waits up to 10 s for the process to exit
  alive "$1" || return 0
  kill "$(cat "$1")"
  for _ in $(seq 1 100); do alive "$1" || return 0; sleep 0.1; done
  echo "still running: $1" >&2
}

if alive "$D/run/slurmctld.pid"; then
  timeout 10 scancel --full --state=PENDING,RUNNING --user=root 2>/dev/null || true
fi
for p in slurmd-n1 slurmd-n2 slurmd-n3 slurmctld slurmdbd; do stop "$D/run/$p.pid"; done
[ -e "$D/run/started-mariadb" ] && stop /run/mysqld/mysqld.pid
[ -e "$D/run/started-munge" ] && stop /run/munge/munged.pid
rm -f "$D/run/started-mariadb" "$D/run/started-munge"
echo "slurm down"

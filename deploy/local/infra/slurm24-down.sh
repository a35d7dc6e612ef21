#!/usr/bin/env bash
# Stop, by PID file, the Slurm 24.11 that slurm24-up.sh started in its chroot, with the
# chroot's MariaDB and munge, and unmount what it mounted in the chroot (/proc, /sys, the host's
# paths it shares). The chroot, the state and the accounting stay, so slurm24-up.sh brings the
# same cluster back in seconds;
# `rm -rf --one-file-system "$INFRA_DIR/slurm24"` after this script to start from nothing.
set -uo pipefail

D=${INFRA_DIR:-/tmp/observer-infra}/slurm24
R=$D/root
S=/srv/slurm

alive() { local pid; pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
stop() { # pid file; waits up to 10 s for the process to exit
  alive "$1" || return 0
  kill "$(cat "$1")"
  for _ in $(seq 1 100); do alive "$1" || return 0; sleep 0.1; done
  echo "still running: $1" >&2
}

if alive "$R$S/run/slurmctld.pid"; then
  timeout 10 "$D/bin/scancel" --full --state=PENDING,RUNNING --user=root 2>/dev/null || true
fi
for p in slurmd-n1 slurmd-n2 slurmd-n3 slurmctld slurmdbd; do stop "$R$S/run/$p.pid"; done
# mariadbd-safe restarts a mariadbd that dies: the init script stops both
[ -x "$R/etc/init.d/mariadb" ] && mountpoint -q "$R/proc" && chroot "$R" /etc/init.d/mariadb stop >/dev/null
stop "$R/run/munge/munged.pid"
# /proc, /sys and the host paths slurm24-up.sh shares, deepest first; again while any is left
# (a path shared later may have covered one shared earlier beneath it)
for _ in 1 2 3; do
  findmnt -rn -o TARGET | grep "^$R/" | sort -r | while read -r m; do umount "$m" 2>/dev/null; done
done
findmnt -rn -o TARGET | grep "^$R/" >&2 && echo "still mounted: the paths above" >&2
echo "slurm 24.11 down"

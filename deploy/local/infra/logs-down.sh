#!/usr/bin/env bash
# Stop, by PID file, the rsyslogd that logs-up.sh started (resuming it first if a test left
# it stopped). Files stay; `rm -rf "$LOGS_DIR"` as well to start from nothing.
set -uo pipefail

D=${LOGS_DIR:-/tmp/observer-logs}
pidfile=$D/rsyslogd.pid

# running and not a zombie (nothing may reap a daemon's exit in a container)
alive() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null) && [ -r "/proc/$pid/stat" ] &&
    [ "$(sed 's/.*) //' "/proc/$pid/stat" | cut -c1)" != Z ]
}
if alive; then
  pid=$(cat "$pidfile")
  kill -CONT "$pid"
  kill "$pid"
  for _ in $(seq 1 100); do alive || break; sleep 0.1; done
  alive && echo "still running: rsyslogd $pid" >&2
fi
echo "log pipeline down"

#!/usr/bin/env bash
# Stop, by PID file, the Prometheus that prometheus-up.sh started. Data and target files stay;
# `rm -rf "$PROM_DIR"` as well to start from nothing.
set -uo pipefail

D=${PROM_DIR:-/tmp/observer-prometheus}
pidfile=$D/run/prometheus.pid

alive() { local pid; pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
if alive "$pidfile"; then
  pid=$(cat "$pidfile")
  kill -CONT "$pid" # a paused process would never act on the SIGTERM
  kill "$pid"
  for _ in $(seq 1 100); do alive "$pidfile" || break; sleep 0.1; done
  alive "$pidfile" && { echo "prometheus still running: pid $pid" >&2; exit 1; }
fi
rm -f "$pidfile"
echo "prometheus down"

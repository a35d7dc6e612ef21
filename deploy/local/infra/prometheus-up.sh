#!/usr/bin/env bash
# Start a real Prometheus 2.42 on 127.0.0.1 for the monitoring-lag checks and their tests:
# scrape interval 1 s, targets from file_sd files that anyone may drop into $PROM_DIR/targets
# at run time (re-read every second). Debian 12, no systemd. Idempotent: a running Prometheus
# keeps running and picks up a changed configuration (SIGHUP).
#
# Usage: deploy/local/infra/prometheus-up.sh        prints the URL last
#        deploy/local/infra/prometheus-down.sh      stops what this script started
# Environment:
#   PROM_DIR              state root: config, data, pid, log (default /tmp/observer-prometheus)
#   PROM_PORT             listen port on 127.0.0.1 (default 9490, clear of a stock 9090)
#   PROM_SCRAPE_INTERVAL  default 1s;  PROM_SCRAPE_TIMEOUT default 500ms (a slow exporter
#                         trips it quickly; must not exceed the interval)
#   PROM_TARGETS          optional host:port list (comma-separated), written to
#                         $PROM_DIR/targets/env.json; tests write their own files instead:
#                         [{"targets": ["127.0.0.1:8000"], "labels": {"job": "mine"}}]
#   PROMETHEUS_BIN        a prometheus binary to use instead of looking for one
#
# The binary comes from PROMETHEUS_BIN, <repo>/.tools/bin, PATH, or else is unpacked from
# Debian's prometheus .deb into <repo>/.tools/bin: unpacking runs no maintainer scripts, so
# no packaged service starts on :9090 and nothing outside the repository changes.
set -euo pipefail

repo=$(cd "$(dirname "$0")/../../.." && pwd)
D=${PROM_DIR:-/tmp/observer-prometheus}
port=${PROM_PORT:-9490}
interval=${PROM_SCRAPE_INTERVAL:-1s}
scrape_timeout=${PROM_SCRAPE_TIMEOUT:-500ms}
url=http://127.0.0.1:$port

mkdir -p "$D"/{data,targets,run,log}

find_binary() {
  if [ -n "${PROMETHEUS_BIN:-}" ]; then echo "$PROMETHEUS_BIN"; return; fi
  if [ -x "$repo/.tools/bin/prometheus" ]; then echo "$repo/.tools/bin/prometheus"; return; fi
  if command -v prometheus >/dev/null; then command -v prometheus; return; fi
  local dl=$repo/.tools/dl
  mkdir -p "$dl" "$repo/.tools/bin"
  if ! (cd "$dl" && apt-get download prometheus >/dev/null 2>&1); then
    apt-get update -qq
    (cd "$dl" && apt-get download prometheus >/dev/null)
  fi
  local deb
  deb=$(ls "$dl"/prometheus_*.deb | head -1)
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dl" ./usr/bin/prometheus
  cp "$dl/usr/bin/prometheus" "$repo/.tools/bin/prometheus"
  echo "$repo/.tools/bin/prometheus"
}

alive() { local pid; pid=$(cat "$1" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }
# write $1 from stdin only when it differs; returns 1 when unchanged
write_if_changed() {
  local new
  new=$(cat)
  if [ -f "$1" ] && [ "$(cat "$1")" = "$new" ]; then return 1; fi
  printf '%s\n' "$new" >"$1"
}
ready() { (exec 3<>/dev/tcp/127.0.0.1/"$port" && printf 'GET /-/ready HTTP/1.0\r\n\r\n' >&3 && head -1 <&3 | grep -q ' 200 ') 2>/dev/null; }

if [ -n "${PROM_TARGETS:-}" ]; then
  list=$(printf '"%s",' ${PROM_TARGETS//,/ })
  echo "[{\"targets\": [${list%,}]}]" >"$D/targets/env.json.tmp"
  mv "$D/targets/env.json.tmp" "$D/targets/env.json" # a rename: file_sd never reads half a file
fi

changed=0
write_if_changed "$D/prometheus.yml" <<EOF && changed=1
global: {scrape_interval: $interval, scrape_timeout: $scrape_timeout, evaluation_interval: $interval}
scrape_configs:
  - job_name: observer
    file_sd_configs: [{files: ['$D/targets/*.json'], refresh_interval: 1s}]
EOF

pidfile=$D/run/prometheus.pid
args=(--config.file="$D/prometheus.yml" --storage.tsdb.path="$D/data"
  --web.listen-address="127.0.0.1:$port")
if alive "$pidfile" && [ "$(cat "$D/run/args" 2>/dev/null)" != "${args[*]}" ]; then
  # another port: the listen address cannot be reloaded, only restarted
  pid=$(cat "$pidfile")
  kill -CONT "$pid" && kill "$pid"
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
fi
if alive "$pidfile"; then
  # a test that paused it (SIGSTOP) and died before resuming it must not leave it frozen
  kill -CONT "$(cat "$pidfile")"
  [ "$changed" = 1 ] && kill -HUP "$(cat "$pidfile")"
else
  bin=$(find_binary)
  nohup "$bin" "${args[@]}" >"$D/log/prometheus.log" 2>&1 &
  echo $! >"$pidfile"
  echo "${args[*]}" >"$D/run/args"
fi
for _ in $(seq 1 150); do
  ready && break
  if ! alive "$pidfile"; then
    echo "prometheus exited at start; $D/log/prometheus.log says:" >&2
    tail -5 "$D/log/prometheus.log" >&2
    exit 1
  fi
  sleep 0.1
done
ready || { echo "prometheus on $url did not become ready" >&2; exit 1; }
echo "$url"

#!/usr/bin/env bash
# Start a real lossy log pipeline on 127.0.0.1 for the log-loss tests and for trying the
# log canary by hand: rsyslog tails $LOGS_DIR/app.log (imfile, inotify, reopenOnTruncate),
# ships it over TCP (omfwd -> imtcp on $LOGS_PORT, same daemon) into $LOGS_DIR/collected.log,
# and a logrotate config rotates app.log with copytruncate. Each collected line starts with
# the collector's receive time (RFC 3339, microseconds): the delivery time of the line.
# Debian 12, run as root, no systemd. Idempotent: a running pipeline with the same
# configuration is left as it is; a changed configuration restarts rsyslogd.
#
# Usage: deploy/local/infra/logs-up.sh            then: deploy/local/infra/logs-down.sh
# Environment:
#   LOGS_DIR           state root (default /tmp/observer-logs)
#   LOGS_PORT          TCP port between shipper and collector (default 10515)
#   LOGS_ROTATE_SIZE   logrotate's size threshold for app.log (default 1M)
#
# Deterministic loss (what the tests do): kill -STOP "$(cat $LOGS_DIR/rsyslogd.pid)", append
# to app.log, rotate (the logrotate line printed last), kill -CONT: the lines appended while
# the shipper was stopped are copied into app.log.1, truncated away, and never shipped.
# Rotation by size (the log-burst tests): the same logrotate line without -f rotates app.log
# only once it is past LOGS_ROTATE_SIZE, as logrotate's cron job would.
set -euo pipefail

D=${LOGS_DIR:-/tmp/observer-logs}
port=${LOGS_PORT:-10515}
rotate_size=${LOGS_ROTATE_SIZE:-1M}
pidfile=$D/rsyslogd.pid
T0=$(date +%s%N)
elapsed() {
  local ms=$((($(date +%s%N) - T0) / 1000000))
  printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

if ! command -v rsyslogd >/dev/null || ! command -v logrotate >/dev/null; then
  echo "installing rsyslog and logrotate"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends rsyslog logrotate >/dev/null
fi

# logrotate skips a directory that others can write to
mkdir -p "$D/work"
chmod 755 "$D"

# running and not a zombie (nothing may reap a daemon's exit in a container)
alive() {
  local pid
  pid=$(cat "$pidfile" 2>/dev/null) && [ -r "/proc/$pid/stat" ] &&
    [ "$(sed 's/.*) //' "/proc/$pid/stat" | cut -c1)" != Z ]
}
wait_tcp() {
  for _ in $(seq 1 150); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.1; done
  echo "port $1 did not open" >&2
  return 1
}
# write $1 from stdin only when it differs; returns 1 when unchanged
write_if_changed() {
  local new
  new=$(cat)
  if [ -f "$1" ] && [ "$(cat "$1")" = "$new" ]; then return 1; fi
  printf '%s\n' "$new" >"$1"
}

changed=0
write_if_changed "$D/rsyslog.conf" <<CONF && changed=1
global(workDirectory="$D/work")
module(load="imfile" mode="inotify")
module(load="imtcp")
template(name="collected" type="string" string="%timegenerated:::date-rfc3339%%msg:::sp-if-no-1st-sp%%msg:::drop-last-lf%\n")
input(type="imtcp" port="$port" address="127.0.0.1" ruleset="store")
input(type="imfile" file="$D/app.log" tag="app" ruleset="ship" reopenOnTruncate="on")
ruleset(name="ship") {
  action(type="omfwd" target="127.0.0.1" port="$port" protocol="tcp" template="RSYSLOG_ForwardFormat")
}
ruleset(name="store") { action(type="omfile" file="$D/collected.log" template="collected") }
CONF
write_if_changed "$D/logrotate.conf" <<CONF && changed=1
$D/app.log {
  copytruncate
  rotate 50
  missingok
  nocompress
  size $rotate_size
}
CONF
chmod 644 "$D/logrotate.conf" # logrotate ignores a configuration others can write
touch "$D/app.log" "$D/collected.log"

if [ "$changed" = 1 ] && alive; then
  kill -CONT "$(cat "$pidfile")" # a stopped rsyslogd would not act on SIGTERM
  kill "$(cat "$pidfile")"
  while alive; do sleep 0.1; done
fi
if ! alive; then
  rm -f "$pidfile" # left by a killed rsyslogd: a new one would refuse to start
  rsyslogd -f "$D/rsyslog.conf" -i "$pidfile"
fi
wait_tcp "$port"

echo "log pipeline up in $(elapsed): $D/app.log -> tcp 127.0.0.1:$port -> $D/collected.log"
echo "rsyslogd pid file: $pidfile"
echo "rotate: logrotate -s $D/logrotate.state -f $D/logrotate.conf (without -f: past $rotate_size only)"

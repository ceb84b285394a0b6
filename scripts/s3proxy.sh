#!/usr/bin/env bash
# Private S3-compatible object store for tests and CI: s3proxy (Apache-2.0) on its local
# filesystem backend. Its jars come from Maven Central (scripts/s3proxy/pom.xml); Java and
# Maven are installed with apt if missing. No Docker, no prebuilt binary download.
# Usage: scripts/s3proxy.sh up|down|url
#   up    fetch the jars once into $INFRA_DIR/s3proxy/libs, start the server on
#         $S3PROXY_HOST:$S3PROXY_PORT (127.0.0.1:19400) with its objects under
#         $INFRA_DIR/s3proxy/data, and wait up to $S3PROXY_START_TIMEOUT seconds (default 120)
#   down  stop the server started by `up` (objects are kept)
#   url   print the endpoint for TEST_S3_ENDPOINT
#   libs  only fetch the jars (and Java, Maven), printing their folder: for a server started
#         later where Maven Central cannot be reached (S3PROXY_LIBS)
# Access key and secret: $S3PROXY_ACCESS_KEY_ID / $S3PROXY_SECRET_ACCESS_KEY, by default the
# fixed test pair in test/helpers/s3.ts (a private server on loopback, for tests only).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${S3PROXY_DIR:-${INFRA_DIR:-$REPO/.infra}/s3proxy}"
HOST="${S3PROXY_HOST:-127.0.0.1}"
PORT="${S3PROXY_PORT:-19400}"
POM="$REPO/scripts/s3proxy/pom.xml"
LIBS="${S3PROXY_LIBS:-${INFRA_DIR:-$REPO/.infra}/s3proxy/libs}"
DATA="$DIR/data"
PIDFILE="$DIR/s3proxy.pid"
OUT="$DIR/s3proxy.out"
ACCESS_KEY_ID="${S3PROXY_ACCESS_KEY_ID:-botplatform-test}"
SECRET_ACCESS_KEY="${S3PROXY_SECRET_ACCESS_KEY:-botplatform-test-secret}"
START_TIMEOUT="${S3PROXY_START_TIMEOUT:-120}"
[[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || { echo "s3proxy: S3PROXY_START_TIMEOUT must be a number of seconds" >&2; exit 2; }
read -r -a JAVA_OPTS <<<"${S3PROXY_JAVA_OPTS:--Xms32m -Xmx256m -XX:+UseSerialGC}"
JAVA=(java "${JAVA_OPTS[@]}" -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
  -Dlogback.configurationFile="$DIR/logback.xml" -cp "$LIBS/*")

port_open() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }
pid_alive() {
  local s; s="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [[ -n "$s" && "$s" != *Z* ]] && grep -qa org.gaul.s3proxy.Main "/proc/$1/cmdline" 2>/dev/null
}
alive() { [[ -f "$PIDFILE" ]] && pid_alive "$(cat "$PIDFILE")"; }
libs_ok() { [[ "$(cat "$LIBS/.pom.sha256" 2>/dev/null)" == "$(sha256sum <"$POM")" ]]; }

install() {
  local pkgs=()
  command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
  libs_ok || command -v mvn >/dev/null || pkgs+=(maven)
  ((${#pkgs[@]})) || return 0
  echo "s3proxy: installing ${pkgs[*]} (apt)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
}

fetch_libs() {
  libs_ok && return
  echo "s3proxy: fetching jars from Maven Central into $LIBS"
  mkdir -p "$(dirname "$LIBS")"
  rm -rf "$LIBS" "$LIBS.tmp"
  mvn -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$LIBS.tmp" -DincludeScope=runtime \
    >"$DIR/mvn.log" 2>&1 || { tail -n 40 "$DIR/mvn.log" >&2; exit 1; }
  sha256sum <"$POM" >"$LIBS.tmp/.pom.sha256"
  mv "$LIBS.tmp" "$LIBS"
}

write_config() {
  umask 077
  cat >"$DIR/s3proxy.conf" <<CONF
s3proxy.endpoint=http://$HOST:$PORT
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=$ACCESS_KEY_ID
s3proxy.credential=$SECRET_ACCESS_KEY
jclouds.provider=filesystem-nio2
jclouds.filesystem.basedir=$DATA
CONF
  cat >"$DIR/logback.xml" <<CONF
<configuration>
  <appender name="out" class="ch.qos.logback.core.ConsoleAppender">
    <encoder><pattern>%d{HH:mm:ss.SSS} %-5level %logger{0} - %msg%n</pattern></encoder>
  </appender>
  <root level="WARN"><appender-ref ref="out"/></root>
</configuration>
CONF
}

stop_pid() { # SIGTERM, up to 20 s, then SIGKILL
  kill "$1" 2>/dev/null || true
  for _ in $(seq 40); do pid_alive "$1" || return 0; sleep 0.5; done
  kill -9 "$1" 2>/dev/null || true
  for _ in $(seq 20); do pid_alive "$1" || return 0; sleep 0.5; done
}

wait_ready() { # $1 = pid
  for _ in $(seq $((START_TIMEOUT * 4))); do
    port_open && return 0
    pid_alive "$1" || return 1
    sleep 0.25
  done
  return 1
}

up() {
  install
  mkdir -p "$DIR" "$DATA"
  fetch_libs
  write_config
  if alive && wait_ready "$(cat "$PIDFILE")"; then
    echo "s3proxy: already running (pid $(cat "$PIDFILE"), $HOST:$PORT)"
    return
  fi
  if alive; then stop_pid "$(cat "$PIDFILE")"; fi
  rm -f "$PIDFILE"
  if port_open; then
    # Another checkout's s3proxy (same script, same test credentials) serves as well as ours.
    if [[ "$(head -c 200 < <(exec 3<>"/dev/tcp/$HOST/$PORT"; printf 'GET / HTTP/1.0\r\n\r\n' >&3; cat <&3) 2>/dev/null)" == *x-amz-request-id* ]]; then
      echo "s3proxy: an S3 server already answers on $HOST:$PORT (started from another checkout); using it"
      return
    fi
    echo "s3proxy: $HOST:$PORT is already taken by another process" >&2; exit 1
  fi
  local t0=$SECONDS
  # 9>&-: the server must not inherit the lock (an inherited descriptor would hold it for as
  # long as the server runs, and every later `up` would wait on it).
  setsid "${JAVA[@]}" org.gaul.s3proxy.Main --properties "$DIR/s3proxy.conf" </dev/null >"$OUT" 2>&1 9>&- &
  echo $! >"$PIDFILE"
  if ! wait_ready "$(cat "$PIDFILE")"; then
    echo "s3proxy: did not come up within $START_TIMEOUT s; output follows" >&2
    tail -n 60 "$OUT" >&2 || true
    stop_pid "$(cat "$PIDFILE")"
    rm -f "$PIDFILE"
    exit 1
  fi
  echo "s3proxy: up (s3proxy $(cd "$LIBS" && ls s3proxy-*.jar | sed 's/^s3proxy-//; s/\.jar$//'), pid $(cat "$PIDFILE"), $HOST:$PORT, started in $((SECONDS - t0)) s)"
}

down() {
  if ! alive; then echo "s3proxy: not running"; rm -f "$PIDFILE"; return; fi
  stop_pid "$(cat "$PIDFILE")"
  rm -f "$PIDFILE"
  echo "s3proxy: stopped"
}

url() { echo "http://$HOST:$PORT"; }

# One at a time: test files running in parallel may each ask for the server (and the jars).
lock() { mkdir -p "$DIR"; exec 9>"$DIR/.lock"; flock 9; }

case "${1:-}" in
  up) lock; up ;;
  down) down ;;
  url) url ;;
  libs) lock; install >&2; fetch_libs >&2; echo "$LIBS" ;;
  *) echo "usage: $0 up|down|url|libs" >&2; exit 2 ;;
esac

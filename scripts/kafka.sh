#!/usr/bin/env bash
# Private single-node Apache Kafka broker (KRaft, no ZooKeeper) for tests and CI. Its jars
# come from Maven Central (scripts/kafka/pom.xml); Java and Maven are installed with apt if missing.
# Usage: scripts/kafka.sh up [--reformat]|down|url
#   up    fetch the jars once into $INFRA_DIR/kafka/libs, format $INFRA_DIR/kafka/data if it
#         has never been formatted, start the broker on 127.0.0.1:$KAFKA_PORT (controller on
#         $KAFKA_CONTROLLER_PORT) and wait up to $KAFKA_START_TIMEOUT seconds (default 180)
#         for it to serve. Existing data (topics, committed offsets) is never deleted, even
#         when the broker does not start on it, unless --reformat (or KAFKA_REFORMAT=1) is given.
#   down  stop the broker started by `up` (data is kept, so the next `up` is quick)
#   url   print the bootstrap address for TEST_KAFKA_BROKERS
#   libs  only fetch the jars (and Java, Maven), printing their folder: for a broker started
#         later where Maven Central cannot be reached (KAFKA_LIBS)
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${INFRA_DIR:-$REPO/.infra}/kafka"
PORT="${KAFKA_PORT:-19092}"
HOST="${KAFKA_HOST:-127.0.0.1}"   # another address: a multi-host test's broker host
CPORT="${KAFKA_CONTROLLER_PORT:-19093}"
POM="$REPO/scripts/kafka/pom.xml"
LIBS="${KAFKA_LIBS:-$DIR/libs}"   # KAFKA_LIBS: jars fetched already (another INFRA_DIR's)
DATA="$DIR/data"
PIDFILE="$DIR/kafka.pid"
LOG="$DIR/server.log"   # log4j output
OUT="$DIR/kafka.out"    # JVM stdout/stderr
CLUSTER_ID="P8kF9uweSrmuhZHMCZYCZw"   # any valid base64url UUID; fixed so re-formats match
START_TIMEOUT="${KAFKA_START_TIMEOUT:-180}"
[[ "$START_TIMEOUT" =~ ^[0-9]+$ ]] || { echo "kafka: KAFKA_START_TIMEOUT must be a number of seconds" >&2; exit 2; }
REFORMAT="${KAFKA_REFORMAT:-0}"
read -r -a JAVA_OPTS <<<"${KAFKA_JAVA_OPTS:--Xms64m -Xmx512m -XX:+UseG1GC -XX:MaxGCPauseMillis=20}"
JAVA=(java "${JAVA_OPTS[@]}" -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true
  -Dlog4j.configuration="file:$DIR/log4j.properties" -cp "$LIBS/*")

port_open() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }
# Our broker, running and not a zombie (a killed JVM can look alive for a moment; callers poll).
pid_alive() {
  local s; s="$(ps -o stat= -p "$1" 2>/dev/null || true)"
  [[ -n "$s" && "$s" != *Z* ]] && grep -qa kafka.Kafka "/proc/$1/cmdline" 2>/dev/null
}
alive() { [[ -f "$PIDFILE" ]] && pid_alive "$(cat "$PIDFILE")"; }
libs_ok() { [[ "$(cat "$LIBS/.pom.sha256" 2>/dev/null)" == "$(sha256sum <"$POM")" ]]; }
version() { local j; j="$(cd "$LIBS" && ls kafka_2.13-*.jar)"; j="${j#kafka_2.13-}"; echo "${j%.jar}"; }

install() {
  local pkgs=()
  command -v java >/dev/null || pkgs+=(openjdk-17-jre-headless)
  libs_ok || command -v mvn >/dev/null || pkgs+=(maven)
  ((${#pkgs[@]})) || return 0
  echo "kafka: installing ${pkgs[*]} (apt)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${pkgs[@]}"
}

fetch_libs() {
  libs_ok && return
  echo "kafka: fetching jars from Maven Central into $LIBS"
  rm -rf "$LIBS" "$LIBS.tmp"
  mvn -B -f "$POM" dependency:copy-dependencies -DoutputDirectory="$LIBS.tmp" -DincludeScope=runtime \
    >"$DIR/mvn.log" 2>&1 || { tail -n 40 "$DIR/mvn.log" >&2; exit 1; }
  sha256sum <"$POM" >"$LIBS.tmp/.pom.sha256"
  mv "$LIBS.tmp" "$LIBS"
}

write_config() {
  cat >"$DIR/server.properties" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://$HOST:$PORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://$HOST:$PORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$DATA
num.partitions=4
default.replication.factor=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=true
delete.topic.enable=true
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1
log.cleaner.dedupe.buffer.size=8388608
# a restart after a kill waits for the dead broker's session to expire (default 9 s)
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
log.retention.hours=24
EOF
  cat >"$DIR/log4j.properties" <<EOF
log4j.rootLogger=WARN, file
log4j.logger.kafka.server.KafkaRaftServer=INFO
log4j.appender.file=org.apache.log4j.RollingFileAppender
log4j.appender.file.File=$LOG
log4j.appender.file.MaxFileSize=10MB
log4j.appender.file.MaxBackupIndex=2
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
EOF
}

# Formatted: by this script (.formatted) or by Kafka's storage tool (meta.properties).
formatted() { [[ -f "$DATA/.formatted" || -f "$DATA/meta.properties" ]]; }

# Formats an empty (or absent) data dir. Deletes existing data only when asked to (--reformat).
format() {
  if [[ -d "$DATA" && -n "$(ls -A "$DATA" 2>/dev/null)" ]]; then
    if [[ "$REFORMAT" != 1 ]]; then
      echo "kafka: $DATA holds data but is not marked as formatted; not touching it." >&2
      echo "kafka: to delete it (topics and committed offsets) and format anew: $0 up --reformat" >&2
      exit 1
    fi
    echo "kafka: --reformat: deleting $DATA (topics and committed offsets)"
    rm -rf "$DATA"
  fi
  echo "kafka: formatting $DATA"
  "${JAVA[@]}" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$DIR/server.properties" \
    >"$DIR/format.log" 2>&1 || { cat "$DIR/format.log" >&2; exit 1; }
  touch "$DATA/.formatted"
}

stop_pid() { # SIGTERM, up to 30 s, then SIGKILL; returns once the process is gone
  kill "$1" 2>/dev/null || true
  for _ in $(seq 60); do pid_alive "$1" || return 0; sleep 0.5; done
  echo "kafka: pid $1 did not stop in 30 s; killing" >&2
  kill -9 "$1" 2>/dev/null || true
  for _ in $(seq 20); do pid_alive "$1" || return 0; sleep 0.5; done
}

wait_ready() { # $1 = pid; fails if it dies or is not serving within $START_TIMEOUT s
  for _ in $(seq $((START_TIMEOUT * 2))); do
    port_open && grep -qs "Kafka Server started" "$LOG" "$LOG".* && return 0
    pid_alive "$1" || return 1
    sleep 0.5
  done
  return 1
}

start() {
  if port_open; then echo "kafka: port $PORT is already taken by another process" >&2; exit 1; fi
  rm -f "$LOG" "$OUT"
  echo "kafka: starting on $HOST:$PORT"
  setsid "${JAVA[@]}" kafka.Kafka "$DIR/server.properties" </dev/null >"$OUT" 2>&1 &
  echo $! >"$PIDFILE"
  wait_ready $! && return
  stop_pid "$(cat "$PIDFILE")"
  rm -f "$PIDFILE"
  return 1
}

up() {
  install
  mkdir -p "$DIR"
  fetch_libs
  write_config
  if alive; then
    if wait_ready "$(cat "$PIDFILE")"; then
      echo "kafka: already running (pid $(cat "$PIDFILE"), port $PORT)"
      return
    fi
    stop_pid "$(cat "$PIDFILE")"
  fi
  rm -f "$PIDFILE"
  local t0=$SECONDS
  if [[ "$REFORMAT" == 1 ]] || ! formatted; then format; fi
  start || failed
  echo "kafka: up (Kafka $(version), pid $(cat "$PIDFILE"), started in $((SECONDS - t0)) s)"
}

failed() {
  echo "kafka: broker did not come up (died, or not serving within $START_TIMEOUT s); log tail follows" >&2
  tail -n 80 "$LOG" "$OUT" >&2 || true
  echo "kafka: the data in $DATA was kept. A slow recovery after an unclean stop may need longer:" >&2
  echo "kafka:   KAFKA_START_TIMEOUT=600 $0 up" >&2
  echo "kafka: to delete the data (topics and committed offsets) and start empty: $0 up --reformat" >&2
  exit 1
}

down() {
  if ! alive; then
    echo "kafka: not running"
    rm -f "$PIDFILE"
    return
  fi
  stop_pid "$(cat "$PIDFILE")"
  rm -f "$PIDFILE"
  echo "kafka: stopped"
}

url() { echo "$HOST:$PORT"; }

case "${1:-}" in
  up)
    case "${2:-}" in
      --reformat) REFORMAT=1 ;;
      "") ;;
      *) echo "usage: $0 up [--reformat]" >&2; exit 2 ;;
    esac
    up ;;
  down) down ;;
  url) url ;;
  libs) install >&2; mkdir -p "$DIR"; fetch_libs >&2; echo "$LIBS" ;;
  *) echo "usage: $0 up [--reformat]|down|url|libs" >&2; exit 2 ;;
esac

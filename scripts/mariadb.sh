#!/usr/bin/env bash
# Private MariaDB server for tests and CI (installs Debian's mariadb-server if missing).
# Usage: scripts/mariadb.sh up|down|url
#   up    install if needed, init a data dir under $INFRA_DIR/mariadb, start on $MARIADB_HOST:$MARIADB_PORT
#         (127.0.0.1:3307; another address, as a multi-host test's database host uses, also lets the
#         test user in from other hosts)
#   down  stop the server started by `up`
#   url   print the connection URL for TEST_DATABASE_URL
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${INFRA_DIR:-$REPO/.infra}/mariadb"
PORT="${MARIADB_PORT:-3307}"
HOST="${MARIADB_HOST:-127.0.0.1}"
SOCK="$DIR/mariadb.sock"
PIDFILE="$DIR/mariadb.pid"
LOG="$DIR/mariadb.log"
export PATH="$PATH:/usr/sbin:/sbin"

server_bin() { command -v mariadbd || command -v mysqld || true; }
admin() { "$(command -v mariadb-admin || command -v mysqladmin)" --no-defaults --socket="$SOCK" -uroot "$@"; }
client() { "$(command -v mariadb || command -v mysql)" --no-defaults --socket="$SOCK" -uroot "$@"; }
# Running and not a zombie (a killed server lingers as a zombie until init reaps it).
pid_alive() { local s; s="$(ps -o stat= -p "$1" 2>/dev/null || true)"; [[ -n "$s" && "$s" != *Z* ]]; }
alive() { [[ -f "$PIDFILE" ]] && pid_alive "$(cat "$PIDFILE")"; }

wait_ping() { # $1 = server pid
  for _ in $(seq 60); do
    admin --silent ping >/dev/null 2>&1 && return
    pid_alive "$1" || break
    sleep 1
  done
  echo "mariadb: not answering (waited up to 60 s); log tail follows" >&2
  tail -n 80 "$LOG" >&2
  exit 1
}

install() {
  [[ -n "$(server_bin)" ]] && return
  echo "mariadb: installing mariadb-server (apt)"
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends mariadb-server mariadb-client
}

up() {
  install
  mkdir -p "$DIR"
  if alive; then
    wait_ping "$(cat "$PIDFILE")"
    echo "mariadb: already running (pid $(cat "$PIDFILE"), port $PORT)"
    return
  fi
  rm -f "$PIDFILE" "$SOCK"
  if [[ ! -f "$DIR/data/.initialised" ]]; then
    echo "mariadb: initialising $DIR/data"
    rm -rf "$DIR/data"
    "$(command -v mariadb-install-db || command -v mysql_install_db)" --no-defaults --user=root \
      --datadir="$DIR/data" --auth-root-authentication-method=normal \
      --skip-test-db --skip-name-resolve >"$DIR/install.log" 2>&1 \
      || { cat "$DIR/install.log"; exit 1; }
    touch "$DIR/data/.initialised"
  fi
  echo "mariadb: starting on $HOST:$PORT"
  setsid "$(server_bin)" --no-defaults --user=root --datadir="$DIR/data" \
    --bind-address="$HOST" --port="$PORT" --socket="$SOCK" --pid-file="$PIDFILE" \
    --log-error="$LOG" --skip-name-resolve </dev/null >>"$LOG" 2>&1 &
  wait_ping $!
  client <<'SQL'
CREATE USER IF NOT EXISTS 'botplatform'@'127.0.0.1' IDENTIFIED BY 'botplatform';
CREATE USER IF NOT EXISTS 'botplatform'@'localhost' IDENTIFIED BY 'botplatform';
GRANT ALL PRIVILEGES ON *.* TO 'botplatform'@'127.0.0.1' WITH GRANT OPTION;
GRANT ALL PRIVILEGES ON *.* TO 'botplatform'@'localhost' WITH GRANT OPTION;
CREATE DATABASE IF NOT EXISTS botplatform;
SQL
  if [[ "$HOST" != 127.0.0.1 ]]; then
    client <<'SQL'
CREATE USER IF NOT EXISTS 'botplatform'@'%' IDENTIFIED BY 'botplatform';
GRANT ALL PRIVILEGES ON *.* TO 'botplatform'@'%' WITH GRANT OPTION;
SQL
  fi
  echo "mariadb: up ($(client -N -e 'SELECT VERSION()'), pid $(cat "$PIDFILE"))"
}

down() {
  if ! alive; then
    echo "mariadb: not running"
    rm -f "$PIDFILE"
    return
  fi
  local pid
  pid="$(cat "$PIDFILE")"
  admin shutdown >/dev/null 2>&1 || kill "$pid" 2>/dev/null || true
  for _ in $(seq 60); do
    pid_alive "$pid" || break
    sleep 0.5
  done
  if pid_alive "$pid"; then
    echo "mariadb: pid $pid did not stop in 30 s; killing" >&2
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDFILE"
  echo "mariadb: stopped"
}

url() { echo "mysql://botplatform:botplatform@$HOST:$PORT/botplatform"; }

case "${1:-}" in
  up) up ;;
  down) down ;;
  url) url ;;
  *) echo "usage: $0 up|down|url" >&2; exit 2 ;;
esac

#!/usr/bin/env bash
# Starts/stops the local services the test suite can use (see scripts/<service>.sh).
# Usage: scripts/infra.sh up|down
#   up   starts every service, then prints one env line per service (VAR=value) on stdout;
#        service chatter goes to stderr, so `eval "$(bash scripts/infra.sh up)"` works.
#   down stops every service (in reverse order), carrying on past failures.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# To add a service: write scripts/NAME.sh with up|down|url, list it here with its env var.
SERVICES=(mariadb kafka s3proxy)
declare -A ENV_VAR=([mariadb]=TEST_DATABASE_URL [kafka]=TEST_KAFKA_BROKERS [s3proxy]=TEST_S3_ENDPOINT)

case "${1:-}" in
  up)
    for s in "${SERVICES[@]}"; do bash "$HERE/$s.sh" up >&2; done
    for s in "${SERVICES[@]}"; do echo "${ENV_VAR[$s]}=$(bash "$HERE/$s.sh" url)"; done
    ;;
  down)
    rc=0
    for ((i = ${#SERVICES[@]} - 1; i >= 0; i--)); do
      bash "$HERE/${SERVICES[i]}.sh" down || rc=1
    done
    exit "$rc"
    ;;
  *) echo "usage: $0 up|down" >&2; exit 2 ;;
esac

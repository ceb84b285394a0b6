#!/usr/bin/env bash
# Hosts for the multi-host test (test/integration/multi-host.test.ts): Linux network
# namespaces on one machine, each with its own address on one private switch, and no route
# anywhere else (not to this machine's own network, not to the outside). Needs root and `ip`.
# Usage: scripts/netns-hosts.sh up|down [PREFIX]
#   up    creates PREFIX-sw (a bridge) and one namespace per host below, each with its
#         loopback up and one address on 10.77.0.0/24; prints "name address" per host
#   down  deletes them (processes still running in one must be stopped first)
# PREFIX defaults to bph; NETNS_SUBNET (10.77.0) sets the first three octets.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
PREFIX="${2:-bph}"
NET="${NETNS_SUBNET:-10.77.0}"
# host name -> last octet: infra (MariaDB, Kafka, the object store), two hosts each with a
# core and a gateway, the dispatcher's host, and the outside world (the test's client, the bots'
# webhook receivers).
declare -A HOSTS=([infra]=10 [a]=11 [b]=12 [disp]=13 [world]=20)
ORDER=(infra a b disp world)

up() {
  command -v ip >/dev/null || { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends iproute2; }
  down >/dev/null 2>&1 || true
  ip netns add "$PREFIX-sw"
  ip -n "$PREFIX-sw" link add br0 type bridge
  ip -n "$PREFIX-sw" link set br0 up
  for h in "${ORDER[@]}"; do
    local ns="$PREFIX-$h"
    ip netns add "$ns"
    ip link add eth0 netns "$ns" type veth peer name "p-$h" netns "$PREFIX-sw"
    ip -n "$PREFIX-sw" link set "p-$h" master br0
    ip -n "$PREFIX-sw" link set "p-$h" up
    ip -n "$ns" addr add "$NET.${HOSTS[$h]}/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    echo "$ns $NET.${HOSTS[$h]}"
  done
}

down() {
  local rc=0
  for h in "${ORDER[@]}" sw; do
    if ip netns list | grep -qw "$PREFIX-$h"; then ip netns del "$PREFIX-$h" || rc=1; fi
  done
  return "$rc"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  *) echo "usage: $0 up|down [PREFIX]" >&2; exit 2 ;;
esac

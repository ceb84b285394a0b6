#!/usr/bin/env bash
# Hosts for the multi-host test (test/integration/multi-host.test.ts): Linux network
# namespaces on one machine, each with its own address on one private switch, and no route
# anywhere else (not to this machine's own network, not to the outside); with HOSTS_DATA_ROOT
# set, each host also gets its own mount namespace, in which that directory holds only the
# host's own disk. Needs root, `ip`, and util-linux's `unshare` and `nsenter`.
# Usage: scripts/netns-hosts.sh up|down [PREFIX]
#        scripts/netns-hosts.sh exec PREFIX HOST COMMAND [ARG...]
#   up    creates PREFIX-sw (a bridge) and one network namespace per host below, each with its
#         loopback up and one address on 10.77.0.0/24; prints "name address" per host.
#         With HOSTS_DATA_ROOT=<dir>: creates <dir>/<host> (the host's disk) and a mount
#         namespace per host (a file under /run/PREFIX-mnt) where a private tmpfs covers <dir>
#         and only <dir>/<host> is mounted back in it: a process on one host cannot see, let
#         alone write, another's files there; the machine itself still sees <dir>/<host> for all
#   exec  runs COMMAND on HOST, in this directory: in its network namespace and, if `up` made
#         one, its mount namespace (the command replaces this script: same process id)
#   down  deletes them (processes still running in one must be stopped first)
# PREFIX defaults to bph; NETNS_SUBNET (10.77.0) sets the first three octets.
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"
PREFIX="${2:-bph}"
NET="${NETNS_SUBNET:-10.77.0}"
MNT="/run/$PREFIX-mnt"
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
  [[ -n "${HOSTS_DATA_ROOT:-}" ]] && disks "$HOSTS_DATA_ROOT"
  return 0
}

# One mount namespace per host, kept by a bind mount of its file under $MNT (made a private
# mount first, as unshare requires on hosts where /run is shared).
disks() {
  local root h
  root="$(realpath "$1")"
  mkdir -p "$MNT/.stage"
  mount --bind "$MNT" "$MNT"
  mount --make-private "$MNT"
  for h in "${ORDER[@]}"; do
    mkdir -p "$root/$h"
    touch "$MNT/$h"
    # In the new namespace (all mounts private, nothing propagates back): the host's disk
    # aside, an empty tmpfs over the root, the disk moved back in as <root>/<host>.
    unshare --mount="$MNT/$h" --propagation private sh -euc '
      mount --bind "$1/$2" "$3"
      mount -t tmpfs -o mode=0755,size=16m "hosts-$2" "$1"
      mkdir "$1/$2"
      mount --move "$3" "$1/$2"' disks "$root" "$h" "$MNT/.stage"
  done
}

down() {
  local rc=0 f
  if [[ -d "$MNT" ]]; then
    for f in "$MNT"/*; do [[ -e "$f" ]] && { umount "$f" 2>/dev/null || true; }; done
    umount "$MNT" 2>/dev/null || true
    rm -rf "$MNT" || rc=1
  fi
  for h in "${ORDER[@]}" sw; do
    if ip netns list | grep -qw "$PREFIX-$h"; then ip netns del "$PREFIX-$h" || rc=1; fi
  done
  return "$rc"
}

run_on() { # HOST COMMAND...
  local h="$1"
  shift
  [[ -n "${HOSTS[$h]:-}" ]] || { echo "netns-hosts: no host $h" >&2; exit 2; }
  if [[ -e "$MNT/$h" ]]; then
    # Entering a mount namespace moves to its root directory: --wd keeps the caller's.
    exec nsenter --mount="$MNT/$h" --net="/run/netns/$PREFIX-$h" --wd="$PWD" -- "$@"
  fi
  exec ip netns exec "$PREFIX-$h" "$@"
}

case "${1:-}" in
  up) up ;;
  down) down ;;
  exec) [[ $# -ge 4 ]] || { echo "usage: $0 exec PREFIX HOST COMMAND [ARG...]" >&2; exit 2; }; run_on "${@:3}" ;;
  *) echo "usage: $0 up|down [PREFIX] | exec PREFIX HOST COMMAND [ARG...]" >&2; exit 2 ;;
esac

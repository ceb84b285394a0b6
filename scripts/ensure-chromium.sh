#!/usr/bin/env bash
# Prints the path of the Chromium the console's browser tests drive (playwright-core
# downloads no browser): CHROMIUM_PATH when set, else Debian's package at
# /usr/bin/chromium, installed with apt-get when missing (as root, or through sudo when
# it needs no password). When it cannot install, it says in one line why and what to
# do, and exits 1. The test that needs the browser calls it (test/helpers/browser.ts),
# and so does .ci/run.
#   bash scripts/ensure-chromium.sh
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
path="${CHROMIUM_PATH:-/usr/bin/chromium}"
fail() { echo "ensure-chromium: $*" >&2; exit 1; }

if [[ -x "$path" ]]; then echo "$path"; exit 0; fi
if [[ -n "${CHROMIUM_PATH:-}" ]]; then
  fail "CHROMIUM_PATH=$CHROMIUM_PATH is not an executable file: point it to a Chromium, or unset it to use Debian's chromium package (/usr/bin/chromium, installed here when missing)"
fi
command -v apt-get >/dev/null 2>&1 ||
  fail "Chromium is not at $path and this system has no apt-get to install Debian's chromium package: install Chromium and set CHROMIUM_PATH to its executable"
if [[ "$(id -u)" == 0 ]]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  fail "Chromium is not at $path and cannot be installed by this user (not root, and no sudo without a password): run 'sudo apt-get install -y chromium' once, or set CHROMIUM_PATH to a Chromium executable"
fi

# Two callers may ask at once (a test run and .ci/run): one installs, the other waits for it.
mkdir -p "$repo/.infra"
exec 9>"$repo/.infra/.chromium.lock"
flock 9
if [[ ! -x "$path" ]]; then
  log="$repo/.infra/chromium-apt.log"
  echo "ensure-chromium: installing Debian's chromium package with apt-get (a minute or so; output in $log)" >&2
  apt() { "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@" >>"$log" 2>&1 || { tail -n 20 "$log" >&2; return 1; }; }
  : >"$log"
  apt update -qq || fail "apt-get update failed (its last lines above): install Debian's chromium package, or set CHROMIUM_PATH"
  apt install -y -qq chromium || fail "apt-get install chromium failed (its last lines above): install Chromium, or set CHROMIUM_PATH to its executable"
fi
[[ -x "$path" ]] || fail "Debian's chromium package is installed but $path is not an executable: set CHROMIUM_PATH to Chromium's executable"
echo "$path"

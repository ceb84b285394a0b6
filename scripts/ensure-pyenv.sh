#!/usr/bin/env bash
# Prints the path of a Python interpreter in a virtual environment that has the
# packages of the given requirements file installed from PyPI (tests use it to run
# real third-party Python clients against the service). The environment lives in
# .infra/venv/<name>-<hash of the requirements file>, built on first use and reused
# while the file is unchanged. Needs python3 with venv.
#   bash scripts/ensure-pyenv.sh test/polyglot/python/requirements.txt
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
req="${1:?usage: ensure-pyenv.sh REQUIREMENTS_FILE}"
[[ "$req" = /* ]] || req="$repo/$req"
[[ -f "$req" ]] || { echo "ensure-pyenv: no such file: $req" >&2; exit 2; }
name="$(basename "$(dirname "$req")")"
# The file and those it includes (`-r other.txt`, beside it): a change to either builds anew.
included="$(sed -n 's/^-r[[:space:]]*//p' "$req" | sed "s|^|$(dirname "$req")/|")"
# shellcheck disable=SC2086
hash="$(cat "$req" $included | sha256sum | cut -c1-12)"
venv="$repo/.infra/venv/$name-$hash"
if [[ -x "$venv/bin/python" && -f "$venv/.complete" ]]; then echo "$venv/bin/python"; exit 0; fi
mkdir -p "$repo/.infra/venv"
# Two test files may ask at once: one builds, the other waits for it.
exec 9>"$repo/.infra/venv/.$name-$hash.lock"
flock 9
if [[ -x "$venv/bin/python" && -f "$venv/.complete" ]]; then echo "$venv/bin/python"; exit 0; fi
rm -rf "$venv"
python3 -m venv "$venv" >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req" >&2
touch "$venv/.complete"
echo "$venv/bin/python"

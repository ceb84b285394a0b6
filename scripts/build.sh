#!/usr/bin/env bash
# Compiles the service to dist/ (what `npm start` runs, and the memory test and bench:files),
# and the web console to dist/console/dist.
# Plain JavaScript needs no transpiler at run time, which keeps the process small.
# Builds may run at once (tests start the service while others build): each builds into
# its own folder under a lock, then swaps it in with two renames, so a process never
# starts from a half-written dist/.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec 9>.build.lock
flock 9
out="dist.new.$$"
rm -rf "$out"
npx tsc -p tsconfig.build.json --outDir "$out"
# Files read at run time, next to the code that reads them.
cp src/gen/descriptors.binpb "$out/src/gen/"
cp gateway/generated/openapi.json "$out/gateway/generated/"
# The web console (Vite): content-hashed files the gateway serves (gateway/runtime/console.ts).
npx vite build --config console/vite.config.ts --outDir "$PWD/$out/console/dist"
rm -rf dist.old
if [[ -d dist ]]; then mv dist dist.old; fi
mv "$out" dist
rm -rf dist.old

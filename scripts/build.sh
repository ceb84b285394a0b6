#!/usr/bin/env bash
# Compiles the service to dist/ (what `npm start` runs, and the memory test and bench:files):
# plain JavaScript needs no transpiler at run time, which keeps the process small.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rm -rf dist
npx tsc -p tsconfig.build.json
# Files read at run time, next to the code that reads them.
cp src/gen/descriptors.binpb dist/src/gen/
cp gateway/generated/openapi.json dist/gateway/generated/

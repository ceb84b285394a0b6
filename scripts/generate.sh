#!/usr/bin/env bash
# Regenerates every generated file from proto/: ts-proto TypeScript (src/gen), the
# binary descriptor set for gRPC reflection, and the gateway's route table, method
# settings and OpenAPI document, the SDK's wire types and method bindings, and the Python SDK's models
# and methods (sdk/python). CI runs this and fails if anything changed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

rm -rf src/gen gateway/generated sdk/src/generated
buf generate
buf build --exclude-source-info --as-file-descriptor-set -o src/gen/descriptors.binpb
buf build -o "$tmp/image.json"
tsx gateway/generator/main.ts "$tmp/image.json" "$PWD"
# TypeScript types of the OpenAPI document by a mainstream third-party generator:
# test/openapi-client.test.ts drives the service through them with openapi-fetch.
openapi-typescript gateway/generated/openapi.json -o gateway/generated/openapi-types.ts >/dev/null
# The Python SDK's models (by datamodel-code-generator) and methods, from the same document, in a
# venv of the generator alone (built under .infra/venv on first use, then reused).
python="$(bash scripts/ensure-pyenv.sh sdk/python/requirements-generate.txt)"
rm -rf sdk/python/src/botplatform/_generated
"$python" sdk/python/codegen/generate.py gateway/generated/openapi.json sdk/python/src/botplatform/_generated

#!/usr/bin/env bash
# Prints the path of a grpcurl binary, building it from the Go module proxy into
# .infra/bin on first use (tests use it to check reflection with a real,
# third-party gRPC client). Needs Go.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
version=v1.9.3
bin="$repo/.infra/bin/grpcurl"
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
if command -v grpcurl >/dev/null 2>&1; then command -v grpcurl; exit 0; fi
mkdir -p "$repo/.infra/bin"
GOBIN="$repo/.infra/bin" GOFLAGS=-mod=mod go install "github.com/fullstorydev/grpcurl/cmd/grpcurl@$version" >&2
echo "$bin"

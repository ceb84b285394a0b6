#!/usr/bin/env bash
# Installs the Go protobuf plugins (protoc-gen-go, protoc-gen-go-grpc) from the Go
# module proxy into .infra/bin on first use, at the versions test/polyglot/go pins,
# and prints that directory (put it first on PATH for buf's local plugins). Needs Go.
#   PATH="$(bash scripts/ensure-go-plugins.sh):$PATH" buf generate --template test/polyglot/go/buf.gen.yaml ...
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# protoc-gen-go comes with the protobuf runtime: keep it at the version of test/polyglot/go/go.mod.
protobuf_version=v1.36.12
grpc_plugin_version=v1.6.2
bin="$repo/.infra/bin"
command -v go >/dev/null 2>&1 || {
  echo "ensure-go-plugins: the Go toolchain (go) is not on PATH; install Go 1.26 or newer" >&2
  exit 127
}
have() { [[ -x "$bin/$1" ]] && "$bin/$1" --version 2>/dev/null | grep -qF "${2#v}"; }
mkdir -p "$bin"
exec 9>"$bin/.go-plugins.lock"
flock 9
if ! have protoc-gen-go "$protobuf_version"; then
  GOBIN="$bin" GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$protobuf_version" >&2
fi
if ! have protoc-gen-go-grpc "$grpc_plugin_version"; then
  GOBIN="$bin" GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$grpc_plugin_version" >&2
fi
echo "$bin"

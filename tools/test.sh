#!/usr/bin/env bash
# The whole test suite. It installs what the tests need by itself, so it
# runs on a fresh machine: bash tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

echo "== go $(go version | cut -d' ' -f3), $(nproc) cores"
go mod download
go vet ./...
# The race detector on the packages with concurrency; the rest (and the
# real-process crash test) without it, to keep the suite fast on 2 cores.
go test -count=1 -race ./log/...
go test -count=1 ./...
echo "== tools/bench (Tessera side by side, tlog-tiles interoperability)"
(cd tools/bench && go mod download && go vet ./... && go test -count=1 ./...)

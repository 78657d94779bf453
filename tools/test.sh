#!/usr/bin/env bash
# The whole test suite. It installs what the tests need by itself, so it
# runs on a fresh machine: bash tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

echo "== go $(go version | cut -d' ' -f3), $(nproc) cores"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	echo "== installing node and npm (Debian packages)"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
fi
echo "== real MCP programs for the proxy tests (npm server-everything and TS SDK, go-sdk everything-server)"
eval "$(bash tools/mcptest/install.sh)"

go mod download
go vet ./...
# The race detector on the packages with concurrency; the rest (and the
# real-process tests) without it, to keep the suite fast on 2 cores.
go test -count=1 -race ./log/... ./opp/...
go test -count=1 ./...
echo "== tools/bench (Tessera side by side, tlog-tiles interoperability)"
(cd tools/bench && go mod download && go vet ./... && go test -count=1 ./...)

#!/usr/bin/env bash
# The whole test suite. It installs what the tests need by itself, so it
# runs on a fresh machine: bash tools/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

echo "== go $(go version | cut -d' ' -f3), $(nproc) cores"
# Debian packages the tests drive: node and npm (MCP servers and the TS
# client), openssl (a real RFC 3161 TSA), ssh-agent and sqlite3 (litewitness).
need=()
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
command -v openssl >/dev/null || need+=(openssl)
command -v ssh-agent >/dev/null || need+=(openssh-client)
command -v sqlite3 >/dev/null || need+=(sqlite3)
# curl: cmd/provlog runs the README's tour, which uses it.
command -v curl >/dev/null || need+=(curl)
# gcc: ORY Hydra's in-memory SQLite needs cgo (tools/hydratest/install.sh).
command -v gcc >/dev/null || need+=(gcc libc6-dev)
# python3-prov and prov-tools: the export bundle's PROV-JSON must load in
# Debian's python3-prov and round-trip through prov-convert (log/bundle).
/usr/bin/python3 -c 'import prov.model' 2>/dev/null || need+=(python3-prov)
command -v prov-convert >/dev/null || need+=(prov-tools)
if [ ${#need[@]} -gt 0 ]; then
	echo "== installing Debian packages: ${need[*]}"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi
# --- auditor's view (cmd/provlog/ui_test.go): Debian's headless Chromium,
# driven over the DevTools protocol on a pipe (cmd/internal/browser). ---
if ! command -v chromium >/dev/null; then
	echo "== installing Debian chromium for the browser tests of the auditor's view"
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
# --- end auditor's view ---
# use SCRIPT runs an install (or start) script and takes the variables it
# prints. Not eval "$(bash SCRIPT)": eval of an empty string succeeds, so a
# failed install went unnoticed until a test missed its variable.
use() {
	local vars
	vars="$(bash "$1")"
	eval "$vars"
}
echo "== real MCP programs for the proxy tests (npm server-everything and TS SDK, go-sdk everything-server)"
use tools/mcptest/install.sh
echo "== TSAs and Rekor for the anchoring tests (sigstore timestamp-server, rekor-server + in-memory Trillian)"
use tools/anchortest/install.sh
echo "== litewitness (filippo.io/torchwood) for the witness interoperability test"
use tools/witnesstest/install.sh
echo "== ORY Hydra v2.3.0 (in-memory) as the authorization server of the OAuth tests"
use tools/hydratest/install.sh
echo "== zitadel/oidc v3.52.0's example OpenID Provider (RFC 8693 token exchange) for the OAuth tests"
use tools/zitadeltest/install.sh
echo "== the OpenTelemetry Collector's OTLP receiver (tools/otelrecv) for the trace test"
use tools/otelrecv/install.sh
# --- PostgreSQL (log/logpg; many sidecars on one log) ---
# A throwaway cluster (initdb as the postgres user, 127.0.0.1, a free
# port); the tests read PROVLOG_TEST_POSTGRES and, under CI=true, fail
# without it. Installs Debian's postgresql if no server binaries exist.
echo "== a throwaway PostgreSQL cluster for log/logpg and the multi-sidecar tests"
use tools/pgtest/start.sh
trap 'bash tools/pgtest/stop.sh' EXIT
# --- end PostgreSQL ---

go mod download
go vet ./...
# The race detector on the packages with concurrency; the rest (and the
# real-process tests) without it, to keep the suite fast on 2 cores.
# -timeout: on a loaded machine the fault tables under -race outlast the
# default 10 minutes (log/logpebble took 9.5 with 8 engineers compiling).
# log/logpebble runs with -race too, its table of injected write faults
# included: a race build turns on Pebble's own invariant checks, which
# caught the L0 bookkeeping a failed MANIFEST write left behind (fixed:
# faultfs.go, gate.go). TestResumeAfterDiskFull runs without -race only (in
# the last line): under -race its appenders' refused appends on the full
# disk alone take minutes.
go test -count=1 -timeout 30m -race $(go list ./log/... | grep -v '/log/logpebble$') ./opp/... ./witness/... ./anchor/... ./cmd/provlog-witness/ ./proxy/authn/...
go test -count=1 -timeout 30m -race -skip 'TestResumeAfterDiskFull' ./log/logpebble/
go test -count=1 -timeout 30m ./...
(cd tools/rekorlocal && go vet ./...)
(cd tools/otelrecv && go vet ./...)
(cd tools/zitadeltest/server && go vet ./...)
echo "== tools/bench (Tessera side by side, tlog-tiles interoperability)"
(cd tools/bench && go mod download && go vet ./... && go test -count=1 ./...)

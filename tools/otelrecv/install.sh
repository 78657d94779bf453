#!/usr/bin/env bash
# Builds tools/otelrecv (the OpenTelemetry Collector's own OTLP receiver,
# go.opentelemetry.io/collector/receiver/otlpreceiver v0.165.0, writing
# what it receives to a file) into a cache folder keyed by its sources and
# the Go version, so a second run is instant. It has its own go.mod, so
# the collector stays out of the product's dependencies.
#
# It prints the variable the trace test (cmd/provlog TestTracesOTLP)
# reads, ready for eval:
#   PROVLOG_OTELRECV  the otelrecv binary
#
# Usage: eval "$(bash tools/otelrecv/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
. "$here/../gobuild.sh"
gobuild otelrecv "$here"
echo "export PROVLOG_OTELRECV=$built"

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
gover="$(go env GOVERSION)"
key="$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)"
dir="$root/otelrecv-$key-$gover"
if [ ! -x "$dir/otelrecv" ]; then
	echo "otelrecv: building tools/otelrecv (the Collector's otlpreceiver) into $dir" >&2
	mkdir -p "$dir"
	(cd "$here" && go build -o "$dir/otelrecv.tmp" . >&2)
	mv "$dir/otelrecv.tmp" "$dir/otelrecv"
fi
echo "export PROVLOG_OTELRECV=$dir/otelrecv"

#!/usr/bin/env bash
# Installs the independent witness the interoperability tests run against,
# into a cache folder keyed by its version, so a second run is instant:
#   - litewitness from filippo.io/torchwood v0.6.1 (the last release that
#     builds with Go 1.26; it keeps its key in an ssh-agent);
#   - witnessctl from the same release, if it builds: it needs
#     sigsum.org/sigsum-go, which the Go module proxy may not serve. The
#     tests then set up litewitness's SQLite database with the sqlite3
#     program instead, with the same statements witnessctl runs.
#
# It prints the variables the Go tests read, ready for eval:
#   PROVLOG_LITEWITNESS  the litewitness binary
#   PROVLOG_WITNESSCTL   the witnessctl binary (only if it built)
#
# Usage: eval "$(bash tools/witnesstest/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
torchwood=v0.6.1
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
bin="$root/torchwood-$torchwood"

mkdir -p "$bin"
if [ ! -x "$bin/litewitness" ]; then
	echo "witnesstest: building filippo.io/torchwood/cmd/litewitness@$torchwood into $bin" >&2
	# Outside any module, so the main module's go.mod is neither read nor changed.
	(cd "$bin" && GOBIN="$bin" go install "filippo.io/torchwood/cmd/litewitness@$torchwood" >&2)
fi
if [ ! -x "$bin/witnessctl" ] && [ ! -f "$bin/.witnessctl-failed" ]; then
	echo "witnesstest: building filippo.io/torchwood/cmd/witnessctl@$torchwood into $bin" >&2
	if ! (cd "$bin" && GOBIN="$bin" go install "filippo.io/torchwood/cmd/witnessctl@$torchwood" >&2); then
		echo "witnesstest: witnessctl did not build (sigsum.org/sigsum-go unavailable?); the tests use sqlite3 instead" >&2
		touch "$bin/.witnessctl-failed"
	fi
fi

echo "export PROVLOG_LITEWITNESS=$bin/litewitness"
if [ -x "$bin/witnessctl" ]; then
	echo "export PROVLOG_WITNESSCTL=$bin/witnessctl"
fi

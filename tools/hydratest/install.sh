#!/usr/bin/env bash
# Builds ORY Hydra, the real OAuth 2.0 authorization server the auth tests
# get their tokens from, into a cache folder keyed by its version and the
# Go version, so a second run is instant.
#
# `go install github.com/ory/hydra/v2@v2.3.0` refuses to build it: its
# go.mod has replace directives. So this builds it the way its own
# Makefile does, inside the module: the v2.3.0 source from the Go module
# proxy, with the sqlite build tag (DSN=memory is an in-memory SQLite,
# which needs cgo and a C compiler). One replace points at
# ./internal/httpclient, a nested module the release's zip leaves out;
# it is dropped for the published github.com/ory/hydra-client-go/v2
# v2.2.1 the go.mod already requires. Only Hydra's own CLI client uses
# that package; the server the tests run does not.
#
# It prints the variable the Go tests read, ready for eval:
#   PROVLOG_HYDRA  the hydra binary (tools/hydratest starts it)
#
# Usage: eval "$(bash tools/hydratest/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
version=v2.3.0
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
gover="$(go env GOVERSION)"
dir="$root/hydra-$version-$gover"

if [ ! -x "$dir/hydra" ]; then
	if ! command -v "$(go env CC)" >/dev/null; then
		echo "hydratest: no C compiler ($(go env CC)); Hydra's in-memory SQLite needs cgo" >&2
		exit 1
	fi
	echo "hydratest: building github.com/ory/hydra/v2@$version (sqlite) into $dir" >&2
	mkdir -p "$root"
	tmp="$(mktemp -d "$root/.tmp.XXXXXX")"
	trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
	# Outside any module, so the main module's go.mod is neither read nor changed.
	src="$(cd "$tmp" && go mod download -json "github.com/ory/hydra/v2@$version" |
		sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	[ -d "$src" ] || { echo "hydratest: go mod download gave no source dir" >&2; exit 1; }
	cp -R "$src" "$tmp/src"
	chmod -R u+w "$tmp/src"
	(
		cd "$tmp/src"
		go mod edit -dropreplace github.com/ory/hydra-client-go/v2
		# -mod=mod adds the client's go.sum lines (checked against sum.golang.org).
		CGO_ENABLED=1 go build -mod=mod -tags sqlite,sqlite_omit_load_extension \
			-ldflags "-X github.com/ory/hydra/v2/driver/config.Version=$version" \
			-o "$tmp/hydra" . >&2
	)
	mkdir -p "$dir"
	mv "$tmp/hydra" "$dir/hydra"
fi

echo "export PROVLOG_HYDRA=$dir/hydra"

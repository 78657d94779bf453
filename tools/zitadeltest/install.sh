#!/usr/bin/env bash
# Builds tools/zitadeltest/server (the zitadel/oidc v3.52.0 library's
# example OpenID Provider, which implements RFC 8693 token exchange) into
# a cache folder keyed by its sources and the Go version, so a second run
# is instant. It has its own go.mod, so the library stays out of the
# product's dependencies.
#
# It prints the variable the token-exchange test (cmd/provlog
# TestOAuthTokenExchange) reads, ready for eval:
#   PROVLOG_ZITADEL_OP  the server binary (tools/zitadeltest starts it)
#
# Usage: eval "$(bash tools/zitadeltest/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/server" && pwd)"
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
gover="$(go env GOVERSION)"
key="$(cat "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)"
dir="$root/zitadel-op-$key-$gover"
if [ ! -x "$dir/zitadel-op" ]; then
	echo "zitadeltest: building tools/zitadeltest/server (zitadel/oidc's example OP) into $dir" >&2
	mkdir -p "$dir"
	(cd "$here" && go build -o "$dir/zitadel-op.tmp" . >&2)
	mv "$dir/zitadel-op.tmp" "$dir/zitadel-op"
fi
echo "export PROVLOG_ZITADEL_OP=$dir/zitadel-op"

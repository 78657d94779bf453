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
. "$here/../../gobuild.sh"
gobuild zitadel-op "$here"
echo "export PROVLOG_ZITADEL_OP=$built"

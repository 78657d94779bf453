#!/usr/bin/env bash
# Builds the real anchoring services the anchor tests run against, into a
# cache folder keyed by their versions (and the Go version), so a second
# run is instant:
#   - sigstore's timestamp-server v2.1.3 (an RFC 3161 TSA), from the module proxy;
#   - sigstore's rekor-server v1.5.4, from the module proxy;
#   - tools/rekorlocal: Trillian v1.7.3 with in-memory storage, the log
#     rekor-server writes to (its own module, so Trillian stays out of the
#     product's go.mod).
# The tests also use `openssl ts` (OpenSSL 3) as a second TSA and as an
# independent verifier of stored tokens; it comes from the system.
#
# It prints the variables the Go tests read, ready for eval:
#   PROVLOG_TIMESTAMP_SERVER  the timestamp-server binary
#   PROVLOG_REKOR_SERVER      the rekor-server binary
#   PROVLOG_TRILLIAN_HELPER   the rekorlocal binary
#
# Usage: eval "$(bash tools/anchortest/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
helper="$(cd "$here/../rekorlocal" && pwd)"
tsa=v2.1.3
rekor=v1.5.4
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
gover="$(GOTOOLCHAIN=local go env GOVERSION)"
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false

# install BIN DIR PKG@VERSION builds one binary from the module proxy,
# outside any module so no go.mod is read or changed.
install() {
	local name="$1" dir="$2" pkg="$3"
	if [ ! -x "$dir/$name" ]; then
		echo "anchortest: building $pkg into $dir" >&2
		mkdir -p "$dir"
		local tmp
		tmp="$(mktemp -d "$root/.tmp.XXXXXX")"
		(cd "$tmp" && GOBIN="$tmp" go install "$pkg" >&2)
		mv "$tmp/$name" "$dir/$name"
		rmdir "$tmp"
	fi
}
mkdir -p "$root"
install timestamp-server "$root/timestamp-server-$tsa-$gover" "github.com/sigstore/timestamp-authority/v2/cmd/timestamp-server@$tsa"
install rekor-server "$root/rekor-server-$rekor-$gover" "github.com/sigstore/rekor/cmd/rekor-server@$rekor"

. "$here/../gobuild.sh"
gobuild rekorlocal "$helper"

if ! command -v openssl >/dev/null; then
	echo "anchortest: warning: openssl is not installed; the openssl TSA tests will skip (fail in CI)" >&2
fi
echo "export PROVLOG_TIMESTAMP_SERVER=$root/timestamp-server-$tsa-$gover/timestamp-server"
echo "export PROVLOG_REKOR_SERVER=$root/rekor-server-$rekor-$gover/rekor-server"
echo "export PROVLOG_TRILLIAN_HELPER=$built"

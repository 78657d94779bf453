#!/usr/bin/env bash
# Installs the real MCP programs the proxy tests run against, into a cache
# folder keyed by this folder's lockfile and the go-sdk version, so a second
# run is instant:
#   - @modelcontextprotocol/server-everything and @modelcontextprotocol/sdk
#     (npm ci from package-lock.json), used as a downstream server and,
#     through client.mjs, as the TypeScript client;
#   - go-sdk's conformance everything-server, built from the module proxy;
#   - the official conformance suite @modelcontextprotocol/conformance and
#     node 22 (npm package "node"), which its CLI needs (npm ci from
#     conformance/package-lock.json, a folder of its own so the node 22
#     binary stays out of the other programs' way).
#
# It prints the variables the Go tests read, ready for eval:
#   PROVLOG_MCPTEST_DIR        the folder holding node_modules and client.mjs
#   PROVLOG_EVERYTHING_SERVER  the everything-server binary
#   PROVLOG_CONFORMANCE        the conformance suite's CLI script
#   PROVLOG_NODE22             the node 22 binary to run it with
#
# Usage: eval "$(bash tools/mcptest/install.sh)"
# Cache root: $PROVLOG_CACHE, else $XDG_CACHE_HOME/provlog, else ~/.cache/provlog.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
gosdk=v1.8.0
root="${PROVLOG_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/provlog}"
key="$(sha256sum <"$here/package-lock.json" | cut -c1-16)"
dir="$root/mcptest-$key"
bin="$root/bin-$gosdk"

# npm_install SRC DIR WHAT installs SRC's package-lock.json into DIR (by way
# of a temporary directory, so a half-done install is never taken for a
# whole one), unless DIR holds a finished install already.
npm_install() {
	local src="$1" dir="$2" what="$3" tmp
	[ -f "$dir/.installed" ] && return
	echo "mcptest: installing $what into $dir" >&2
	mkdir -p "$root"
	tmp="$(mktemp -d "$root/.tmp.XXXXXX")"
	cp "$src/package.json" "$src/package-lock.json" "$tmp/"
	npm ci --prefix "$tmp" --no-audit --no-fund --loglevel=error >&2
	touch "$tmp/.installed"
	rm -rf "$dir"
	# Another install may have finished in the meantime: then its folder
	# stays (mv -T does not move into it) and this one is dropped.
	if ! mv -T "$tmp" "$dir" 2>/dev/null; then
		[ -f "$dir/.installed" ] || { echo "mcptest: could not move $tmp to $dir" >&2; exit 1; }
		rm -rf "$tmp"
	fi
}

npm_install "$here" "$dir" "npm packages"
# The client scripts are copied on every run (they are not part of the key),
# so they resolve their imports from the node_modules beside them.
cp "$here/client.mjs" "$here/oauth.mjs" "$dir/"

if [ ! -x "$bin/everything-server" ]; then
	echo "mcptest: building go-sdk $gosdk conformance/everything-server into $bin" >&2
	mkdir -p "$bin"
	# Outside any module, so the main module's go.mod is neither read nor changed.
	(cd "$bin" && GOBIN="$bin" go install "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$gosdk" >&2)
fi

ckey="$(sha256sum <"$here/conformance/package-lock.json" | cut -c1-16)"
cdir="$root/conformance-$ckey"
npm_install "$here/conformance" "$cdir" "the MCP conformance suite and node 22"

echo "export PROVLOG_MCPTEST_DIR=$dir"
echo "export PROVLOG_CONFORMANCE=$cdir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
echo "export PROVLOG_NODE22=$cdir/node_modules/node/bin/node"
echo "export PROVLOG_EVERYTHING_SERVER=$bin/everything-server"

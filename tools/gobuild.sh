# gobuild.sh: sourced by the install scripts whose program has a go.mod of
# its own (tools/rekorlocal, tools/otelrecv, tools/zitadeltest/server).
#
# gobuild NAME SRC builds the module in SRC into
#   $root/NAME-<key>-<go version>/NAME
# where <key> is a digest of SRC's go.mod, go.sum and *.go, unless that
# binary exists already, and sets $built to its path. The build goes to a
# temporary file of its own in that folder and is renamed into place, so
# two installs running at once both finish with a whole binary (a fixed
# temporary name let one move the other's file away).
# The caller sets $root and GOTOOLCHAIN.
gobuild() {
	local name="$1" src="$2" key dir tmp
	key="$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-16)"
	dir="$root/$name-$key-$(go env GOVERSION)"
	built="$dir/$name"
	[ -x "$built" ] && return
	echo "${name}: building $src into $dir" >&2
	mkdir -p "$dir"
	tmp="$(mktemp "$dir/.$name.XXXXXX")"
	(cd "$src" && go build -o "$tmp" . >&2) || { rm -f "$tmp"; return 1; }
	mv -f "$tmp" "$built"
}

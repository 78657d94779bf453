#!/usr/bin/env bash
# Remakes the bundles older provlogs exported, which
# TestOldBundleProvMapping verifies. Each has an OAuth call in it (an
# agent acting for alice through an orchestrator: b68117b's test
# fixture), and a manifest that names no PROV mapping:
#   mapping1  exported by ad01a07 (the parent of b68117b), before the PROV
#             mapping of entries' auth members;
#   mapping2-unnamed  exported by 45fbdaa, with that mapping, before the
#             manifest named its mapping;
#   mapping2  exported by 4627f52 with its own test fixture (the same
#             calls and tasks), whose manifest names mapping 2, the last
#             before provlog's own actors were software agents.
# The bundles are kept, not remade by the tests: they are what those
# provlogs wrote.
#
# Usage (from the repository root), all of them when no DIR is named:
#   bash log/bundle/testdata/make-old-bundles.sh [DIR...]
set -euo pipefail
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
here="$(pwd)/log/bundle/testdata"
make() { # make COMMIT DIR [FIXTURE_COMMIT]
	local tmp
	tmp="$(mktemp -d)"
	git archive "$1" | tar -x -C "$tmp"
	git show "${3:-b68117b}":log/bundle/bundle_test.go >"$tmp/log/bundle/bundle_test.go"
	cat >"$tmp/log/bundle/make_old_test.go" <<'GO'
package bundle_test

import (
	"os"
	"testing"
)

func TestMakeOldBundle(t *testing.T) {
	dir := newFixture(t, 2, false).export(t, 0, 0)
	if err := os.CopyFS(os.Getenv("OLD_BUNDLE_OUT"), os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
}
GO
	rm -rf "$here/$2"
	(cd "$tmp" && OLD_BUNDLE_OUT="$here/$2" go test ./log/bundle -run '^TestMakeOldBundle$' -count=1)
	rm -rf "$tmp"
}
[ $# -gt 0 ] || set -- mapping1 mapping2-unnamed mapping2
for dir; do
	case "$dir" in
	mapping1) make ad01a07 mapping1 ;;
	mapping2-unnamed) make 45fbdaa mapping2-unnamed ;;
	mapping2) make 4627f52 mapping2 4627f52 ;;
	*) echo "no old bundle $dir" >&2 && exit 2 ;;
	esac
done

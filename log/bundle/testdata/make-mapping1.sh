#!/usr/bin/env bash
# Remakes testdata/mapping1: a bundle exported by the code before the PROV
# mapping of entries' auth members (commit ad01a07, the parent of
# b68117b), with an OAuth call in it. TestOldBundleProvMapping verifies it
# under the mapping it was made with. The bundle is kept, not remade by
# the tests: it is what an old provlog wrote.
#
# Usage (from the repository root): bash log/bundle/testdata/make-mapping1.sh
set -euo pipefail
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false
out="$(pwd)/log/bundle/testdata/mapping1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
git archive ad01a07 | tar -x -C "$tmp"
# b68117b's test fixture adds the OAuth call (an agent acting for alice
# through an orchestrator); its export code is ad01a07's.
git show b68117b:log/bundle/bundle_test.go >"$tmp/log/bundle/bundle_test.go"
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
rm -rf "$out"
(cd "$tmp" && OLD_BUNDLE_OUT="$out" go test ./log/bundle -run '^TestMakeOldBundle$' -count=1)

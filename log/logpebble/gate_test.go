package logpebble

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/provlog/provlog/log/logtest"
)

// TestCompactionsRun: behind the gate a healthy store still compacts (a
// gate that granted nothing would pass pebbleguard's TestCompactionGate).
func TestCompactionsRun(t *testing.T) {
	signer, v := logtest.NewKey(t, "gate.example/log")
	l, err := openFaultLog(t, t.TempDir(), vfs.Default, signer, v)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	if errs := l.appendAll("gate", 2000, 8); len(errs) > 0 {
		t.Fatal(errs[0])
	}
	waitFor(t, "a compaction", func() bool { return l.store.db.Metrics().Compact.Count > 0 })
}

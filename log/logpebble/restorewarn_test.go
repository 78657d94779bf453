package logpebble

import (
	"strings"
	"testing"
)

// TestRestoredBatchIsAWarning: a flipped byte in the WAL's last batch makes
// Pebble drop an acknowledged, synced batch, which Open restores from the
// published record (TestWALTailLoss). That batch was synced before it was
// acknowledged, so its loss means the disk lost or damaged a write: a
// problem that loses no data but must not pass unseen, which is what
// VerifyReport.Warnings is for (provlog audit --data prints them). Today
// reconcile only logs it through Logf, which audit's store discards, so
// audit says OK on a damaged store without a word.
func TestRestoredBatchIsAWarning(t *testing.T) {
	for _, readOnly := range []bool{true, false} {
		dir := t.TempDir()
		ack := writeLog(t, dir, 20)
		damage(t, newestWAL(t, dir), -300, false)
		opts := &Options{ReadOnly: true}
		if !readOnly {
			opts = faultOptions(t, nil)
		}
		s, err := Open(dir, opts)
		if err != nil {
			t.Fatalf("Open (read-only %v): %v", readOnly, err)
		}
		checkHoldsEntries(t, s, ack)
		rep, err := s.Verify(t.Context())
		s.Close()
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		found := false
		for _, w := range rep.Warnings {
			if strings.Contains(w, "published") || strings.Contains(w, "restored") {
				found = true
			}
		}
		if !found {
			t.Errorf("read-only %v: the last batch was restored from the published record (the WAL lost an acknowledged batch), but Verify's warnings %q do not say so", readOnly, rep.Warnings)
		}
	}
}

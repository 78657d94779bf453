package logpebble

import (
	"slices"
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

// TestDamagedPublishedSlotIsAWarning: a slot of the published-batch
// record that holds no whole record (damage, or a write a power loss cut)
// is passed over for the other, older one, and said: the store opens,
// and Verify (provlog audit --data) warns, naming the file. Before, it
// was passed over without a word, and with the write-ahead log's last
// batch lost as well the store opened shorter than it had acknowledged,
// audit said OK, and the next commit signed a second history.
func TestDamagedPublishedSlotIsAWarning(t *testing.T) {
	dir := t.TempDir()
	writeLog(t, dir, 20)
	rs, _, err := readRecords(dir)
	if err != nil || len(rs) != 2 {
		t.Fatalf("the published record: %d slots, %v", len(rs), err)
	}
	newest := publishedName(dir, rs[1].slot)
	damage(t, newest, 20, false)
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	rep, err := s.Verify(t.Context())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if !slices.ContainsFunc(rep.Warnings, func(w string) bool { return strings.Contains(w, newest) && strings.Contains(w, "torn or damaged") }) {
		t.Errorf("the newest published slot was damaged, but Verify's warnings %q do not say so", rep.Warnings)
	}
}

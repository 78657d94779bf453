package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest"
	"github.com/provlog/provlog/log/server"
	"github.com/provlog/provlog/log/slots"
)

// BenchmarkShownOnPostgres measures what the record of checkpoints shown
// costs an append to a shared log on PostgreSQL (the cluster of
// tools/pgtest/start.sh, fsync on): one appender, so each append is a
// commit of its own, with the record synced before each hand-out, left to
// a background sync every 50 ms (as serve keeps it, and log/logpebble its
// published record), and with no record.
func BenchmarkShownOnPostgres(b *testing.B) {
	ctx := context.Background()
	signer, v := logtest.NewKey(b, "provlog.test/shown-bench")
	for _, mode := range []string{"synced", "background", "none"} {
		b.Run(mode, func(b *testing.B) {
			st, err := logpg.Open(ctx, pgtest.DSN(b), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			opts := &server.SequencerOptions{}
			switch mode {
			case "synced":
				o := shownOut.options(b.TempDir(), nil)
				o.SyncInterval = 0
				w, err := slots.Open(o, 0)
				if err != nil {
					b.Fatal(err)
				}
				defer w.Close()
				opts.Shown = func(cp []byte) error { return w.Write(shownOut.encode(cp)) }
			case "background":
				rec, err := shownOut.open(b.TempDir(), nil)
				if err != nil {
					b.Fatal(err)
				}
				defer rec.close()
				opts.Shown = rec.write
			}
			seq, err := server.OpenSequencer(ctx, st, signer, v, opts)
			if err != nil {
				b.Fatal(err)
			}
			defer seq.Close()
			i := 0
			for b.Loop() {
				if _, err := seq.Append(ctx, fmt.Appendf(nil, "entry %d", i)); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}

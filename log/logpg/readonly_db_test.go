package logpg_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestReadOnlyDatabase: a database that takes no writes (an operator
// turned default_transaction_read_only on; a hot standby refuses the
// same way, SQLSTATE 25006) refuses appends as unavailable and read-only,
// in one round trip and in two, and writes nothing; the sequencer does
// not stop, its health says read-only for as long as it lasts, and
// appends go through once the database is writable again. A commit in
// one round trip stopped the log for good, one in two was retried
// without naming the fault, and health said ok while it lasted (it read
// the state, which a read-only database serves).
func TestReadOnlyDatabase(t *testing.T) {
	c := pgtest.NewCluster(t)
	// The admin's own sessions write whatever the cluster's default.
	admin := c.DSN + "&options=-c%20default_transaction_read_only%3Doff"
	readOnly := func(t *testing.T, on bool) {
		set := "ALTER SYSTEM RESET default_transaction_read_only"
		if on {
			set = "ALTER SYSTEM SET default_transaction_read_only = on"
		}
		pgtest.Psql(t, admin, set)
		pgtest.Psql(t, admin, "SELECT pg_reload_conf()")
	}
	k := newKey(t, "provlog.test/readonly")
	for _, trips := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d round trips", trips), func(t *testing.T) {
			ctx := t.Context()
			db := fmt.Sprintf("ro%d", trips)
			pgtest.Psql(t, admin, "CREATE DATABASE "+db)
			seq, st := openSeq(t, strings.Replace(c.DSN, "/postgres?", "/"+db+"?", 1), k)
			logpg.SetTrips(st, trips)
			t.Cleanup(func() { readOnly(t, false) }) // for the next subtest, should this one fail
			if _, err := seq.Append(ctx, []byte("before")); err != nil {
				t.Fatal(err)
			}
			size := uint64(2)
			isReadOnly := func(what string, err error) {
				t.Helper()
				if !errors.Is(err, log.ErrUnavailable) || log.FaultReason(err) != "read-only" {
					t.Fatalf("%s: %v; want it unavailable, the database read-only", what, err)
				}
			}
			// Until each backend has taken in the reload (at its next
			// command once the signal reached it), appends may pass.
			readOnly(t, true)
			var err error
			for i := 0; err == nil; i++ {
				if i == 200 {
					t.Fatal("no append was refused by the read-only database")
				}
				if i > 0 {
					time.Sleep(10 * time.Millisecond)
				}
				if _, err = seq.Append(ctx, fmt.Appendf(nil, "while read-only %d", i)); err == nil {
					size++
				}
			}
			isReadOnly("an append on a read-only database", err)
			_, err = seq.Append(ctx, []byte("refused again"))
			isReadOnly("the next append", err)
			if err := seq.Err(); err != nil {
				t.Fatalf("the log stopped on a read-only database: %v", err)
			}
			isReadOnly("Unavailable, asked twice while read-only", seq.Unavailable())
			isReadOnly("Unavailable, asked again", seq.Unavailable())
			if got, err := st.Latest(ctx); err != nil || got.Size != size {
				t.Fatalf("the log while read-only: size %d, %v; want %d (nothing written)", got.Size, err, size)
			}

			readOnly(t, false)
			for i := 0; ; i++ {
				if i == 200 {
					t.Fatal("no append went through once the database was writable again")
				}
				if i > 0 {
					time.Sleep(10 * time.Millisecond)
				}
				if _, err = seq.Append(ctx, []byte("after")); err == nil {
					break
				}
				isReadOnly("an append while the reload spreads", err)
			}
			if err := seq.Unavailable(); err != nil {
				t.Fatalf("Unavailable once an append went through: %v", err)
			}
			got, err := st.Latest(ctx)
			if err != nil || got.Size != size+1 {
				t.Fatalf("the log after: size %d, %v; want %d", got.Size, err, size+1)
			}
			if es, err := st.Entries(ctx, size, size+1); err != nil || string(es[0]) != "after" {
				t.Fatalf("the last entry: %q, %v; want after", es, err)
			}
		})
	}
}

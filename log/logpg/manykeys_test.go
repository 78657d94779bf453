package logpg

import (
	"fmt"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
)

// TestFenceManyKeys: an append fenced on more than one key (log.Fence's
// Key and Also) is fenced off if any key was committed at or after its
// fence, in one round trip (the server checks every key) and in two; its
// keys are all recorded, and a second append of the same commit sharing
// any key is fenced off.
func TestFenceManyKeys(t *testing.T) {
	a, b, dsn := twoWriters(t)
	deaf(b)
	ctx := t.Context()
	fenced := func(s *Store, fences []log.Fence) []string {
		var calls []string
		err := s.CommitShared(ctx, fences, func(st log.State, fenced []bool) (*log.Batch, error) {
			calls = append(calls, fmt.Sprint(st.Size, fenced))
			n := 0
			for _, f := range fenced {
				if !f {
					n++
				}
			}
			if n == 0 {
				return nil, nil
			}
			return buildOn(t, st, "k", n), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return calls
	}
	if got := fenced(a, []log.Fence{{Key: "t1", Also: []string{"call:7"}}}); fmt.Sprint(got) != "[0 [false]]" {
		t.Fatalf("first append: builds %v", got)
	}
	if _, err := b.Latest(ctx); err != nil {
		t.Fatal(err)
	}
	// b knows the newest state and tries one round trip; its task's key is
	// new, but call:7 was committed at 0.
	if got := fenced(b, []log.Fence{{Key: "t2", Also: []string{"call:7"}, After: 0}}); fmt.Sprint(got) != "[1 [false] 1 [true]]" {
		t.Fatalf("builds %v, want one on [false], then one on [true]", got)
	}
	if got := fenced(b, []log.Fence{{Key: "t2", Also: []string{"call:7", "call:7", ""}, After: 1}}); fmt.Sprint(got) != "[1 [false]]" {
		t.Fatalf("an append decided after call:7's entry: builds %v", got)
	}
	if got := fenced(a, []log.Fence{{Key: "t3", Also: []string{"call:9"}, After: 2}, {Key: "t4", Also: []string{"call:9"}, After: 2}}); fmt.Sprint(got[len(got)-1]) != "2 [false true]" {
		t.Fatalf("two appends sharing call:9 in one commit: builds %v, want the second fenced", got)
	}
	if got := pgtest.Psql(t, dsn, `SELECT string_agg(key || '=' || last, ',' ORDER BY key) FROM provlog_keys`); got != "call:7=1,call:9=2,t1=0,t2=1,t3=2" {
		t.Fatalf("keys = %s", got)
	}
}

package pull

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestCheckStaleBounded: a log serving an older checkpoint consistent
// with the recorded one is stale, which a cache may explain for a while;
// a log that serves nothing as new as what it signed for longer than
// MaxStale (counted from the first check that found it stale, kept in the
// store across checks) is an error wrapping ErrStale. Once it serves the
// recorded tree or a larger one again, the count starts afresh.
func TestCheckStaleBounded(t *testing.T) {
	store, k, l := pebbleSetup(t)
	l.Grow(t, 50)
	if _, err := check(t, store, l.Prefix(), k); err != nil {
		t.Fatal(err)
	}
	srv := splice(l.Checkpoint(t, 40), l)
	defer srv.Close()
	now := time.Now()
	stale := func(url string) (*Result, error) {
		return Check(context.Background(), Options{URL: url, Verifier: k.Verifier, Store: store,
			MaxStale: time.Hour, Now: func() time.Time { return now }})
	}
	start := now
	for _, after := range []time.Duration{0, 30 * time.Minute, time.Hour} {
		now = start.Add(after)
		res, err := stale(srv.URL + "/log/")
		if err != nil || !res.Stale || !res.StaleSince.Equal(start) {
			t.Fatalf("stale for %v (bound 1h): %+v, %v; want stale since %v, no error", after, res, err, start)
		}
	}
	now = start.Add(time.Hour + time.Second)
	res, err := stale(srv.URL + "/log/")
	if !errors.Is(err, ErrStale) || res == nil || !res.Stale {
		t.Fatalf("stale for 1h1s (bound 1h): %+v, %v; want an error wrapping ErrStale", res, err)
	}
	if got := recordedSize(t, store); got != 50 {
		t.Fatalf("recorded size %d, want 50", got)
	}

	// The log serves its latest again: the count starts afresh.
	if res, err := stale(l.Prefix()); err != nil || res.Stale {
		t.Fatalf("the log's latest again: %+v, %v", res, err)
	}
	now = now.Add(2 * time.Hour)
	if res, err := stale(srv.URL + "/log/"); err != nil || !res.Stale || !res.StaleSince.Equal(now) {
		t.Fatalf("stale again after catching up: %+v, %v; want stale since %v, no error", res, err, now)
	}
}

package authn_test

// An introspected token is taken for introspection.recheck (default 30s)
// without asking its issuer again: a token revoked is refused within it.

import (
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestIntrospectionRecheck(t *testing.T) {
	is := authntest.Start(t)
	for _, c := range []struct {
		extra string
		after time.Duration // the revoked token is refused this long after it was asked about
	}{
		{"", 30 * time.Second},
		{"    recheck: 5s\n", 5 * time.Second},
	} {
		cfg, err := decodeAuth(t, is, c.extra)
		if err != nil {
			t.Fatalf("decoding an issuer with %q: %v", c.extra, err)
		}
		clk := &clock{t: time.Now()}
		a := newAuth(t, cfg, clk, nil)
		tok := "opaque-" + c.after.String()
		is.Opaque(tok, is.Claims(resource, "svc"))
		if _, err := a.Authenticate(t.Context(), tok); err != nil {
			t.Fatal(err)
		}
		is.Revoke(tok)
		clk.add(c.after - time.Second)
		if _, err := a.Authenticate(t.Context(), tok); err != nil {
			t.Errorf("%q: the revoked token %s after it was asked about: %v, want it taken without asking", c.extra, c.after-time.Second, err)
		}
		clk.add(time.Second)
		if st, _ := status(func() error { _, err := a.Authenticate(t.Context(), tok); return err }()); st != 401 {
			t.Errorf("%q: the revoked token %s after it was asked about: status %d, want 401", c.extra, c.after, st)
		}
	}
	for _, bad := range []string{"    recheck: 500ms\n", "    recheck: 11m\n"} {
		cfg, err := decodeAuth(t, is, bad)
		if err == nil {
			err = cfg.Check()
		}
		if err == nil {
			t.Errorf("an issuer with %q was taken", bad)
		}
	}
}

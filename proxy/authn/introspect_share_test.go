package authn_test

// The introspection calls an issuer may be asked (20 a second, 40 at
// once) are shared out by where requests come from: a flood of made-up
// tokens from one address uses up its own share, and a new token from
// anywhere else is still asked about.

import (
	"fmt"
	"testing"
	"time"

	"github.com/provlog/provlog/proxy/authn/authntest"
)

func TestIntrospectionSharedBySource(t *testing.T) {
	is := authntest.Start(t)
	c := &clock{t: time.Now()}
	a := newAuth(t, config(is), c, nil)
	from := func(addr, tok string) error {
		r := httptestRequest("Bearer " + tok)
		r.RemoteAddr = addr
		_, err := a.Request(r)
		return err
	}
	unavailable := 0
	for i := range 100 {
		if st, _ := status(from("192.0.2.66:40000", fmt.Sprintf("made-up-%d", i))); st == 503 {
			unavailable++
		}
	}
	if unavailable == 0 {
		t.Fatal("100 made-up tokens at once from one address were all asked about")
	}
	is.Opaque("good-during-flood", is.Claims(resource, "svc-backup"))
	if err := from("198.51.100.7:50000", "good-during-flood"); err != nil {
		t.Errorf("a good token from another address, after a flood from 192.0.2.66: %v", err)
	}
	// The flooding address's share refills in time, as the issuer's does.
	c.add(time.Second)
	is.Opaque("good-from-flooder", is.Claims(resource, "svc-flood"))
	if err := from("192.0.2.66:40001", "good-from-flooder"); err != nil {
		t.Errorf("a good token from the flooding address a second later: %v", err)
	}
}

package server

import (
	"bytes"
	"encoding/hex"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// FuzzInclusionQuery checks that parseInclusionQuery never panics, refuses
// with a 400, and that what it accepts names exactly one entry and survives
// a round trip through a query string.
func FuzzInclusionQuery(f *testing.F) {
	h := "ab" + string(bytes.Repeat([]byte("0f"), 31))
	for _, s := range []string{
		"index=0", "index=18446744073709551615", "index=18446744073709551616", "index=7&size=9",
		"hash=" + h, "hash=" + h + "&size=3", "index=1&hash=" + h, "index=01", "index=%31",
		"index=1&index=2", "index=1;size=2", "size=1", "", "index=1&x=", "hash=%zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		iq, err := parseInclusionQuery(q)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || ae.msg == "" {
				t.Fatalf("parseInclusionQuery(%q): %v is not a 400 with a message", raw, err)
			}
			return
		}
		again := url.Values{}
		if iq.leafHash != nil {
			if len(iq.leafHash) != 32 || q.Has("index") {
				t.Fatalf("parseInclusionQuery(%q) = %+v", raw, iq)
			}
			again.Set("hash", hex.EncodeToString(iq.leafHash))
		} else {
			if !q.Has("index") || iq.index != 0 && q.Get("index")[0] == '0' {
				t.Fatalf("parseInclusionQuery(%q) = %+v", raw, iq)
			}
			again.Set("index", strconv.FormatUint(iq.index, 10))
		}
		if iq.hasSize {
			again.Set("size", strconv.FormatUint(iq.size, 10))
		} else if iq.size != 0 {
			t.Fatalf("parseInclusionQuery(%q) = %+v", raw, iq)
		}
		got, err := parseInclusionQuery(again)
		if err != nil || got.index != iq.index || got.size != iq.size || got.hasSize != iq.hasSize || !bytes.Equal(got.leafHash, iq.leafHash) {
			t.Fatalf("round trip of %q: %+v, %v, want %+v", raw, got, err, iq)
		}
	})
}

// FuzzConsistencyQuery checks parseConsistencyQuery the same way.
func FuzzConsistencyQuery(f *testing.F) {
	for _, s := range []string{"old=0", "old=3&new=5", "old=5&new=3", "new=1", "old=1&old=1", "old=1&y=2", "old=18446744073709551616"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		cq, err := parseConsistencyQuery(q)
		if err != nil {
			var ae *apiError
			if !errors.As(err, &ae) || ae.status != http.StatusBadRequest || ae.msg == "" {
				t.Fatalf("parseConsistencyQuery(%q): %v is not a 400 with a message", raw, err)
			}
			return
		}
		if cq.hasNew && cq.old > cq.new || !cq.hasNew && cq.new != 0 {
			t.Fatalf("parseConsistencyQuery(%q) = %+v", raw, cq)
		}
		if q.Get("old") != strconv.FormatUint(cq.old, 10) {
			t.Fatalf("parseConsistencyQuery(%q) = %+v", raw, cq)
		}
	})
}

// FuzzNoneMatch checks that noneMatch never panics, matches a header that
// lists the tag (strong or weak, among others) or "*", and matches no
// header that holds neither the tag nor "*".
func FuzzNoneMatch(f *testing.F) {
	etag := etagOf('t', []byte("tile"))
	for _, s := range []string{etag, "*", "W/" + etag, `"a", ` + etag, `"a",,"b"`, "", " , ", `W/"`, etag[:10]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		got := noneMatch([]string{v}, etag)
		if !strings.Contains(v, etag) && !strings.Contains(v, "*") && got {
			t.Fatalf("noneMatch(%q) matched %s", v, etag)
		}
		for _, with := range []string{v + "," + etag, etag + " ," + v, v + ", W/" + etag, v + ",*"} {
			if !noneMatch([]string{with}, etag) {
				t.Fatalf("noneMatch(%q) did not match %s", with, etag)
			}
		}
	})
}

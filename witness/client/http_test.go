package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/provlog/provlog/witness"
)

// TestAddCheckpointErrorRedactsURL: a witness whose URL carries
// credentials (a user name alone, an API key in the query) and cannot be
// reached gives an error naming the URL without them: the error reaches
// provlog__status, /healthz and the log. Before, net/http's error repeated
// the URL whole (Go hides only a password).
func TestAddCheckpointErrorRedactsURL(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens: the POST fails to connect
	h, err := NewHTTP("http://apikey-S3cret@"+addr+"/w?token=S3cret2", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.AddCheckpoint(context.Background(), &witness.AddCheckpointRequest{Checkpoint: []byte("o\n1\nAAAA\n\n")})
	if err == nil {
		t.Fatal("a POST to a closed port succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "S3cret") || !strings.Contains(msg, addr) {
		t.Errorf("error %q: want the witness's address without its credentials", msg)
	}
	if _, err := NewHTTP("ftp://user:S3cret@example.org/?k=S3cret2", nil); err == nil || strings.Contains(err.Error(), "S3cret") {
		t.Errorf("NewHTTP of an ftp URL with credentials: %v", err)
	}
}

// TestAddCheckpointRefusalCutsURLCredentials: a witness whose refusal
// quotes the credentials its URL gave the request (an API key as the
// user name, a token in the query), in a 401's message or in a 409's body
// that is not a size, does not get them into the error, which reaches
// provlog__status, /healthz and the log.
func TestAddCheckpointRefusalCutsURLCredentials(t *testing.T) {
	const user, token = "S3CRET-user-61c2", "S3CRET-token-d94e"
	for _, status := range []int{http.StatusUnauthorized, http.StatusConflict} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			u, _, _ := r.BasicAuth()
			w.WriteHeader(status)
			w.Write([]byte("no witness for " + u + " at " + r.URL.String() + "\n"))
		}))
		h, err := NewHTTP(strings.Replace(srv.URL, "http://", "http://"+user+"@", 1)+"/w?token="+token, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.AddCheckpoint(context.Background(), &witness.AddCheckpointRequest{Checkpoint: []byte("o\n1\nAAAA\n\n")})
		srv.Close()
		if err == nil || !strings.Contains(err.Error(), "no witness for") {
			t.Fatalf("%d: %v, want the refusal quoted", status, err)
		}
		for _, s := range []string{user, token} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%d: the error quotes %q: %v", status, s, err)
			}
		}
	}
}

// TestAddCheckpointURLWithQuery: a witness whose URL carries a query (an
// API key) is posted to at its add-checkpoint path with the query kept.
// Before, the path went after the query (/w?token=K/add-checkpoint).
func TestAddCheckpointURLWithQuery(t *testing.T) {
	seen := make(chan string, 2)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.Path + " ? " + r.URL.RawQuery
		w.WriteHeader(http.StatusConflict)
		w.Write([]byte("7\n"))
	}))
	defer srv.Close()
	for _, tc := range []struct{ prefix, want string }{
		{srv.URL + "/w?token=K", "/w/add-checkpoint ? token=K"},
		{srv.URL + "/w/?token=K&b=2", "/w/add-checkpoint ? token=K&b=2"},
	} {
		h, err := NewHTTP(tc.prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.AddCheckpoint(context.Background(), &witness.AddCheckpointRequest{Checkpoint: []byte("o\n1\nAAAA\n\n")})
		var we *witness.Error
		if !errors.As(err, &we) || we.Size != 7 {
			t.Errorf("%s: %v, want the witness's 409 with size 7", tc.prefix, err)
		}
		if got := <-seen; got != tc.want {
			t.Errorf("%s: posted to %q, want %q", tc.prefix, got, tc.want)
		}
	}
}

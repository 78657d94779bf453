package proxy

import (
	"testing"

	"github.com/provlog/provlog/log"
)

// recordArgs is what d's call entry records of the arguments raw.
func recordArgs(t *testing.T, d *downstream, raw string) string {
	t.Helper()
	canon, err := log.Canonicalize([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := d.recordedArgs([]byte(raw), canon)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestEmptyValueNotRemembered: a resources/read of "file:///x?token="
// (an empty redacted value) leaves the server's later records as they
// were: an empty value is in every text, and remembered it had every
// tool name and every argument of the server's later calls withheld.
func TestEmptyValueNotRemembered(t *testing.T) {
	d := &downstream{cfg: ServerConfig{ID: "s", Redact: []string{"token"}}}
	_, secrets := redactURI("file:///x?token=", d.cfg.Redact, false)
	d.secrets.remember(secrets) // as readResource does
	if got := d.secrets.scrub("search_files"); got != "search_files" {
		t.Errorf("tool name recorded as %q, want search_files", got)
	}
	if got, want := recordArgs(t, d, `{"q":"hello"}`), `{"q":"hello"}`; got != want {
		t.Errorf("arguments recorded as %s, want %s", got, want)
	}
}

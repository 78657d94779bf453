package proxy

import (
	"net/http"
	"testing"
)

// TestRefusedDeleteReaped: a DELETE of its own session that the SDK
// refuses (here for an unsupported Mcp-Protocol-Version header) after the
// front marked the session closed leaves a session that admits no call;
// the reaper closes it once it is idle, so that it does not count against
// sessions.max for ever. reapIdle passed over every session marked
// closed, and the SDK's session, which nothing else ends, lived on.
func TestRefusedDeleteReaped(t *testing.T) {
	r := newReapRig(t, false)
	cs := r.session(t)
	req, _ := http.NewRequest(http.MethodDelete, r.front, nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Mcp-Protocol-Version", "1999-01-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("DELETE with an unsupported protocol version: HTTP %d, want the SDK's 400", resp.StatusCode)
	}
	r.reap()
	for ss := range r.p.server.Sessions() {
		if ss.ID() == cs.ID() {
			t.Fatal("the session whose DELETE was refused, which admits no call, is still open after an idle reaper pass")
		}
	}
}

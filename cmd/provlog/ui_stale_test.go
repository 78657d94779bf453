package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestUIStaleTimeline: the page must stop showing the work of an entry
// it left. Here the reader opens a claim, and while its task's history
// is still on the way (a slow server: the test holds the answer) follows
// a link to the tool call, which belongs to no task; the call's page is
// done, then the claim's history arrives. The claim's task history must
// not show under the call's verdict: the timeline, the anchors and the
// step checks check after every wait that their route is still the
// page's.
func TestUIStaleTimeline(t *testing.T) {
	l := newUILog(t, false)
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	stale := make(chan string, 16)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/log/task/"):
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		case strings.HasPrefix(r.URL.Path, "/log/entry/") && r.URL.Path != fmt.Sprintf("/log/entry/%d", l.call) && r.URL.Path != fmt.Sprintf("/log/entry/%d", l.claim):
			// Only the claim's timeline asks for its task's other steps.
			select {
			case stale <- r.URL.Path:
			default:
			}
		}
		l.sc.handler().ServeHTTP(w, r)
	}))
	defer swap.Close()
	defer close(release)
	p, ctx := openPage(t)
	if err := p.Navigate(ctx, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, l.token, l.claim)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-ctx.Done():
		t.Fatal("the page never asked for the claim's task")
	}
	// The reader follows a link to the call while the history loads.
	if err := p.Eval(ctx, fmt.Sprintf(`location.hash = "#entry=%d"`, l.call), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitString(ctx, fmt.Sprintf(`document.body.dataset.done && document.getElementById("verdict").innerText.includes("Entry %d ") ? "yes" : ""`, l.call)); err != nil {
		t.Fatal(err)
	}
	release <- struct{}{}
	select {
	case path := <-stale:
		// The old timeline's checks asked for a step: it was filled in
		// (the checks start as the list is built, right before fill).
		var shown struct {
			Hidden  bool   `json:"hidden"`
			Text    string `json:"text"`
			Verdict string `json:"verdict"`
		}
		if err := p.Eval(ctx, `({hidden: document.getElementById("timeline").hidden, text: document.getElementById("timeline").innerText, verdict: document.getElementById("verdict").innerText})`, &shown); err != nil {
			t.Fatal(err)
		}
		if !shown.Hidden && strings.Contains(shown.Text, "Task history") {
			t.Errorf("after leaving the claim for entry %d (no task's), the page shows the claim's task history under the call's verdict (the old route asked for %s):\nverdict: %.200s\ntimeline: %.400s", l.call, path, shown.Verdict, shown.Text)
		}
	case <-time.After(10 * time.Second):
		// The claim's route stopped: nothing of it was shown.
	}
}

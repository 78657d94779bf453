package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// timelineSteps opens url and returns each timeline step's entry index
// (its link's), text and check.
func timelineSteps(t *testing.T, url string) []struct {
	Text     string `json:"text"`
	Verified string `json:"verified"`
} {
	t.Helper()
	p, ctx := openPage(t)
	if v, txt := verdict(t, ctx, p, url); v != "true" {
		t.Fatalf("%s: data-verified=%s: %s", url, v, txt)
	}
	var steps []struct {
		Text     string `json:"text"`
		Verified string `json:"verified"`
	}
	if err := p.Eval(ctx, `[...document.querySelectorAll("#timeline li")].map(li => ({text: li.innerText, verified: li.querySelector(".check")?.dataset.verified ?? ""}))`, &steps); err != nil {
		t.Fatal(err)
	}
	return steps
}

// taskStep is the index of the first step of kind in the history of l's
// task, as the sidecar serves it.
func taskStep(t *testing.T, l *uiLog, kind string) uint64 {
	t.Helper()
	req, _ := http.NewRequest("GET", l.base+"/log/task/"+l.taskID, nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var task struct {
		History []struct {
			Index uint64 `json:"index"`
			Kind  string `json:"kind"`
		} `json:"history"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&task); err != nil {
		t.Fatal(err)
	}
	for _, s := range task.History {
		if s.Kind == kind {
			return s.Index
		}
	}
	t.Fatalf("task %s has no %s step", l.taskID, kind)
	return 0
}

// rewriteTask serves l's log with /log/task/ answers changed by f.
func rewriteTask(t *testing.T, l *uiLog, f func(history []any)) *httptest.Server {
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/log/task/") {
			l.sc.handler().ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		l.sc.handler().ServeHTTP(rec, r)
		var task map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &task); err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		f(task["history"].([]any))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(task)
	}))
	t.Cleanup(swap.Close)
	return swap
}

// TestUITimelineOrder: the server's history of a task is its word. A
// history listing its steps out of log order (the accept before the
// create), or naming steps past the checkpoint the verdict verified
// against (the server proves the opened entry at an earlier size, and
// links no later checkpoint to it), must not show every step "✓
// verified": each step's index must be past the one before it, and its
// proof in the verdict's tree or one linked to it.
func TestUITimelineOrder(t *testing.T) {
	l := newUILog(t, false)
	t.Run("out of order", func(t *testing.T) {
		swap := rewriteTask(t, l, func(h []any) { h[0], h[1] = h[1], h[0] })
		steps := timelineSteps(t, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, l.token, l.claim))
		if len(steps) < 2 {
			t.Fatalf("%d steps shown", len(steps))
		}
		if steps[0].Verified == "true" && steps[1].Verified == "true" {
			t.Errorf("the history lists the accept before the create and both are marked verified: %q, %q", steps[0].Text, steps[1].Text)
		}
	})
	t.Run("past the checkpoint", func(t *testing.T) {
		// The task's accept, and the size of a checkpoint holding it but
		// not the claim.
		accept := taskStep(t, l, "task.accept")
		var size uint64
		for s := accept + 1; s <= l.claim && size == 0; s++ {
			if _, err := l.sc.store.Checkpoint(context.Background(), s); err == nil {
				size = s
			}
		}
		if size == 0 {
			t.Fatalf("no checkpoint between entries %d and %d", accept, l.claim)
		}
		swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/log/proof/inclusion" && r.URL.RawQuery == "index="+strconv.FormatUint(accept, 10) {
				r.URL.RawQuery += "&size=" + strconv.FormatUint(size, 10)
			}
			// Nor does it link that checkpoint to its later ones.
			if r.URL.Path == "/log/proof/consistency" {
				http.NotFound(w, r)
				return
			}
			l.sc.handler().ServeHTTP(w, r)
		}))
		t.Cleanup(swap.Close)
		steps := timelineSteps(t, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, l.token, accept))
		claim := fmt.Sprintf("entry %d", l.claim)
		found := false
		for _, s := range steps {
			if strings.Contains(s.Text, claim) {
				found = true
				if s.Verified == "true" {
					t.Errorf("the claim (entry %d) lies past the verdict's checkpoint (size %d) and is marked verified: %q", l.claim, size, s.Text)
				}
			}
		}
		if !found {
			t.Fatalf("no step of entry %d shown: %v", l.claim, steps)
		}
	})
}

// TestUIAnchorsEarliest: the anchors' "earliest" row is the smallest
// anchored tree the page linked to the verified checkpoint, not the
// server's first: a server that lists a later anchor first, and before it
// an anchor of a tree that is not the log's, must not have either called
// the earliest.
func TestUIAnchorsEarliest(t *testing.T) {
	l := newUILog(t, true)
	// A second anchor, of a larger tree (the first anchor's entry grew it).
	if _, err := l.sc.anchors.runner.AnchorNow(context.Background()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", l.base+"/log/anchors", nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var anchors []map[string]any
	if err != nil || json.Unmarshal(body, &anchors) != nil || len(anchors) < 2 {
		t.Fatalf("the log's anchors: %s, %v; want two", body, err)
	}
	least, most, holding := 0.0, 0.0, 0
	for _, a := range anchors {
		s := a["size"].(float64)
		most = max(most, s)
		if s > float64(l.claim) {
			if holding++; holding == 1 || s < least {
				least = s
			}
		}
	}
	if holding < 2 {
		t.Fatalf("the log's anchors: %s; want two holding entry %d", body, l.claim)
	}
	smallest := strconv.FormatFloat(least, 'f', -1, 64)
	// The listing reversed, after a forged anchor of a tree holding the
	// entry, past the log's, whose root is no tree's.
	forged := map[string]any{}
	for k, v := range anchors[len(anchors)-1] {
		forged[k] = v
	}
	forged["name"], forged["size"], forged["root"] = "forged", most+1, base64.StdEncoding.EncodeToString(make([]byte, 32))
	list := []any{forged}
	for i := len(anchors) - 1; i >= 0; i-- {
		list = append(list, anchors[i])
	}
	served, _ := json.Marshal(list)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/log/anchors" {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Query().Get("after") == "" {
				w.Write(served)
			} else {
				w.Write([]byte("[]"))
			}
			return
		}
		l.sc.handler().ServeHTTP(w, r)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, l.token, l.claim)); v != "true" {
		t.Fatalf("data-verified=%s: %s", v, txt)
	}
	var earliest []string
	if err := p.Eval(ctx, `[...document.querySelectorAll("#anchors tbody tr")].filter((tr) => tr.cells[0].innerText.includes("earliest")).map((tr) => tr.cells[0].innerText + " | " + tr.cells[1].innerText)`, &earliest); err != nil {
		t.Fatal(err)
	}
	if len(earliest) != 1 || !strings.HasPrefix(earliest[0], smallest+" ") || !strings.Contains(earliest[0], " | ✓") {
		t.Errorf("the rows called earliest: %q; want the one anchor of size %s, linked to the verified checkpoint", earliest, smallest)
	}
}

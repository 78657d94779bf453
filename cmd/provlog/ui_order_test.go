package main

import (
	"context"
	"encoding/json"
	"fmt"
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
// against (the server proves the opened entry at an earlier size), must
// not show every step "✓ verified": each step's index must be past the
// one before it, and in the verdict's tree.
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

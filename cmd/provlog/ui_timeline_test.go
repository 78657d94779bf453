package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUITimelineWords: a server that answers /log/task/<id> with the
// task's true history but rewrites what its steps say (the claim's
// summary, provenance and evidence, the create step's title) must not
// have those words marked "✓ verified". A step's check compares only
// what names its entry (index, leaf hash, kind, actor, task id), so a
// verified step shows its entry's own words (title, summary, evidence,
// time, auth), never the server's.
func TestUITimelineWords(t *testing.T) {
	l := newUILog(t, false)
	const forged = "all 212 tests passed"
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
		for _, s := range task["history"].([]any) {
			step := s.(map[string]any)
			switch step["kind"] {
			case "task.create":
				step["title"] = "delete the audit trail"
			case "task.claim":
				step["summary"] = forged
				step["provenance"] = "observed"
				step["evidence"] = []int{0}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(task)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", swap.URL, l.token, l.taskID))
	if v != "true" {
		t.Fatalf("task %s: data-verified=%s: %s", l.taskID, v, txt)
	}
	var steps []struct {
		Text     string `json:"text"`
		Verified string `json:"verified"`
	}
	if err := p.Eval(ctx, `[...document.querySelectorAll("#timeline li")].map(li => ({text: li.innerText, verified: li.querySelector(".check")?.dataset.verified ?? ""}))`, &steps); err != nil {
		t.Fatal(err)
	}
	if len(steps) == 0 {
		t.Fatalf("no timeline shown")
	}
	for _, s := range steps {
		forgedWords := strings.Contains(s.Text, forged) || strings.Contains(s.Text, "delete the audit trail") || strings.Contains(s.Text, "evidence: entry 0")
		if forgedWords && s.Verified == "true" {
			t.Errorf("a step showing words its entry does not hold is marked verified: %q", s.Text)
		}
	}
}

// TestUITaskLookupOtherEntry: asked for a task (#task=ID), a server
// answers with that task's history whose latest step names the index of
// an entry that is not of the task (here the tool call, which is of no
// task). The page opens the entry at that index, and its verdict must
// fail unless that entry's task_id is the id asked for and its leaf hash
// the one the step names, as it refuses the same substitution for a leaf
// hash lookup.
func TestUITaskLookupOtherEntry(t *testing.T) {
	l := newUILog(t, false)
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
		h := task["history"].([]any)
		h[len(h)-1].(map[string]any)["index"] = l.call
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(task)
	}))
	defer swap.Close()
	p, ctx := openPage(t)
	v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&task=%s", swap.URL, l.token, l.taskID))
	if v == "true" {
		t.Errorf("task %s opened entry %d, which is not of the task, and the verdict is verified: %s", l.taskID, l.call, txt)
	}
}

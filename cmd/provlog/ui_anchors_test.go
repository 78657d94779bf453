package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestUIAnchorPaging serves /log/anchors pages of the wrong shape before,
// around or after the log's real anchor page. Where a next page can still
// be named (by the last anchor in a page with a name, or by one anchor
// not in a list), paging goes on past the wrong page: the real anchor is shown, and what was wrong. A
// page naming no next page stops the paging and says so; a server that
// pages in a circle, or names a new page forever, is stopped (after two
// pages, and at 50) and the page says so. A wrong first page ended the
// paging, and the real anchor after it was never shown; a later page of no
// JSON hid the anchors already read.
func TestUIAnchorPaging(t *testing.T) {
	l := newUILog(t, true)
	req, _ := http.NewRequest("GET", l.base+"/log/anchors", nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	real, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	var anchors []struct {
		Name string `json:"name"`
	}
	if err != nil || json.Unmarshal(real, &anchors) != nil || len(anchors) == 0 {
		t.Fatalf("the log's anchors: %s, %v; want some", real, err)
	}
	lastName := anchors[len(anchors)-1].Name
	// Each case answers a page by the name it starts after ("" for the
	// first); "" is the log's own answer (its one page, or its end).
	type pages func(after string) string
	var (
		served atomic.Pointer[pages]
		asked  atomic.Int64
	)
	swap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/log/anchors" {
			asked.Add(1)
			if body := (*served.Load())(r.URL.Query().Get("after")); body != "" {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, body)
				return
			}
		}
		l.sc.handler().ServeHTTP(w, r)
	}))
	defer swap.Close()
	// wrongFirst answers the first page with first, and the page after
	// "a-1" with the log's own first page.
	wrongFirst := func(first string) pages {
		return func(after string) string {
			switch after {
			case "":
				return first
			case "a-1":
				return string(real)
			}
			return ""
		}
	}
	const shown = "earliest anchor"
	cases := []struct {
		name   string
		pages  pages
		row    bool     // the real anchor is shown
		asked  int64    // pages read
		want   []string // what the section says
		unwant string
	}{
		{"members of no object and of no size, first", wrongFirst(`[7, null, {"name":"a-1"}]`), true, 3,
			[]string{"member 0 of the answer to /log/anchors is a number, not an anchor (an object), and 1 more of its members are no objects either", "1 of the anchors listed name no tree size"}, "paging stopped"},
		{"a last anchor with no name, first", wrongFirst(`[{"name":"a-1","size":"x"},{"size":3}]`), true, 3,
			[]string{"the name of the last anchor in the answer to /log/anchors is missing, not text; the next page starts after member 0"}, "paging stopped"},
		{"one anchor not in a list, first", wrongFirst(`{"name":"a-1","size":"x"}`), true, 3,
			[]string{"the answer to /log/anchors is an object, not an array of anchors; it is read as a list of that one anchor"}, "paging stopped"},
		{"a first page of no array", wrongFirst(`{"anchors":[]}`), false, 1,
			[]string{"the answer to /log/anchors is an object, not an array of anchors; paging stopped there", "paging stopped before the end of the listing"}, ""},
		{"a first page naming no anchor", wrongFirst(`[{"size":"x"}, 5]`), false, 1,
			[]string{"paging stopped there: no anchor in it has a name for the next page to start after"}, ""},
		{"a later page of no JSON", func(after string) string {
			if after == lastName {
				return "<html>"
			}
			return ""
		}, true, 2, []string{"the answer to /log/anchors?after=" + lastName + " is not JSON; paging stopped there"}, ""},
		{"a circle", func(string) string { return `[{"name":"a-1","size":"x"}]` }, false, 2,
			[]string{"the answer to /log/anchors?after=a-1 names as the next page /log/anchors?after=a-1, which was read already; paging stopped there"}, ""},
		{"a new page forever", func(after string) string { return fmt.Sprintf(`[{"name":"a%s-","size":"x"}]`, after) }, false, 50,
			[]string{"paging stopped after 50 pages of anchors", "50 of the anchors listed name no tree size"}, ""},
	}
	p, ctx := openPage(t)
	for _, tc := range cases {
		served.Store(&tc.pages)
		asked.Store(0)
		if v, txt := verdict(t, ctx, p, fmt.Sprintf("%s/ui/#token=%s&entry=%d", swap.URL, l.token, l.claim)); v != "true" {
			t.Errorf("%s: data-verified=%s: %s", tc.name, v, txt)
		}
		var got struct {
			Section string
			Rows    []string
		}
		if err := p.Eval(ctx, `({Section: document.getElementById("anchors").innerText, Rows: [...document.querySelectorAll("#anchors tbody tr")].map(r => r.innerText)})`, &got); err != nil {
			t.Fatal(err)
		}
		if tc.row && (len(got.Rows) != 1 || !strings.Contains(got.Rows[0], shown) || !strings.Contains(got.Rows[0], "✓ a prefix of the verified checkpoint")) {
			t.Errorf("%s: anchor rows %q; want the log's anchor, checked", tc.name, got.Rows)
		}
		if !tc.row && len(got.Rows) != 0 {
			t.Errorf("%s: anchor rows %q; want none", tc.name, got.Rows)
		}
		if n := asked.Load(); n != tc.asked {
			t.Errorf("%s: the page read %d pages of anchors, want %d", tc.name, n, tc.asked)
		}
		for _, w := range tc.want {
			if !strings.Contains(got.Section, w) {
				t.Errorf("%s: the anchors section does not say %q: %s", tc.name, w, got.Section)
			}
		}
		if tc.unwant != "" && strings.Contains(got.Section, tc.unwant) {
			t.Errorf("%s: the anchors section says %q: %s", tc.name, tc.unwant, got.Section)
		}
	}
}

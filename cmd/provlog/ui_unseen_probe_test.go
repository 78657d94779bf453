package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/provlog/provlog/log"
)

// TestUIShownInvisibleProbe: the page promises that "an invisible or
// direction-changing character" in any string it shows becomes a mark
// naming its code point, "so no id can pass for another" (ui.go); its
// list (shown.js unseen) is hand-written and misses characters that show
// as nothing, which the log's own definition (log.Invisible, used for
// actor ids and task titles) has: the variation selectors U+FE00–U+FE0F
// and U+E0100–U+E01EF, the shorthand format controls U+1BCA0–U+1BCA3,
// the musical format characters U+1D173–U+1D17A, the Egyptian format
// controls U+13430–U+1343F, and the blank braille pattern U+2800.
// Observed: "read" + each of U+FE0F, U+FE00, U+E0100, U+1BCA0, U+1D173,
// U+13430, U+2800 + "_file" shows exactly as written, with no mark, so
// a tool a hostile server names "read_file" + U+FE0F (the go-sdk lets a
// server list any tool name) reads on the page as its "read_file". Fix: build unseen from the same classes as log.Invisible
// (\p{Cc}, \p{Cf}, \p{Variation_Selector}, \p{Default_Ignorable_Code_Point},
// U+2800, \p{Zl}, \p{Zp}), not a list of ranges.
func TestUIShownInvisibleProbe(t *testing.T) {
	p, ctx := openBarePage(t)
	var cases []string
	for _, r := range []rune{0xFE0F, 0xFE00, 0xE0100, 0x1BCA0, 0x1D173, 0x13430, 0x2800} {
		if log.Invisible(r) == "" {
			t.Fatalf("U+%04X is not invisible to the log", r)
		}
		cases = append(cases, "read"+string(r)+"_file")
	}
	cj, _ := json.Marshal(cases)
	var unmarked []string
	script := `(async () => {
		const m = await import("/ui/shown.js");
		const text = (s) => m.shown(s).map((n) => typeof n === "string" ? n : n.textContent).join("");
		return ` + string(cj) + `.filter((s) => text(s) === s).map((s) => [...s].map((c) => "U+" + c.codePointAt(0).toString(16).toUpperCase()).filter((c) => c.length > 4 && c !== "U+5F").join(" "));
	})()`
	if err := p.Eval(ctx, script, &unmarked); err != nil {
		t.Fatal(err)
	}
	if len(unmarked) > 0 {
		t.Errorf("the page shows these characters, which show as nothing, unmarked: %s", fmt.Sprint(unmarked))
	}
}

// TestUIShownLatinLookalikesProbe: the page's look-alike marks are by
// script (shown.js: a word mixing confusable scripts, or wholly of
// another script's letters that look Latin), so a Latin-script letter
// that passes for another Latin letter is never marked: "ɑdmin" with
// U+0251 LATIN SMALL LETTER ALPHA, "ɡithub" with U+0261 LATIN SMALL
// LETTER SCRIPT G, "ǀogin" with U+01C0 LATIN LETTER DENTAL CLICK (an "l"),
// "ıd" with U+0131 dotless i. Observed: each shows as written, with no
// mark, though Unicode's confusables data (which provlog vendors for
// actor ids, proxy/authn/confusables_table.go: {0x0251, "a"},
// {0x0261, "g"}) maps each to the ASCII letter it passes for; so a tool,
// server-given name or title "ɑdmin" reads on the page as "admin",
// against ui.go's "no id can pass for another". Fix: mark a letter that
// confusables.txt maps to an ASCII letter other than itself in a word
// of ASCII letters, whatever its script (the table the Go side uses,
// shipped to the page).
func TestUIShownLatinLookalikesProbe(t *testing.T) {
	p, ctx := openBarePage(t)
	cases := []string{"\u0251dmin", "\u0261ithub", "\u01C0ogin", "\u0131d"}
	cj, _ := json.Marshal(cases)
	var unmarked []string
	script := `(async () => {
		const m = await import("/ui/shown.js");
		const text = (s) => m.shown(s).map((n) => typeof n === "string" ? n : n.textContent).join("");
		return ` + string(cj) + `.filter((s) => text(s) === s);
	})()`
	if err := p.Eval(ctx, script, &unmarked); err != nil {
		t.Fatal(err)
	}
	if len(unmarked) > 0 {
		t.Errorf("the page shows these words, each passing for an ASCII word, unmarked: %q", unmarked)
	}
}

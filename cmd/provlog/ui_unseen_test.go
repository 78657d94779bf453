package main

import (
	"encoding/json"
	"fmt"
	"testing"
	"unicode"

	"github.com/provlog/provlog/log"
)

// TestUIShownInvisible: the page promises that "an invisible or
// direction-changing character" in any string it shows becomes a mark
// naming its code point, "so no id can pass for another" (ui.go). Each
// of these shows as nothing (variation selectors, shorthand, musical and
// Egyptian format controls, the blank braille pattern, line and
// paragraph separators), and a tool a hostile server names "read_file"
// + U+FE0F must not read on the page as "read_file". The page's classes
// are log.Invisible's, and every code point the log calls invisible the
// page marks, save where the browser's Unicode has assigned what Go's
// (an older edition) has not.
func TestUIShownInvisible(t *testing.T) {
	p, ctx := openBarePage(t)
	var cases []string
	for _, r := range []rune{0xFE0F, 0xFE00, 0xE0100, 0x1BCA0, 0x1D173, 0x13430, 0x2800, 0x2028, 0x2029} {
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
	// Every code point, as ranges of those the page marks (one string of
	// each alone).
	var ranges [][2]rune
	all := `(async () => {
		const m = await import("/ui/shown.js");
		const out = [];
		for (let c = 0; c <= 0x10FFFF; c++) {
			if (c >= 0xD800 && c <= 0xDFFF) continue;
			const s = String.fromCodePoint(c);
			if (m.shown(s).length === 1 && m.shown(s)[0] === s) continue;
			const last = out[out.length - 1];
			if (last && last[1] === c - 1) last[1] = c;
			else out.push([c, c]);
		}
		return out;
	})()`
	if err := p.Eval(ctx, all, &ranges); err != nil {
		t.Fatal(err)
	}
	marked := map[rune]bool{}
	for _, r := range ranges {
		for c := r[0]; c <= r[1]; c++ {
			marked[c] = true
		}
	}
	var missed []string
	for c := rune(0); c <= unicode.MaxRune; c++ {
		if c >= 0xD800 && c <= 0xDFFF || c == '\t' || c == '\n' {
			continue
		}
		// The page's other marks (look-alike letters) are not this
		// test's; a letter of a newer Unicode than Go's is assigned to
		// the browser and not to the log.
		if log.Invisible(c) != "" && !marked[c] && !unassignedInGo(c) {
			missed = append(missed, fmt.Sprintf("U+%04X", c))
		}
	}
	if len(missed) > 0 {
		t.Errorf("%d code points the log calls invisible are shown unmarked: %.400s", len(missed), fmt.Sprint(missed))
	}
}

// unassignedInGo is whether c is unassigned in Go's Unicode tables.
func unassignedInGo(c rune) bool {
	return unicode.Is(unicode.Categories["Cn"], c)
}

// TestUIShownLatinLookalikes: a Latin-script letter that passes for
// another Latin letter ("ɑdmin" with U+0251 LATIN SMALL LETTER ALPHA,
// "ɡithub" with U+0261, "ǀogin" with U+01C0 LATIN LETTER DENTAL CLICK,
// "ıd" with U+0131 dotless i) is marked, though marks by script cannot
// see it: the page's table (confusables.js) is made from the one the
// sidecar reads actor ids with (proxy/authn, TestConfusablesJS).
func TestUIShownLatinLookalikes(t *testing.T) {
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

// TestUIShownLanguageWords: þ and ı are letters of Icelandic and Turkish,
// and in words of those languages (a sentence holding their other letters:
// ð, é, ç, ş...) they are no look-alikes and are not marked. In a mostly
// ASCII identifier they still are, whatever text is around it: "admın"
// alone, "deploy_sıte" and "þaypal_login" in such sentences.
func TestUIShownLanguageWords(t *testing.T) {
	p, ctx := openBarePage(t)
	plain := []string{"Ég þarf að þýða þetta", "Kapıyı kapat ve ışığı aç", "Þetta er íslenska"}
	marked := []string{"adm\u0131n", "Kapıyı aç: deploy_s\u0131te", "Ég þarf að skrá mig á \u00feaypal_login", "\u0131d"}
	pj, _ := json.Marshal(plain)
	mj, _ := json.Marshal(marked)
	var got struct {
		Marked   []string `json:"marked"`
		Unmarked []string `json:"unmarked"`
	}
	script := `(async () => {
		const m = await import("/ui/shown.js");
		const text = (s) => m.shown(s).map((n) => typeof n === "string" ? n : n.textContent).join("");
		return { marked: ` + string(pj) + `.filter((s) => text(s) !== s).map(text), unmarked: ` + string(mj) + `.filter((s) => text(s) === s) };
	})()`
	if err := p.Eval(ctx, script, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.Marked) > 0 {
		t.Errorf("Icelandic and Turkish words shown with look-alike marks: %q", got.Marked)
	}
	if len(got.Unmarked) > 0 {
		t.Errorf("identifiers passing for ASCII ones shown unmarked: %q", got.Unmarked)
	}
}

package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestTableCurrent: package authn's table is what the vendored lines
// give, so neither was changed without the other.
func TestTableCurrent(t *testing.T) {
	data, err := os.ReadFile("confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate(data)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../../confusables_table.go")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			t.Fatalf("proxy/authn/confusables_table.go is not what confusables.txt gives; run go generate in proxy/authn. Line %d is\n\t%s\nwant\n\t%s", i+1, gl, wl)
		}
	}
}

// TestVendoredLines: the vendored file is the published one cut down as
// -subset cuts it, header and all, and the cut keeps exactly the
// mappings to printable ASCII and to the middle dot, byte for byte.
func TestVendoredLines(t *testing.T) {
	data, err := os.ReadFile("confusables.txt")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# confusables.txt\n", "Unicode, Inc.", "# Unicode Security Mechanisms for UTS #39\n", "# Version: ", note} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("vendored confusables.txt lacks %q of the published header and provlog's note", want)
		}
	}

	whole := "\ufeff# confusables.txt\r\n# Version: 99.0.0\r\n#\r\n" +
		"05AD ;\t0596 ;\tMA\t# ( \u05ad → \u0596 ) HEBREW ACCENT DEHI → HEBREW ACCENT TIPEHA\t# \r\n" +
		"\r\n" +
		"043E ;\t006F ;\tMA\t# ( о → o ) CYRILLIC SMALL LETTER O → LATIN SMALL LETTER O\t# \r\n" +
		"2488 ;\t0031 002E ;\tMA\t#* ( ⒈ → l. ) DIGIT ONE FULL STOP → DIGIT ONE, FULL STOP\t# \r\n" +
		"00A0 ;\t0020 ;\tMA\t#* (   →   ) NO-BREAK SPACE → SPACE\t# \r\n" +
		"2022 ;\t00B7 ;\tMA\t#* ( • → · ) BULLET → MIDDLE DOT\t# →•→\r\n"
	got, err := subset([]byte(whole))
	if err != nil {
		t.Fatal(err)
	}
	want := "# confusables.txt\n# Version: 99.0.0\n#\n" + note +
		"043E ;\t006F ;\tMA\t# ( о → o ) CYRILLIC SMALL LETTER O → LATIN SMALL LETTER O\t# \n" +
		"2488 ;\t0031 002E ;\tMA\t#* ( ⒈ → l. ) DIGIT ONE FULL STOP → DIGIT ONE, FULL STOP\t# \n" +
		"2022 ;\t00B7 ;\tMA\t#* ( • → · ) BULLET → MIDDLE DOT\t# →•→\n"
	if string(got) != want {
		t.Errorf("subset =\n%s\nwant\n%s", got, want)
	}
	if _, err := subset([]byte("# no data\n")); err == nil {
		t.Error("subset of a file without mappings passed")
	}
}

// TestSkeletons: targets are folded to lower case and mapped once more
// where folding makes a source ("M" to "m" to "rn"); the middle dot and
// the additions read as they say; data that is not a prototype mapping,
// or a target outside the subset, is refused.
func TestSkeletons(t *testing.T) {
	_, ms, err := parse([]byte("# Version: 1.0.0\n" +
		"006D ;\t0072 006E ;\tMA\t# ( m → rn ) LATIN SMALL LETTER M → LATIN SMALL LETTER R, LATIN SMALL LETTER N\t#\n" +
		"041C ;\t004D ;\tMA\t# ( М → M ) CYRILLIC CAPITAL LETTER EM → LATIN CAPITAL LETTER M\t#\n" +
		"0420 ;\t0050 ;\tMA\t# ( Р → P ) CYRILLIC CAPITAL LETTER ER → LATIN CAPITAL LETTER P\t#\n" +
		"2022 ;\t00B7 ;\tMA\t#* ( • → · ) BULLET → MIDDLE DOT\t#\n" +
		"06D4 ;\t002D ;\tMA\t#* ( ۔ → - ) ARABIC FULL STOP → HYPHEN-MINUS\t#\n"))
	if err != nil {
		t.Fatal(err)
	}
	es, err := skeletons(ms)
	if err != nil {
		t.Fatal(err)
	}
	got := map[rune]string{}
	for i, e := range es {
		got[e.from] = e.to
		if i > 0 && es[i-1].from >= e.from {
			t.Errorf("U+%04X after U+%04X: not in code point order", e.from, es[i-1].from)
		}
	}
	for from, want := range map[rune]string{'m': "rn", 'М': "rn", 'Р': "p", '•': ".", '·': ".", '。': ".", '۔': "."} {
		if got[from] != want {
			t.Errorf("U+%04X reads as %q, want %q", from, got[from], want)
		}
	}

	for name, data := range map[string]string{
		"not a prototype": "0031 ;\t0049 ;\tMA\t#\n0049 ;\t006C ;\tMA\t#\n",
		"twice":           "0031 ;\t006C ;\tMA\t#\n0031 ;\t006C ;\tMA\t#\n",
	} {
		_, ms, err := parse([]byte("# Version: 1.0.0\n" + data))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := skeletons(ms); err == nil {
			t.Errorf("%s: skeletons passed", name)
		}
	}
	for name, data := range map[string]string{
		"not ascii":  "# Version: 1.0.0\n0430 ;\t0431 ;\tMA\t#\n",
		"no version": "0430 ;\t0061 ;\tMA\t#\n",
		"malformed":  "# Version: 1.0.0\n0430 ;\t0061\t#\n",
		"bad hex":    "# Version: 1.0.0\n04X0 ;\t0061 ;\tMA\t#\n",
	} {
		if _, err := generate([]byte(data)); err == nil {
			t.Errorf("%s: generate passed", name)
		}
	}
}

package witness

import (
	"bytes"
	"encoding/base64"
	"reflect"
	"strings"
	"testing"
)

// The example request of c2sp.org/tlog-witness@v1.0.0.
const specRequest = `old 20852014
PlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=
jrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=
5+pKlUdi2LeF/BcMHBn+Ku6yhPGNCswZZD1X/6QgPd8=
/6WVhPs2CwSsb5rYBH5cjHV/wSmA79abXAwhXw3Kj/0=

example.com/behind-the-sofa
20852163
CsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=

— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=
— example.com/behind-the-sofa opLqBQsREYCgu6xQkYQwJr9fo45a62DN9EdmHXnZdXNqlcVGlCum2Wks+49/V6267UEjw6QUXTS5Rovnzv++qbSzm9Q=
`

func TestParseAddCheckpoint(t *testing.T) {
	r, err := ParseAddCheckpoint([]byte(specRequest))
	if err != nil {
		t.Fatalf("spec example: %v", err)
	}
	if r.OldSize != 20852014 || len(r.Proof) != 4 || r.Origin() != "example.com/behind-the-sofa" {
		t.Errorf("spec example parsed as old %d, %d proof lines, origin %q", r.OldSize, len(r.Proof), r.Origin())
	}
	if !strings.HasPrefix(string(r.Checkpoint), "example.com/behind-the-sofa\n20852163\n") {
		t.Errorf("checkpoint %q", r.Checkpoint)
	}
	if r.String() != specRequest {
		t.Errorf("String() does not give the request back:\n%s", r.String())
	}

	cp := "o\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\n— o AAAAAAA=\n"
	h := base64.StdEncoding.EncodeToString(make([]byte, 32))
	ok := []string{
		"old 0\n\n" + cp,
		"old 1\n" + h + "\n\n" + cp,
		"old 18446744073709551615\n\n" + cp,
		"old 5\n" + strings.Repeat(h+"\n", 63) + "\n" + cp,
	}
	for _, s := range ok {
		r, err := ParseAddCheckpoint([]byte(s))
		if err != nil {
			t.Errorf("ParseAddCheckpoint(%q): %v", s, err)
			continue
		}
		if r.String() != s {
			t.Errorf("round trip of %q gave %q", s, r.String())
		}
	}
	for _, tc := range []struct{ why, body string }{
		{"empty", ""},
		{"no newline", "old 0"},
		{"no old line", "\n" + cp},
		{"leading zero", "old 01\n\n" + cp},
		{"negative", "old -1\n\n" + cp},
		{"plus sign", "old +1\n\n" + cp},
		{"two spaces", "old  1\n\n" + cp},
		{"too large", "old 18446744073709551616\n\n" + cp},
		{"upper case", "OLD 1\n\n" + cp},
		{"CRLF", "old 1\r\n\r\n" + cp},
		{"no blank line", "old 0\n" + cp},
		{"no checkpoint", "old 0\n\n"},
		{"checkpoint without final newline", "old 0\n\n" + strings.TrimSuffix(cp, "\n")},
		{"short hash", "old 1\n" + base64.StdEncoding.EncodeToString(make([]byte, 31)) + "\n\n" + cp},
		{"long hash", "old 1\n" + base64.StdEncoding.EncodeToString(make([]byte, 33)) + "\n\n" + cp},
		{"unpadded hash", "old 1\n" + strings.TrimRight(h, "=") + "\n\n" + cp},
		{"URL-safe hash", "old 1\n" + strings.Repeat("_", 43) + "=\n\n" + cp},
		{"hash with trailing space", "old 1\n" + h + " \n\n" + cp},
		{"64 proof lines", "old 5\n" + strings.Repeat(h+"\n", 64) + "\n" + cp},
		{"oversized", "old 0\n\n" + cp + strings.Repeat("x", MaxRequestSize)},
	} {
		if _, err := ParseAddCheckpoint([]byte(tc.body)); err == nil {
			t.Errorf("%s: ParseAddCheckpoint(%.60q) succeeded", tc.why, tc.body)
		}
	}
}

func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add([]byte(specRequest))
	h := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32))
	f.Add([]byte("old 0\n\nexample.com/a\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— example.com/a AAAAAAA=\n"))
	f.Add([]byte("old 3\n" + h + "\n" + h + "\n\nx\n"))
	f.Add([]byte("old 1\n\n\n\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAddCheckpoint(body)
		if err != nil {
			return
		}
		// The parser accepts one spelling only: what String writes.
		if got := r.String(); got != string(body) {
			t.Fatalf("String() = %q, want the input %q", got, body)
		}
		r2, err := ParseAddCheckpoint([]byte(r.String()))
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("re-parse: %v, %+v != %+v", err, r2, r)
		}
		if len(r.Proof) > MaxProofLines || len(r.Checkpoint) == 0 || r.Checkpoint[len(r.Checkpoint)-1] != '\n' {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestAddCosignatures(t *testing.T) {
	cp := "o\n1\n" + base64.StdEncoding.EncodeToString(make([]byte, 32)) + "\n\n— o AAAAAAA=\n"
	a := "— w1 AQIDBAUG\n"
	b := "— w2 BwgJCgsM\n"
	// A second line by w1's key (same name and key ID, another
	// signature) and one by the log's key are left out.
	got, err := AddCosignatures([]byte(cp), []byte(a), []byte(a+b), []byte("— o AAAAAAA=\n"), []byte("— w1 AQIDBAcH\n"), []byte("— o AAAAAAE=\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := cp + a + b; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"", "— w1\n", "— w1 AQID", "- w1 AQIDBAUG\n", "— w+1 AQIDBAUG\n", "— w1 !!!!\n", "— w1 AQ==\n"} {
		if _, err := AddCosignatures([]byte(cp), []byte(bad)); err == nil {
			t.Errorf("AddCosignatures accepted %q", bad)
		}
	}
	if _, err := AddCosignatures([]byte("o\n1\n"), []byte(a)); err == nil {
		t.Error("AddCosignatures accepted a note without signatures")
	}
}

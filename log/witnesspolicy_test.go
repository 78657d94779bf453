package log_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest"
)

func TestParseWitnessPolicy(t *testing.T) {
	ws, _ := cosigners(t, 3)
	keys := []string{ws[0].Verifier().String(), ws[1].Verifier().String(), ws[2].Verifier().String()}
	text := log.FormatWitnessPolicy(keys, 2)
	if want := "threshold 2\n" + strings.Join(keys, "\n") + "\n"; string(text) != want {
		t.Fatalf("FormatWitnessPolicy = %q, want %q", text, want)
	}
	p, err := log.ParseWitnessPolicy(text)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range p.Witnesses {
		names = append(names, w.Name())
	}
	if p.Threshold != 2 || !slices.Equal(names, []string{"witness.example/w0", "witness.example/w1", "witness.example/w2"}) {
		t.Errorf("parsed threshold %d, witnesses %v", p.Threshold, names)
	}
	for _, tc := range []struct{ name, text, want string }{
		{"no threshold line", strings.Join(keys, "\n") + "\n", `"threshold K" line`},
		{"no witnesses", "threshold 0\n", `"threshold K" line`},
		{"threshold not a number", "threshold two\n" + keys[0] + "\n", `"threshold K" line`},
		{"threshold with a sign", "threshold +1\n" + keys[0] + "\n", `"threshold K" line`},
		{"no final newline", strings.TrimSuffix(string(text), "\n"), "one witness key a line"},
		{"a blank line", string(text) + "\n", `witness key ""`},
		{"a CRLF line", strings.Replace(string(text), "\n", "\r\n", 2), "witness key"},
		{"threshold over the witnesses", string(log.FormatWitnessPolicy(keys, 4)), "threshold 4 is not between 0 and the 3 witnesses"},
		{"a key twice", string(log.FormatWitnessPolicy([]string{keys[0], keys[0]}, 1)), "is listed twice"},
		{"not a key", "threshold 1\nnot-a-key\n", `witness key "not-a-key"`},
	} {
		if _, err := log.ParseWitnessPolicy([]byte(tc.text)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestCosigners(t *testing.T) {
	logS, logV := logtest.NewKey(t, "log.example/cosigners")
	ws, wvs := cosigners(t, 3)
	p := log.WitnessPolicy{Witnesses: wvs, Threshold: 2}
	outsider, _ := cosigners(t, 1)
	for _, tc := range []struct {
		name string
		by   []note.Signer
		want []string
	}{
		{"two of three", []note.Signer{ws[2], ws[0]}, []string{"witness.example/w0", "witness.example/w2"}},
		{"one of three: short, not an error", []note.Signer{ws[1]}, []string{"witness.example/w1"}},
		{"an unlisted witness is ignored", []note.Signer{ws[1], outsider[0]}, []string{"witness.example/w1"}},
	} {
		_, _, msg := cosignTree(t, 5, logS, tc.by...)
		cp, got, err := p.Cosigners(msg, logV)
		if err != nil || cp.Size != 5 || !slices.Equal(got, tc.want) {
			t.Errorf("%s: Cosigners = size %d, %v, %v; want %v", tc.name, cp.Size, got, err, tc.want)
		}
	}
	// A listed witness whose cosignature does not verify is an error.
	_, _, msg := cosignTree(t, 5, logS, ws[0], ws[1])
	if _, _, err := p.Cosigners(logtest.CorruptSignature(t, msg, "witness.example/w1"), logV); err == nil || !strings.Contains(err.Error(), "witness.example/w1") {
		t.Errorf("tampered cosignature: error %v", err)
	}
	// No witnesses: the log's signature alone is checked.
	if _, got, err := (log.WitnessPolicy{}).Cosigners(msg, logV); err != nil || got != nil {
		t.Errorf("empty policy: %v, %v", got, err)
	}
	if _, _, err := p.Cosigners(dropSig(t, msg, logV.Name()), logV); err == nil {
		t.Error("a checkpoint the log did not sign was accepted")
	}
}

// FuzzParseWitnessPolicy checks that ParseWitnessPolicy never panics and
// that a policy it accepts is usable and prints back to the same bytes.
func FuzzParseWitnessPolicy(f *testing.F) {
	k1 := "witness.example/w1+e75f6532+BAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4"
	k2 := "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
	f.Add([]byte("threshold 1\n" + k1 + "\n"))
	f.Add([]byte("threshold 2\n" + k1 + "\n" + k2 + "\n"))
	f.Add([]byte("threshold 0\n" + k1 + "\n"))
	f.Add([]byte(k1 + "\n" + k2 + "\n"))
	f.Add([]byte("threshold 3\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := log.ParseWitnessPolicy(b)
		if err != nil {
			return
		}
		if err := p.Check(); err != nil {
			t.Fatalf("accepted a policy that does not hold: %v", err)
		}
		var keys []string
		for _, w := range p.Witnesses {
			keys = append(keys, w.(*log.CosignatureVerifier).String())
		}
		if out := log.FormatWitnessPolicy(keys, p.Threshold); !bytes.Equal(out, b) {
			t.Fatalf("accepted %q, which prints back as %q", b, out)
		}
	})
}

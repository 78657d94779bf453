package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/provlog/provlog/log"
)

// BenchmarkScrub: what scrubbing costs a result (scrubJSON, run on every
// kept result and entry text when redaction is configured) and a line of
// a server's stderr (scrub), holding none of eight redacted values or one
// of them, in ASCII text and in text that is not all ASCII.
func BenchmarkScrub(b *testing.B) {
	var secrets []string
	for i := range 8 {
		secrets = appendSecrets(secrets, fmt.Sprintf("S3CRET-%d-Up%d", i, i*7))
	}
	for _, tc := range []struct{ name, word, with string }{
		{"ASCII", "lorem ipsum dolor ", ""},
		{"ASCIIHolding", "lorem ipsum dolor ", "s3cret-3-UP21"},
		{"Unicode", "l\u00f6rem \u00eepsum d\u00f8lor ", ""},
	} {
		text := strings.Repeat(tc.word, 16<<10/len(tc.word)) + tc.with
		canon, err := log.Canonicalize([]byte(`{"content":[{"type":"text","text":` + mustJSON(text) + `}]}`))
		if err != nil {
			b.Fatal(err)
		}
		b.Run("Result"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(canon)))
			for b.Loop() {
				scrubJSON(canon, secrets)
			}
		})
		line := text[len(text)-200:]
		b.Run("Line"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				scrub(line, secrets)
			}
		})
	}
}

package source

import "testing"

// FuzzExtract reads a release out of a source's untrusted answer: it must
// never panic, whatever the document and the path.
func FuzzExtract(f *testing.F) {
	f.Add([]byte(`{"data":{"meta":{"dataVersion":{"year":"26","month":"03"}}}}`), "data.meta.dataVersion.year")
	f.Add([]byte(`{"a":[{"b":"1"}]}`), "a.0.b")
	f.Add([]byte(`{"v":{"x":"1","y":2}}`), "{v.x}-{v.y}")
	f.Add([]byte(`[]`), "0.1.2")
	f.Fuzz(func(t *testing.T, doc []byte, path string) {
		extract(doc, path)
	})
}

package otlp

import (
	"context"
	"strings"
	"testing"
)

// TestErrorBodyCutsCredentials: a receiver whose refusal quotes the
// credentials it was sent (the configured Authorization header's token,
// an API key in the URL's query) does not get them into the export's
// error, which the sidecar logs: each is cut out of the body's text
// quoted there, refused or to be retried.
func TestErrorBodyCutsCredentials(t *testing.T) {
	const token, key = "S3CRET-tok-a41f", "S3CRET-key-90be"
	for _, status := range []int{401, 503} {
		rcv := newReceiver(t, status)
		rcv.echo = true
		e, err := New(Config{URL: rcv.url() + "?api-key=" + key, Headers: map[string]string{"Authorization": "Bearer " + token}, Retry: Retry{Disabled: true}})
		if err != nil {
			t.Fatal(err)
		}
		err = e.ExportSpans(context.Background(), testSpans()[:1])
		if err == nil || !strings.Contains(err.Error(), "no tenant for") {
			t.Fatalf("%d: export: %v, want the receiver's refusal", status, err)
		}
		for _, s := range []string{token, key} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%d: the error quotes %q: %v", status, s, err)
			}
		}
	}
}

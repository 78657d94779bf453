package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logtest/proctest"
	"github.com/provlog/provlog/witness/client"
	"github.com/provlog/provlog/witness/witnesstest"
)

// TestServeAmbiguousVKeys: a log whose vkeys list one key twice (or two
// keys of one name and key ID) made note.Open refuse every checkpoint of
// the log as "ambiguous key" (400), from a witness that had started and
// served as if all was well. serve must refuse such a config, naming the
// key, and serve nothing.
func TestServeAmbiguousVKeys(t *testing.T) {
	k := witnesstest.NewKey(t, "log.example/dup")
	l := witnesstest.NewLog(t, k, "honest")
	cfgPath, vkey := witnessSetup(t, k)
	v, _ := log.NewCosignatureVerifier(vkey)
	cfg := fmt.Sprintf("key: witness.key\ndata: state\nlogs:\n  - origin: %s\n    vkeys: [%q, %q]\n", k.Verifier.Name(), k.VKey, k.VKey)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr proctest.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--config", cfgPath, "--http", "127.0.0.1:0"}, &bytes.Buffer{}, &stderr)
	}()
	for {
		select {
		case code := <-done:
			if code != 1 || !strings.Contains(stderr.String(), "listed twice") {
				t.Fatalf("serve exited %d: %s; want 1 naming the key listed twice", code, stderr.String())
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(cfgPath), "state", "db")); err == nil {
				t.Errorf("serve refused the config but created its store")
			}
			return
		default:
		}
		if m := addrRE.FindStringSubmatch(stderr.String()); m != nil {
			h, err := client.NewHTTP("http://"+m[1], nil)
			if err != nil {
				t.Fatal(err)
			}
			_, err = client.NewWitness(h, v, l.Store).Cosign(ctx, l.Grow(t, 3))
			cancel()
			<-done
			t.Fatalf("serve started with a vkey listed twice; the log's checkpoint of size 3 got: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

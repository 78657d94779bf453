// Package otlptest runs the OpenTelemetry Collector's own OTLP receiver
// (tools/otelrecv, built by its install.sh, named by PROVLOG_OTELRECV)
// for the trace tests of cmd/internal/otlp and cmd/provlog, and reads
// back what it accepted: spans judged as a collector received them, not
// as a receiver of our own decodes them.
//
// Test code only; nothing in the product imports it.
package otlptest

import (
	"bufio"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/provlog/provlog/log/logtest/proctest"
)

// EnvBinary names the otelrecv binary.
const EnvBinary = "PROVLOG_OTELRECV"

// A Collector is a running otelrecv, which appends each batch it accepts
// to a file.
type Collector struct {
	// URL is the receiver's base, http://host:port; OTLP/HTTP traces go to
	// URL+"/v1/traces".
	URL string

	out    string
	stderr proctest.Buffer
}

// Start starts otelrecv on a free loopback port and stops it when t
// ends. Without the binary t is skipped, or failed under CI=true.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin := proctest.Program(t, EnvBinary, `eval "$(bash tools/otelrecv/install.sh)"`)
	c := &Collector{out: filepath.Join(t.TempDir(), "spans.bin")}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-out", c.out)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = &c.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n') // its address, once it listens
	if err != nil {
		t.Fatalf("otelrecv did not start: %v: %s", err, c.stderr.String())
	}
	c.URL = "http://" + strings.TrimSpace(line)
	return c
}

// Stderr returns what otelrecv has printed on stderr.
func (c *Collector) Stderr() string { return c.stderr.String() }

// Batches returns the batches otelrecv has accepted so far, in order,
// each an ExportTraceServiceRequest (or TracesData, the same on the wire)
// in protobuf. A batch still being written is left out.
func (c *Collector) Batches(t testing.TB) [][]byte {
	t.Helper()
	b, err := os.ReadFile(c.out)
	if err != nil {
		t.Fatal(err)
	}
	var batches [][]byte
	for len(b) >= 4 {
		n := binary.BigEndian.Uint32(b)
		if uint64(len(b)-4) < uint64(n) {
			break
		}
		batches = append(batches, b[4:4+n])
		b = b[4+n:]
	}
	return batches
}

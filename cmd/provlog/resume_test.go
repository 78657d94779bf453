package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// faultChildResumeEnv makes the fault child wait, after its stop report,
// for a line on stdin (space was freed), then for the log to resume on its
// own, and append 20 entries more.
const faultChildResumeEnv = "PROVLOG_FAULT_CHILD_RESUME"

// resumeReport is the resuming fault child's last line.
type resumeReport struct {
	Error    string `json:"error"`
	Receipts int    `json:"receipts"`
	Waited   string `json:"waited"`
}

// resumeChild is the rest of the fault child in resume mode.
func resumeChild(sc *sidecar, out *bufio.Writer) int {
	bufio.NewReader(os.Stdin).ReadString('\n')
	var rep resumeReport
	t0 := time.Now()
	for sc.seq.Err() != nil && time.Since(t0) < time.Minute {
		time.Sleep(10 * time.Millisecond)
	}
	rep.Waited = time.Since(t0).Round(time.Millisecond).String()
	for i := range 20 {
		b := callEntry("fault", "append", map[string]any{"resumed": i})
		r, err := sc.seq.Append(context.Background(), b)
		if err != nil {
			rep.Error = err.Error()
			break
		}
		rep.Receipts++
		line, _ := json.Marshal(handedOut{Index: r.Index, LeafHash: hex.EncodeToString(r.Extra), Checkpoint: base64.StdEncoding.EncodeToString(r.Checkpoint)})
		out.Write(append(line, '\n'))
	}
	line, _ := json.Marshal(rep)
	fmt.Fprintf(out, "RESUMED %s\n", line)
	out.Flush()
	return 0
}

// TestFullDiskResumesInPlace runs a sidecar process on a 24 MiB tmpfs
// until the disk fills (appends refused "disk full", /healthz 503), grows
// the tmpfs while the same process runs, and sees the log resume on its
// own: no restart, the next appends acknowledged. Then the disk is filled
// again and a sidecar started on it (it opens read-only, refusing
// appends) resumes once the filler is removed. Every acknowledged entry
// and checkpoint, from before the faults and after, is in one log that
// audits clean.
func TestFullDiskResumesInPlace(t *testing.T) {
	mnt, data, k := smallDisk(t, "provlog.test/resume")
	got := runResumeChild(t, data, func() {
		if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
			t.Fatalf("growing the tmpfs: %v: %s", err, out)
		}
	})
	filler := fill(t, mnt)
	got = append(got, runResumeChild(t, data, func() { os.Remove(filler) })...)
	checkAfterCrash(t, data, k, got)
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"audit", "--data", data}, &out, &errb); code != 0 {
		t.Fatalf("audit: exit %d: %s%s", code, out.String(), errb.String())
	}
}

// runResumeChild runs the fault child in resume mode on data: once it
// stopped on the full disk, free makes room, and the child must resume and
// take 20 appends. It returns every receipt handed out.
func runResumeChild(t *testing.T, data string, free func()) []handedOut {
	t.Helper()
	cmd := childCmd(t, faultChildEnv+"="+data, faultChildResumeEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := startChild(t, cmd)
	stderr := c.stderr
	var got []handedOut
	var stop *stopReport
	var resumed *resumeReport
	for c.lines.Scan() {
		line := c.lines.Bytes()
		if s, ok := bytes.CutPrefix(line, []byte("STOP ")); ok {
			stop = &stopReport{}
			json.Unmarshal(s, stop)
			checkStop(t, stop, "disk full", stderr.String())
			free()
			io.WriteString(stdin, "freed\n")
			continue
		}
		if s, ok := bytes.CutPrefix(line, []byte("RESUMED ")); ok {
			resumed = &resumeReport{}
			json.Unmarshal(s, resumed)
			continue
		}
		var h handedOut
		if json.Unmarshal(line, &h) == nil {
			got = append(got, h)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v (a panic exits 2)\n%s", err, lastLines(stderr.String(), 30))
	}
	if stop == nil || resumed == nil {
		t.Fatalf("child reports: stop %+v, resumed %+v\n%s", stop, resumed, lastLines(stderr.String(), 30))
	}
	if resumed.Receipts != 20 || resumed.Error != "" {
		t.Fatalf("after space was freed the running log took %d of 20 appends: %s\n%s", resumed.Receipts, resumed.Error, lastLines(stderr.String(), 30))
	}
	if !strings.Contains(stderr.String(), "reopened") {
		t.Errorf("the sidecar did not log the reopen:\n%s", lastLines(stderr.String(), 30))
	}
	t.Logf("%d receipts before the disk filled, 20 after; resumed %s after space was freed", stop.Receipts, resumed.Waited)
	return got
}

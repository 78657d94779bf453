package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/provlog/provlog/tools/bench/internal/host"
)

// EntrySize is the size of every benchmark entry.
const EntrySize = 1024

// makeEntry returns the 1 KiB entry with sequence number seq: an RFC 8785
// canonical JSON object shaped like a provlog "call" entry, padded to
// exactly EntrySize bytes with base64 of pseudo-random bytes (seeded by seq),
// so that neither log gains from compressing it beyond what base64 allows
// (about 25 %). Entries are unique per seq and can be recomputed from it.
func makeEntry(seq uint64) []byte {
	const head = `{"actor":"logbench","kind":"call","pad":"`
	tail := `","seq":` + strconv.FormatUint(seq, 10) + `,"time":"2026-01-01T00:00:00.000000000Z","v":1}`
	padLen := EntrySize - len(head) - len(tail)
	var seed [32]byte
	binary.LittleEndian.PutUint64(seed[:], seq)
	raw := make([]byte, base64.RawStdEncoding.DecodedLen(padLen)+3)
	rand.NewChaCha8(seed).Read(raw)
	b := make([]byte, 0, EntrySize+4)
	b = append(b, head...)
	b = base64.RawStdEncoding.AppendEncode(b, raw)
	b = b[:len(head)+padLen]
	return append(b, tail...)
}

// entrySeq parses the seq back out of an entry made by makeEntry.
func entrySeq(e []byte) (uint64, error) {
	i := bytes.Index(e, []byte(`"seq":`))
	if i < 0 {
		return 0, fmt.Errorf("entry has no seq")
	}
	rest := e[i+6:]
	j := bytes.IndexByte(rest, ',')
	if j < 0 {
		return 0, fmt.Errorf("entry seq not terminated")
	}
	return strconv.ParseUint(string(rest[:j]), 10, 64)
}

// runLoop runs c goroutines that together call fn for seq = 0, 1, ... until
// n calls were started or the deadline passed (a zero deadline means none).
// It returns how many calls completed and the wall time until the last
// returned. The first error stops every goroutine.
func runLoop(c, n int, deadline time.Time, fn func(seq uint64) error) (int, time.Duration, error) {
	var next, done atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for firstErr.Load() == nil {
				if !deadline.IsZero() && time.Now().After(deadline) {
					return
				}
				s := next.Add(1) - 1
				if s >= int64(n) {
					return
				}
				if err := fn(uint64(s)); err != nil {
					firstErr.CompareAndSwap(nil, &err)
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	if p := firstErr.Load(); p != nil {
		return int(done.Load()), el, *p
	}
	return int(done.Load()), el, nil
}

// latencies collects per-operation durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantiles returns the p50 and p99 (nearest rank) in milliseconds.
func (l *latencies) quantiles() (p50, p99 float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return math.NaN(), math.NaN()
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(s)))) - 1
		i = max(0, min(i, len(s)-1))
		return float64(s[i]) / float64(time.Millisecond)
	}
	return q(0.50), q(0.99)
}

// peakRSS returns VmHWM of this process in bytes.
// processCPU is the user and system CPU time this process has used. On a
// loaded machine a phase's wall time says how much CPU it was given; its
// CPU time says what it cost.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func peakRSS() int64 {
	return procStatusKB("VmHWM:") * 1024
}

func procStatusKB(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// diskUsage walks dir and returns the apparent size (sum of file sizes) and
// the allocated size (512-byte blocks) of the files below it, and the
// apparent size of the files for which transient reports true.
func diskUsage(dir string, transient func(rel string) bool) (apparent, allocated, trans int64, files int, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			if os.IsNotExist(err) { // a temp file renamed away under us
				return nil
			}
			return err
		}
		files++
		apparent += fi.Size()
		if rel, err := filepath.Rel(dir, p); err == nil && transient(filepath.ToSlash(rel)) {
			trans += fi.Size()
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	return apparent, allocated, trans, files, err
}

// group formats an integer with thousands separators.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// rate formats count/elapsed as entries (or proofs) per second.
func rate(count int, el time.Duration) string {
	if el <= 0 {
		return "n/a"
	}
	r := float64(count) / el.Seconds()
	if r < 100 {
		return strconv.FormatFloat(r, 'f', 1, 64)
	}
	return group(int64(math.Round(r)))
}

func ms(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v < 10:
		return strconv.FormatFloat(v, 'f', 2, 64) + " ms"
	case v < 100:
		return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
	default:
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
}

func mib(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<20), 'f', 1, 64) + " MiB"
}

// fsyncProbe appends 4 KiB to a file in dir and fdatasyncs it n times, and
// returns the p50 and p99 of one append+sync in milliseconds: the disk's
// durability cost at the time, which other work on the machine can inflate.
func fsyncProbe(dir string, n int) (p50, p99 float64, err error) {
	d, err := host.FsyncProbe(dir, n, 0)
	if err != nil {
		return 0, 0, err
	}
	lat := latencies{d: d}
	p50, p99 = lat.quantiles()
	return p50, p99, nil
}

// filesystemOf returns "<fstype> <device> on <mountpoint> (<options>)" for
// the mount holding dir.
func filesystemOf(dir string) string {
	m, ok := host.MountOf(dir)
	if !ok {
		return "unknown"
	}
	return fmt.Sprintf("%s %s on %s (%s)", m.Type, m.Device, m.Point, m.Options)
}

package anchor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/provlog/provlog/log"
)

// MaxClockSkew is how far apart two clocks that time one log may be: an
// authority's time (a TSA token's genTime, Rekor's integratedTime) and
// the sidecar's clock when the answer arrives (anchor/online refuses
// answers further off), and an authority's time and the "time" of an
// entry the anchored checkpoint covers (see [Verified.CheckCovered]).
// The authority's time is what an auditor is told the checkpoint existed
// by; one decades off (a token dated 2001 over entries written in 2026)
// was stored.
const MaxClockSkew = 10 * time.Minute

// An Authority is one TSA token or Rekor entry of a verified record: the
// part of the record it is, as [Verify] names it ("timestamp 0 (URL)",
// "rekor.v1 0 (URL)"), and the time it vouches the checkpoint existed by.
type Authority struct {
	Part string
	Time time.Time
}

// EntryTime is a log entry's index and its "time".
type EntryTime struct {
	Index uint64
	Time  time.Time
}

// CheckCovered returns a problem for each authority of v whose time is
// earlier than newest's by more than [MaxClockSkew]. newest is the entry
// with the latest time among those the anchored checkpoint covers
// (indexes below its size): an authority earlier than it says the
// checkpoint existed before that entry was written, and then its time
// says nothing true about any entry. Entry times need not grow with the
// index (each writer stamps its entry before the sequencer orders the
// batch, and sidecars sharing a log have clocks of their own), so the
// caller passes the latest time of all the covered entries it knows, not
// the time of the last one.
func (v *Verified) CheckCovered(newest EntryTime) []log.Problem {
	var probs []log.Problem
	for _, a := range v.Authorities {
		if d := newest.Time.Sub(a.Time); d > MaxClockSkew {
			probs = append(probs, log.Problem{Part: a.Part, Msg: fmt.Sprintf(
				"time %s is %s before the time of entry %d, %s, which the anchored checkpoint covers (at most %s before is allowed): the authority dates the checkpoint before an entry in it was written",
				a.Time.UTC().Format(time.RFC3339), span(d), newest.Index, newest.Time.UTC().Format(log.TimeFormat), MaxClockSkew)})
		}
	}
	return probs
}

// newestTime is the latest "time" of the log entries shown to it, kept
// as text ([log.TimeFormat] sorts as time), and its entry's index. Entry
// times need not grow with the index (see [Verified.CheckCovered]), so
// every entry's time is compared: a running maximum, one comparison an
// entry, and no entry parsed whole.
type newestTime struct {
	text [len(log.TimeFormat)]byte
	at   uint64
	seen bool
}

// note keeps entry idx's time, b being the entry, if it is the latest so
// far; false if b's time cannot be read.
func (n *newestTime) note(idx uint64, b []byte) bool {
	t, ok := entryTime(b)
	if !ok {
		return false
	}
	if !n.seen || bytes.Compare(t, n.text[:]) > 0 {
		copy(n.text[:], t)
		n.at, n.seen = idx, true
	}
	return true
}

// get returns the latest time as a time; an error if it is not one in
// [log.TimeFormat] (its entry is e.Index).
func (n *newestTime) get() (e EntryTime, err error) {
	ts := string(n.text[:])
	t, err := time.Parse(log.TimeFormat, ts)
	if err != nil || t.Format(log.TimeFormat) != ts {
		return EntryTime{Index: n.at}, fmt.Errorf("\"time\" %q is not RFC 3339 UTC with nanoseconds, so the anchors covering it cannot be checked against it", ts)
	}
	return EntryTime{Index: n.at, Time: t}, nil
}

// EntryReader reads a log's entries [start, end). A log.Storage is one.
type EntryReader interface {
	Entries(ctx context.Context, start, end uint64) ([][]byte, error)
}

// CoveredTimes tells the latest entry time below growing sizes of one
// log: the time [Verified.CheckCovered] compares an anchor of that size
// with. It reads each entry once, from the first, whatever the sizes
// asked, so checking every anchor up to size S costs one read of S
// entries.
type CoveredTimes struct {
	log    EntryReader
	read   uint64
	newest newestTime
}

// NewCoveredTimes returns a CoveredTimes of l that has read nothing.
func NewCoveredTimes(l EntryReader) *CoveredTimes { return &CoveredTimes{log: l} }

// Newest returns the entry with the latest time among entries [0, size),
// size > 0, reading those it has not read yet. An entry whose time cannot
// be read is an error naming it (the log's own audit fails such a log),
// as is a size below one asked before.
func (c *CoveredTimes) Newest(ctx context.Context, size uint64) (EntryTime, error) {
	if size == 0 || size < c.read {
		return EntryTime{}, fmt.Errorf("covered entry times: size %d after the %d entries read so far", size, c.read)
	}
	const chunk = 4096
	for c.read < size {
		end := min(size, c.read+chunk)
		es, err := c.log.Entries(ctx, c.read, end)
		if err != nil {
			return EntryTime{}, fmt.Errorf("reading log entries [%d, %d): %w", c.read, end, err)
		}
		for i, b := range es {
			idx := c.read + uint64(i)
			if !c.newest.note(idx, b) {
				why := errors.New("it has no \"time\" member")
				if _, err := log.ParseEntry(b); err != nil {
					why = err
				}
				return EntryTime{}, fmt.Errorf("entry %d: its time cannot be read, so the anchors covering it cannot be checked against it: %w", idx, why)
			}
		}
		c.read = end
	}
	e, err := c.newest.get()
	if err != nil {
		return e, fmt.Errorf("entry %d: %w", e.Index, err)
	}
	return e, nil
}

// span says d to the second, with whole days apart when there are two or
// more.
func span(d time.Duration) string {
	d = d.Round(time.Second)
	if days := d / (24 * time.Hour); days >= 2 {
		return fmt.Sprintf("%d days and %s", days, d%(24*time.Hour))
	}
	return d.String()
}

// timeKey is how an entry's "time" member starts in its canonical form.
var timeKey = []byte(`"time":"`)

// entryTime returns the "time" member of b, a log entry in canonical
// form, as the text [log.ParseEntry] reads, without parsing the rest: it
// skips every nested value, whose members may be named "time" too (an
// anchor entry's timestamps, a call's arguments). It is linear in b and
// allocates nothing; ok is false if b has no top-level "time" string of
// the length of [log.TimeFormat]. The text is not checked to be a time.
func entryTime(b []byte) (t []byte, ok bool) {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case '"':
			// A member name of the entry's own object follows '{' or ','
			// at depth 1.
			if depth == 1 && i > 0 && (b[i-1] == '{' || b[i-1] == ',') && bytes.HasPrefix(b[i:], timeKey) {
				v := b[i+len(timeKey):]
				if len(v) < len(log.TimeFormat)+1 || v[len(log.TimeFormat)] != '"' {
					return nil, false
				}
				return v[:len(log.TimeFormat)], true
			}
			end := stringEnd(b, i+1)
			if end < 0 {
				return nil, false
			}
			i = end
		}
	}
	return nil, false
}

// stringEnd returns the index of the quote that closes the JSON string
// whose text starts at b[i], or -1.
func stringEnd(b []byte, i int) int {
	for {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		j += i
		// The quote is escaped if an odd number of backslashes precede it.
		n := 0
		for k := j - 1; k >= i && b[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return j
		}
		i = j + 1
	}
}

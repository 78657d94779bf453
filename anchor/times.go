package anchor

import (
	"bytes"
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

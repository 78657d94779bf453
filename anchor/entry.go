package anchor

import (
	"encoding/base64"
	"fmt"
	"time"

	"github.com/provlog/provlog/log"
)

// Actor is the actor of the anchor entries provlog writes.
const Actor = "provlog"

// Fields returns the members of the `anchor` entry for a stored record.
func Fields(st *Stored) *log.AnchorEntry {
	r := st.Record
	f := &log.AnchorEntry{
		Size:       r.Size,
		Root:       base64.StdEncoding.EncodeToString(r.Root),
		Digest:     r.Digest,
		Record:     st.Name,
		RecordHash: st.SHA256,
		Timestamps: []log.AnchorTimestamp{},
		Tlogs:      []log.AnchorTlog{},
	}
	for _, t := range r.Timestamps {
		f.Timestamps = append(f.Timestamps, log.AnchorTimestamp{URL: t.URL, Time: t.Time, Serial: t.Serial, TokenHash: sha256Hex(t.Token)})
	}
	for _, tl := range r.Tlogs {
		if e := tl.RekorV1; e != nil {
			f.Tlogs = append(f.Tlogs, log.AnchorTlog{Kind: tl.Kind, URL: e.URL, LogIndex: e.LogIndex, UUID: e.UUID,
				IntegratedTime: e.IntegratedTime, EntryHash: sha256Hex(e.Entry)})
		}
	}
	return f
}

// MarshalEntry returns the `anchor` log entry for a record stored by the
// sidecar whose id ([Store.Sidecar]) is sidecar.
func MarshalEntry(st *Stored, sidecar string, t time.Time) ([]byte, error) {
	f := Fields(st)
	f.Sidecar = sidecar
	e, err := log.NewEntry(log.KindAnchor, t, Actor, f)
	if err != nil {
		return nil, err
	}
	return e.Marshal()
}

// compareEntry reports the first way a record differs from what the
// log's anchor entry f committed to, naming the part.
func compareEntry(f *log.AnchorEntry, st *Stored) *log.Problem {
	if st.Record == nil {
		return &log.Problem{Part: "record", Msg: fmt.Sprintf("does not parse, the log's anchor entry recorded SHA-256 %s", f.RecordHash)}
	}
	g := Fields(st)
	if g.RecordHash == f.RecordHash {
		return nil
	}
	// The bytes differ; say where.
	switch {
	case g.Size != f.Size || g.Root != f.Root || g.Digest != f.Digest:
		return &log.Problem{Part: "checkpoint", Msg: fmt.Sprintf("record anchors size %d root %s, the log's anchor entry size %d root %s", g.Size, g.Root, f.Size, f.Root)}
	case len(g.Timestamps) != len(f.Timestamps):
		return &log.Problem{Part: "record", Msg: fmt.Sprintf("holds %d timestamps, the log's anchor entry %d", len(g.Timestamps), len(f.Timestamps))}
	case len(g.Tlogs) != len(f.Tlogs):
		return &log.Problem{Part: "record", Msg: fmt.Sprintf("holds %d transparency-log entries, the log's anchor entry %d", len(g.Tlogs), len(f.Tlogs))}
	}
	for i := range g.Timestamps {
		if g.Timestamps[i].TokenHash != f.Timestamps[i].TokenHash {
			return &log.Problem{Part: fmt.Sprintf("timestamp %d (%s)", i, g.Timestamps[i].URL), Msg: "token is not the one the log's anchor entry recorded"}
		}
	}
	for i := range g.Tlogs {
		if g.Tlogs[i].EntryHash != f.Tlogs[i].EntryHash {
			return &log.Problem{Part: fmt.Sprintf("%s %d (%s)", g.Tlogs[i].Kind, i, g.Tlogs[i].URL), Msg: "entry is not the one the log's anchor entry recorded"}
		}
	}
	return &log.Problem{Part: "record", Msg: fmt.Sprintf("SHA-256 %s is not %s, which the log's anchor entry recorded", g.RecordHash, f.RecordHash)}
}

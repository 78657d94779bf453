package witness

import (
	"fmt"
	"time"

	"github.com/provlog/provlog/log"
)

// ConflictActor is the actor of witness.conflict entries: the sidecar
// writes them, not a client.
const ConflictActor = log.GenesisActor

// A ConflictEntry is a witness.conflict log entry (DESIGN §2): a witness
// refused a checkpoint because it holds another history of the log. It
// keeps the witness's answer and the checkpoint it refused.
type ConflictEntry struct {
	Time time.Time `json:"-"`
	// Witness is the witness's key name.
	Witness string `json:"witness"`
	// Status is the witness's HTTP status (409 or 422).
	Status int `json:"status"`
	// CheckpointSize is the size of the refused checkpoint, WitnessSize
	// the size the witness says it cosigned.
	CheckpointSize uint64 `json:"checkpoint_size"`
	WitnessSize    uint64 `json:"witness_size"`
	Detail         string `json:"detail"`
	// Checkpoint is the refused signed checkpoint note.
	Checkpoint string `json:"checkpoint"`
}

// Marshal returns the canonical entry bytes of c.
func (c *ConflictEntry) Marshal() ([]byte, error) {
	e, err := log.NewEntry(log.KindWitnessConflict, c.Time, ConflictActor, c)
	if err != nil {
		return nil, err
	}
	return e.Marshal()
}

// ParseConflict reads the fields of a witness.conflict entry, refusing
// members it does not know.
func ParseConflict(e *log.Entry) (*ConflictEntry, error) {
	if e.Kind != log.KindWitnessConflict {
		return nil, fmt.Errorf("entry is a %q, not a witness.conflict entry", e.Kind)
	}
	c := &ConflictEntry{Time: e.Time}
	if err := e.DecodeFields(c); err != nil {
		return nil, err
	}
	return c, nil
}

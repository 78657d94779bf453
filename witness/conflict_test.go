package witness

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/provlog/provlog/log"
)

func TestConflictEntry(t *testing.T) {
	want := &ConflictEntry{Time: time.Date(2026, 12, 1, 9, 0, 0, 5, time.UTC), Witness: "w.example/w1", Status: 409,
		CheckpointSize: 15, WitnessSize: 1 << 53, Detail: "another history", Checkpoint: "log.example\n15\nAAAA\n\n— log.example x\n"}
	b, err := want.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	e, err := log.ParseEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	if e.Kind != log.KindWitnessConflict || e.Actor != ConflictActor {
		t.Errorf("entry %s: kind %q actor %q", b, e.Kind, e.Actor)
	}
	got, err := ParseConflict(e)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseConflict = %+v, want %+v (sizes up to 2^53 stay exact; JCS numbers are doubles)", got, want)
	}
	e.Fields["extra"] = "x"
	if _, err := ParseConflict(e); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("ParseConflict with an unknown member: %v", err)
	}
	e.Kind = log.KindAnchor
	if _, err := ParseConflict(e); err == nil {
		t.Error("ParseConflict of an anchor entry succeeded")
	}
}

// FuzzParseConflict: what ParseConflict accepts survives Marshal.
func FuzzParseConflict(f *testing.F) {
	b, _ := (&ConflictEntry{Time: time.Unix(0, 0), Witness: "w", Status: 422, CheckpointSize: 3, WitnessSize: 2, Detail: "d", Checkpoint: "c"}).Marshal()
	f.Add(b)
	f.Add([]byte(`{"actor":"provlog","checkpoint":"c","checkpoint_size":-1,"detail":"","kind":"witness.conflict","status":1.5,"time":"2026-07-01T10:30:45.123456789Z","v":1,"witness":"w","witness_size":0}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := log.ParseEntry(data)
		if err != nil {
			return
		}
		c, err := ParseConflict(e)
		if err != nil {
			return
		}
		b, err := c.Marshal()
		if err != nil {
			t.Fatalf("ParseConflict(%q) accepted what Marshal refuses: %v", data, err)
		}
		e2, err := log.ParseEntry(b)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseConflict(e2)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("%+v does not survive Marshal: %+v, %v", c, c2, err)
		}
	})
}

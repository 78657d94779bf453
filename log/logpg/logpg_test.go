package logpg

import (
	"context"
	"errors"
	"testing"

	"github.com/provlog/provlog/log"
	"github.com/provlog/provlog/log/logpg/pgtest"
	"github.com/provlog/provlog/log/logtest"
)

func open(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(t.Context(), dsn, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

// twoWriters opens two handles on one fresh database, closed when t
// ends, and returns the database's DSN too.
func twoWriters(t *testing.T) (a, b *Store, dsn string) {
	t.Helper()
	dsn = pgtest.DSN(t)
	a, b = open(t, dsn), open(t, dsn)
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b, dsn
}

func TestStorage(t *testing.T) {
	for _, tc := range []struct {
		name string
		hot  int64
	}{{"hot", 0}, {"cold", -1}, {"few", 8}} {
		t.Run(tc.name, func(t *testing.T) {
			logtest.TestStorage(t, func(t *testing.T) (log.Storage, func() log.Storage) {
				dsn := pgtest.DSN(t)
				o := &Options{MaxHotNodes: tc.hot}
				s, err := Open(t.Context(), dsn, o)
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				return s, func() log.Storage {
					s, err := Open(context.Background(), dsn, o)
					if err != nil {
						t.Fatalf("reopening: %v", err)
					}
					return s
				}
			})
		})
	}
}

var _ = errors.Is

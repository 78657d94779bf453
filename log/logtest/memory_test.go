package logtest

import (
	"testing"

	"github.com/provlog/provlog/log"
)

func TestMemory(t *testing.T) {
	TestStorage(t, func(t *testing.T) (log.Storage, func() log.Storage) {
		m := NewMemory()
		return m, func() log.Storage { return m.Reopen() }
	})
}

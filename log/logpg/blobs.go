package logpg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/log/blobs"
)

// blobTimeout bounds one blob operation: the blob API has no context, and
// a call must not wait for ever on an unreachable database.
const blobTimeout = 30 * time.Second

// Blobs returns the log's blob store in the database (table provlog_blobs,
// schema.go): every sidecar of the log reads the blobs any of them put,
// and a purge through one removes a blob for all. A write is committed
// (durable) when it returns.
func (s *Store) Blobs() *blobs.Store { return blobs.New(pgBlobs{s}) }

type pgBlobs struct{ s *Store }

func (b pgBlobs) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), blobTimeout)
}

func (b pgBlobs) ReadBlob(name string) ([]byte, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	var data []byte
	err := b.s.read(ctx, "reading a blob", func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sqlBlobRead, name).Scan(&data)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("blob %s: %w", name, blobs.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("reading blob %s from the shared log: %w", name, err)
	}
	return data, nil
}

func (b pgBlobs) WriteBlob(name string, data []byte) error {
	if b.s.readOnly {
		return fmt.Errorf("writing blob %s to the shared log: %w", name, errReadOnly)
	}
	ctx, cancel := b.ctx()
	defer cancel()
	if _, err := b.s.pool.Exec(ctx, sqlBlobWrite, name, data); err != nil {
		return fmt.Errorf("writing blob %s to the shared log: %w", name, err)
	}
	return nil
}

func (b pgBlobs) DeleteBlob(name string) error {
	if b.s.readOnly {
		return fmt.Errorf("deleting blob %s from the shared log: %w", name, errReadOnly)
	}
	ctx, cancel := b.ctx()
	defer cancel()
	if _, err := b.s.pool.Exec(ctx, sqlBlobDelete, name); err != nil {
		return fmt.Errorf("deleting blob %s from the shared log: %w", name, err)
	}
	return nil
}

func (b pgBlobs) HasBlob(name string) (bool, error) {
	ctx, cancel := b.ctx()
	defer cancel()
	var ok bool
	err := b.s.read(ctx, "looking up a blob", func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sqlBlobHas, name).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("looking up blob %s in the shared log: %w", name, err)
	}
	return ok, nil
}

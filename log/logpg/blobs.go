package logpg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/provlog/provlog/log/blobs"
)

// Blobs returns the log's blob store in the database (table provlog_blobs,
// schema.go): every sidecar of the log reads the blobs any of them put,
// and a purge through one removes a blob for all. A write is committed
// (durable) when it returns.
func (s *Store) Blobs() *blobs.Store { return blobs.New(pgBlobs{s}) }

// pgBlobs is the blob API on the store. That API has no context: each
// operation runs under its own, which rerun bounds by ResolveTimeout, so a
// call never waits for ever on a database that does not answer.
type pgBlobs struct{ s *Store }

func (b pgBlobs) ReadBlob(name string) ([]byte, error) {
	ctx := context.Background()
	var data []byte
	err := b.s.rerun(ctx, "reading a blob", func(ctx context.Context, conn *pgx.Conn) error {
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
	ctx := context.Background()
	err := b.s.rerun(ctx, "writing a blob", func(ctx context.Context, conn *pgx.Conn) error {
		tag, err := conn.Exec(ctx, sqlBlobWrite, name, data)
		if err == nil && tag.RowsAffected() == 0 {
			return blobs.ErrHeld
		}
		return err
	})
	if errors.Is(err, blobs.ErrHeld) {
		return fmt.Errorf("blob %s in the shared log: %w", name, err)
	} else if err != nil {
		return fmt.Errorf("writing blob %s to the shared log: %w", name, err)
	}
	return nil
}

func (b pgBlobs) DeleteBlob(name string) error {
	if b.s.readOnly {
		return fmt.Errorf("deleting blob %s from the shared log: %w", name, errReadOnly)
	}
	ctx := context.Background()
	err := b.s.rerun(ctx, "deleting a blob", func(ctx context.Context, conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, sqlBlobDelete, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("deleting blob %s from the shared log: %w", name, err)
	}
	return nil
}

func (b pgBlobs) HasBlob(name string) (bool, error) {
	ctx := context.Background()
	var ok bool
	err := b.s.rerun(ctx, "looking up a blob", func(ctx context.Context, conn *pgx.Conn) error {
		return conn.QueryRow(ctx, sqlBlobHas, name).Scan(&ok)
	})
	if err != nil {
		return false, fmt.Errorf("looking up blob %s in the shared log: %w", name, err)
	}
	return ok, nil
}

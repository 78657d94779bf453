// Package pgstat reads what the bench programs measure of a PostgreSQL
// cluster while it serves a run.
package pgstat

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// RunPIDs returns the pids of the backends serving the run on conn's
// database (every client of it but conn itself: one run at a time uses a
// database) and of the cluster's WAL writer.
func RunPIDs(ctx context.Context, conn *pgx.Conn) ([]int, error) {
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE (datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()) OR backend_type = 'walwriter'`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int])
}

package dbpool

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Batches is how the retentions (jobs, the event history) delete a backlog: batch runs once
// per transaction, each short, under the transaction advisory lock lockKey so that one node
// at a time does the work, until a batch deletes fewer than size rows, another session holds
// the lock, or maxBatches batches ran (the next pass goes on). It returns the rows the
// committed batches deleted, also when a batch fails.
func Batches(ctx context.Context, pool *pgxpool.Pool, lockKey int64, size, maxBatches int, batch func(pgx.Tx) (int64, error)) (int64, error) {
	var total int64
	for range maxBatches {
		var deleted int64
		locked := false
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, lockKey).Scan(&locked); err != nil || !locked {
				return err
			}
			var err error
			deleted, err = batch(tx)
			return err
		})
		if err != nil {
			return total, err
		}
		total += deleted
		if !locked || deleted < int64(size) {
			break
		}
	}
	return total, nil
}

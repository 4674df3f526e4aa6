package encodejobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// retentionLockKey is the advisory lock that lets one node at a time prune.
const retentionLockKey = 0x706c6179_72657465 // "playrete"

// Prune deletes finished jobs older than their retention, in batches of batch rows, each in
// its own short transaction under a transaction advisory lock: one node prunes at a time, and
// no transaction grows with the backlog. It returns how many rows it deleted. River and Oban
// prune the same way; their users' table-bloat reports are why a queue must prune at all.
func (q *Queue) Prune(ctx context.Context, completedAfter, deadAfter time.Duration, batch int) (int64, error) {
	var total int64
	for _, r := range []struct {
		status Status
		age    time.Duration
	}{{StatusCompleted, completedAfter}, {StatusDead, deadAfter}} {
		// Bounded: at most 1000 batches per call; the next run continues.
		for range 1000 {
			var deleted int64
			locked := false
			err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
				if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(retentionLockKey)).Scan(&locked); err != nil || !locked {
					return err
				}
				tag, err := tx.Exec(ctx, `
					DELETE FROM jobs WHERE id IN (
						SELECT id FROM jobs
						WHERE status = $1 AND completed_at < statement_timestamp() - $2::interval
						ORDER BY completed_at LIMIT $3)`, r.status, r.age, batch)
				deleted = tag.RowsAffected()
				return err
			})
			if err != nil {
				return total, fmt.Errorf("prune %s jobs: %w", r.status, err)
			}
			total += deleted
			if !locked || deleted < int64(batch) {
				break
			}
		}
	}
	return total, nil
}

// RunRetention prunes every interval until ctx is done.
func (q *Queue) RunRetention(ctx context.Context, interval, completedAfter, deadAfter time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			n, err := q.Prune(ctx, completedAfter, deadAfter, 1000)
			switch {
			case err != nil && ctx.Err() == nil:
				logger.Warn("job retention failed", "err", err)
			case n > 0:
				logger.Info("pruned finished jobs", "deleted", n)
			}
		}
	}
}

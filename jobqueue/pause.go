package jobqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/notify"
)

// PausedKind is a kind paused on every node.
type PausedKind struct {
	Kind     string
	PausedAt time.Time
	// PausedBy says who paused it (an administrator's id, a runbook's name).
	PausedBy string
}

// Pause stops every node from claiming jobs of kind from the moment it commits: the claim
// statement itself reads job_kind_pauses. Jobs already running finish; jobs keep being
// enqueued. Pausing a paused kind keeps its first pause.
func (q *Queue) Pause(ctx context.Context, kind, by string) error {
	if _, err := q.pool.Exec(ctx, `INSERT INTO job_kind_pauses (kind, paused_by) VALUES ($1, $2) ON CONFLICT (kind) DO NOTHING`, kind, by); err != nil {
		return fmt.Errorf("pause %s jobs: %w", kind, err)
	}
	return nil
}

// Resume lets every node claim jobs of kind again, and wakes their idle runners on commit
// rather than at their next poll. Resuming a kind that is not paused does nothing.
func (q *Queue) Resume(ctx context.Context, kind string) error {
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM job_kind_pauses WHERE kind = $1`, kind); err != nil {
			return err
		}
		return notify.Send(ctx, tx, Channel, kind)
	})
	if err != nil {
		return fmt.Errorf("resume %s jobs: %w", kind, err)
	}
	return nil
}

// Paused returns the paused kinds, by name.
func (q *Queue) Paused(ctx context.Context) ([]PausedKind, error) {
	rows, err := q.pool.Query(ctx, `SELECT kind, paused_at, paused_by FROM job_kind_pauses ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("read paused kinds: %w", err)
	}
	paused, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PausedKind])
	if err != nil {
		return nil, fmt.Errorf("read paused kinds: %w", err)
	}
	return paused, nil
}

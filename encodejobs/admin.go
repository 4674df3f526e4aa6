package encodejobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

// Row is a job as the admin API shows it.
type Row struct {
	ID           int64      `json:"id"`
	Kind         string     `json:"kind"`
	MediaID      int64      `json:"media_id"`
	Status       Status     `json:"status"`
	AttemptCount int        `json:"attempt_count"`
	MaxAttempts  int        `json:"max_attempts"`
	AvailableAt  time.Time  `json:"available_at"`
	EnqueuedAt   time.Time  `json:"enqueued_at"`
	ClaimedBy    *string    `json:"claimed_by,omitempty"`
	LeaseUntil   *time.Time `json:"lease_until,omitempty"`
	CompletedAt  *time.Time `json:"completed_at,omitempty"`
	LastError    *string    `json:"last_error,omitempty"`
}

// List returns up to limit jobs, newest first, optionally only those with status.
func (q *Queue) List(ctx context.Context, status Status, limit int) ([]Row, error) {
	rows, err := q.pool.Query(ctx, `
		SELECT id, kind, media_id, status, attempt_count, max_attempts, available_at, enqueued_at,
		       claimed_by, lease_until, completed_at, last_error
		FROM jobs WHERE ($1 = '' OR status = $1) ORDER BY id DESC LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Row])
}

// RetryDead gives a DEAD job fresh attempts: PENDING now, its media PROCESSING again. Locks
// members → media → jobs like every finish.
func (q *Queue) RetryDead(ctx context.Context, id int64) error {
	return pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		var mediaID int64
		var kind string
		err := tx.QueryRow(ctx, `SELECT media_id, kind FROM jobs WHERE id = $1`, id).Scan(&mediaID, &kind)
		if errors.Is(err, pgx.ErrNoRows) {
			return apperr.Errorf(apperr.NotFound, "job %d not found", id)
		}
		if err != nil {
			return err
		}
		if _, err := lockMediaOwner(ctx, tx, mediaID); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `
			UPDATE jobs SET status = 'PENDING', attempt_count = 0, available_at = statement_timestamp(),
			       completed_at = NULL, claim_token = NULL, claimed_by = NULL, lease_until = NULL
			WHERE id = $1 AND status = 'DEAD'`, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return apperr.Errorf(apperr.Conflict, "job %d is not DEAD", id)
		}
		if err := media.SetStatus(ctx, tx, mediaID, media.StatusProcessing); err != nil {
			return err
		}
		return notify.Send(ctx, tx, notify.ChannelJobs, kind)
	})
}

package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/notify"
)

// Row is a job as the admin API shows it.
type Row struct {
	ID           int64      `json:"id"`
	Kind         string     `json:"kind"`
	Subject      int64      `json:"subject_id"`
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
		SELECT id, kind, subject_id, status, attempt_count, max_attempts, available_at, enqueued_at,
		       claimed_by, lease_until, completed_at, last_error
		FROM jobs WHERE ($1 = '' OR status = $1) ORDER BY id DESC LIMIT $2`, status, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Row])
}

// RetryDead gives a DEAD job fresh attempts: PENDING now, with its kind's Revive writes (its
// media PROCESSING again), as a transition like every finish (its kind's Lock first). A job of
// a kind this node does not know is refused: its domain side could not be revived.
func (q *Queue) RetryDead(ctx context.Context, id int64) error {
	j := Job{ID: id}
	err := q.pool.QueryRow(ctx, `SELECT kind, subject_id, max_attempts FROM jobs WHERE id = $1`, id).Scan(&j.Kind, &j.Subject, &j.MaxAttempts)
	if errors.Is(err, pgx.ErrNoRows) {
		return apperr.Errorf(apperr.NotFound, "job %d not found", id)
	}
	if err != nil {
		return fmt.Errorf("retry job %d: %w", id, err)
	}
	kind, ok := q.kinds.kinds[j.Kind]
	if !ok {
		return apperr.Errorf(apperr.Conflict, "job %d is of kind %q, which this node does not know", id, j.Kind)
	}
	revive := func(ctx context.Context, tx pgx.Tx) error {
		if kind.Revive != nil {
			if err := kind.Revive(ctx, tx, j); err != nil {
				return err
			}
		}
		return notify.Send(ctx, tx, Channel, j.Kind)
	}
	changed, err := q.transition(ctx, j, revive, `
		UPDATE jobs SET status = 'PENDING', attempt_count = 0, available_at = statement_timestamp(),
		       completed_at = NULL, claim_token = NULL, claimed_by = NULL, lease_until = NULL
		WHERE id = $1 AND status = 'DEAD'`, id)
	switch {
	case err != nil:
		return fmt.Errorf("retry job %d: %w", id, err)
	case !changed:
		// Not DEAD any more, or deleted by retention since it was read.
		return apperr.Errorf(apperr.Conflict, "job %d is not DEAD", id)
	}
	return nil
}

// AdminHandler serves /v1/admin/jobs.
type AdminHandler struct {
	Queue *Queue
}

// Register adds the admin job routes to router, the /v1/admin group that requires the admin
// role.
func (h *AdminHandler) Register(router fiber.Router) {
	httpserver.Get(router, "/jobs", h.list)
	router.Post("/jobs/:id/retry", h.retry)
}

func (h *AdminHandler) list(c *fiber.Ctx) error {
	status := Status(strings.ToUpper(c.Query("status")))
	switch status {
	case "", StatusPending, StatusProcessing, StatusCompleted, StatusDead:
	default:
		return apperr.Errorf(apperr.Invalid, "status must be PENDING, PROCESSING, COMPLETED or DEAD")
	}
	limit, err := httpserver.QueryLimitUpTo(c, 100, 1000)
	if err != nil {
		return err
	}
	rows, err := h.Queue.List(c.UserContext(), status, limit)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []Row{}
	}
	return c.JSON(fiber.Map{"jobs": rows})
}

func (h *AdminHandler) retry(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.Queue.RetryDead(c.UserContext(), id); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusAccepted)
}

package jobqueue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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
	// Errors are the errors of its last attempts (at most keptErrors), the newest last.
	Errors []AttemptError `json:"errors"`
	// GroupID is the job's group (the id of its first job), absent for a job on its own.
	GroupID *int64 `json:"group_id,omitempty"`
	// Args are the job's own parameters, absent when it has none.
	Args json.RawMessage `json:"args,omitempty"`
	// WaitingOn is how many of its parents are not COMPLETED yet (WAITING jobs only).
	WaitingOn int `json:"waiting_on"`
	// Parents are the jobs it waits for, Dependants the jobs that wait for it.
	Parents    []int64 `json:"parents"`
	Dependants []int64 `json:"dependants"`
	// Partition is its fairness partition (Spec.Partition), Priority its priority.
	Partition string   `json:"partition"`
	Priority  Priority `json:"priority"`
	// LostCount is how many leases it lost (its worker killed, hung or cut off).
	LostCount int `json:"lost_count"`
}

// AttemptError is the error one attempt of a job ended with (a retry, its death, the
// rescuer's sweep or an administrator's cancel).
type AttemptError struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// Filter selects the jobs List returns: of Kind, Status and Group when set, with an id below
// Before when set (the next page), at most Limit.
type Filter struct {
	Kind   string
	Status Status
	Group  int64
	Before int64
	Limit  int
}

const rowColumns = `id, kind, subject_id, status, attempt_count, max_attempts, available_at, enqueued_at,
		       claimed_by, lease_until, completed_at, last_error, errors, group_id, args, waiting_on,
		       ARRAY(SELECT parent_id FROM job_dependencies WHERE job_id = jobs.id ORDER BY parent_id),
		       ARRAY(SELECT job_id FROM job_dependencies WHERE parent_id = jobs.id ORDER BY job_id),
		       partition_key, priority, lost_count`

// List returns the jobs f selects, newest first.
func (q *Queue) List(ctx context.Context, f Filter) ([]Row, error) {
	rows, err := q.pool.Query(ctx, `SELECT `+rowColumns+` FROM jobs
		WHERE ($1 = '' OR kind = $1) AND ($2 = '' OR status = $2) AND ($3::bigint = 0 OR id < $3)
		  AND ($5::bigint = 0 OR group_id = $5)
		ORDER BY id DESC LIMIT $4`, f.Kind, f.Status, f.Before, f.Limit, f.Group)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Row])
}

// Get returns job id.
func (q *Queue) Get(ctx context.Context, id int64) (Row, error) {
	rows, err := q.pool.Query(ctx, `SELECT `+rowColumns+` FROM jobs WHERE id = $1`, id)
	if err != nil {
		return Row{}, fmt.Errorf("read job %d: %w", id, err)
	}
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByPos[Row])
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, apperr.Errorf(apperr.NotFound, "job %d not found", id)
	}
	return r, err
}

// Count is how many jobs of one kind are in one status.
type Count struct {
	Kind   string `json:"kind"`
	Status Status `json:"status"`
	Jobs   int64  `json:"jobs"`
}

// Counts returns, for every kind this queue knows and every status, how many jobs there are
// (zeros included), by kind then status in the order of Statuses.
func (q *Queue) Counts(ctx context.Context) ([]Count, error) {
	rows, err := q.pool.Query(ctx, `
		SELECT k.kind, s.status, count(j.id)
		FROM unnest($1::text[]) WITH ORDINALITY k(kind, n)
		CROSS JOIN unnest($2::text[]) WITH ORDINALITY s(status, n)
		LEFT JOIN jobs j ON j.kind = k.kind AND j.status = s.status
		GROUP BY k.kind, k.n, s.status, s.n ORDER BY k.n, s.n`, q.kinds.names, Statuses)
	if err != nil {
		return nil, fmt.Errorf("count jobs: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Count])
}

// Statuses are every status of a job, in the order of its life.
var Statuses = []Status{StatusWaiting, StatusPending, StatusProcessing, StatusCompleted, StatusDead}

// CancelReason is the error, and the reason its owner is told, of a job an administrator
// cancelled.
const CancelReason = "cancelled by an administrator"

// Cancel ends a WAITING, PENDING or PROCESSING job now: DEAD, with its kind's Fail writes
// (its media FAILED, its owner told), as a transition like every finish, and the jobs that
// wait for it with it (their kinds' OnParentDead). A worker still running it loses its claim:
// its fenced finish changes nothing, and its outputs are discarded. A job in another status
// is refused.
func (q *Queue) Cancel(ctx context.Context, id int64) error {
	j, kind, err := q.adminJob(ctx, id)
	if err != nil {
		return err
	}
	cause := WithReason(errors.New(CancelReason), CancelReason)
	var fail func(ctx context.Context, tx pgx.Tx) error
	if kind.Fail != nil {
		fail = func(ctx context.Context, tx pgx.Tx) error { return kind.Fail(ctx, tx, j, cause) }
	}
	changed, err := q.transition(ctx, j, change{to: StatusDead, cause: cause}, fail, `
		UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), claim_token = NULL, claimed_by = NULL,
		       lease_until = NULL, last_error = $2, `+appendError("$2")+`
		WHERE id = $1 AND status IN ('WAITING', 'PENDING', 'PROCESSING')`, id, CancelReason)
	switch {
	case err != nil:
		return fmt.Errorf("cancel job %d: %w", id, err)
	case !changed:
		return apperr.Errorf(apperr.Conflict, "job %d is not WAITING, PENDING or PROCESSING: only a job still to run or running can be cancelled", id)
	}
	return nil
}

// Discard deletes a DEAD job, as the pruner would once PLAYHEAD_RETENTION_DEAD passed: its
// domain side stays as its death left it (the media FAILED). A job in another status is
// refused.
func (q *Queue) Discard(ctx context.Context, id int64) error {
	var deleted int64
	err := q.pool.QueryRow(ctx, `WITH gone AS (DELETE FROM jobs WHERE id = $1 AND status = 'DEAD' RETURNING id, group_id)
		`+forgetEdges, id).Scan(&deleted)
	if err != nil {
		return fmt.Errorf("discard job %d: %w", id, err)
	}
	if deleted == 0 {
		if _, err := q.Get(ctx, id); err != nil {
			return err
		}
		return apperr.Errorf(apperr.Conflict, "job %d is not DEAD: only a DEAD job can be discarded", id)
	}
	return nil
}

// adminJob reads job id for an administrator's action, with its kind: a job of a kind this
// node does not know is refused, since its domain side could not be written.
func (q *Queue) adminJob(ctx context.Context, id int64) (Job, Kind, error) {
	j := Job{ID: id}
	err := q.pool.QueryRow(ctx, `SELECT kind, subject_id, max_attempts, coalesce(group_id, 0) FROM jobs WHERE id = $1`, id).Scan(&j.Kind, &j.Subject, &j.MaxAttempts, &j.Group)
	if errors.Is(err, pgx.ErrNoRows) {
		return j, Kind{}, apperr.Errorf(apperr.NotFound, "job %d not found", id)
	}
	if err != nil {
		return j, Kind{}, fmt.Errorf("read job %d: %w", id, err)
	}
	kind, ok := q.kinds.kinds[j.Kind]
	if !ok {
		return j, Kind{}, apperr.Errorf(apperr.Conflict, "job %d is of kind %q, which this node does not know", id, j.Kind)
	}
	return j, kind, nil
}

// retrySQL makes the DEAD job $1 PENDING with fresh attempts and leases to lose, WAITING
// when a job it waits for is not COMPLETED yet; it changes nothing while a job it waits for is
// DEAD or gone (blockedParent).
const retrySQL = `
UPDATE jobs SET status = CASE WHEN w.n > 0 THEN 'WAITING' ELSE 'PENDING' END, waiting_on = w.n,
       attempt_count = 0, lost_count = 0, available_at = statement_timestamp(),
       completed_at = NULL, claim_token = NULL, claimed_by = NULL, lease_until = NULL
FROM (SELECT count(*) FILTER (WHERE NOT d.done) AS n, count(*) FILTER (WHERE ` + blockedParent + `) AS blocked
      FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id WHERE d.job_id = $1) w
WHERE id = $1 AND status = 'DEAD' AND w.blocked = 0`

// RetryDead gives a DEAD job fresh attempts: PENDING now (WAITING when a job it waits for is
// not COMPLETED yet), with its kind's Revive writes (its media PROCESSING again), as a
// transition like every finish (its kind's Lock first); the jobs that wait for it and were
// cancelled with it wait again. A job of a kind this node does not know is refused: its domain
// side could not be revived.
//
// A job of a group retries its group: every DEAD job of it that nothing DEAD blocks (each one
// that died itself: its attempts, the rescuer, a cancel) is retried in one transaction, and the
// ones cancelled with them wait again. Retried one at a time, a job that waits for two DEAD
// jobs would stay DEAD after the first's retry while the first's Revive had made its domain
// (the media) live again, with nothing left to run. A job that waits for a job that died and
// was deleted can never run: refused.
func (q *Queue) RetryDead(ctx context.Context, id int64) error {
	j, _, err := q.adminJob(ctx, id)
	if err != nil {
		return err
	}
	var changed bool
	if j.Group == 0 {
		changed, err = q.transition(ctx, j, change{to: StatusPending}, q.revive(j), retrySQL, id)
	} else {
		changed, err = q.retryGroup(ctx, j)
	}
	switch {
	case isUniqueKeyHeld(err):
		// A DEAD job frees its unique key, so a newer job of its kind may hold it now.
		var holder int64
		if q.pool.QueryRow(ctx, `SELECT h.id FROM jobs d JOIN jobs h ON h.kind = d.kind AND h.unique_key = d.unique_key
			WHERE d.id = $1 AND h.status IN ('WAITING', 'PENDING', 'PROCESSING')`, id).Scan(&holder) != nil {
			return apperr.Errorf(apperr.Conflict, "job %d's unique key was held by another job of its kind: retry it again", id)
		}
		return apperr.Errorf(apperr.Conflict, "job %d's unique key is held by job %d, which is not finished: retry it once that one ends", id, holder)
	case err != nil:
		return fmt.Errorf("retry job %d: %w", id, err)
	case !changed:
		var parent int64
		var gone bool
		if q.pool.QueryRow(ctx, `SELECT d.parent_id, p.id IS NULL FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id
			WHERE d.job_id = $1 AND `+blockedParent+` ORDER BY d.parent_id LIMIT 1`, id).Scan(&parent, &gone) == nil {
			if gone {
				return apperr.Errorf(apperr.Conflict, "job %d waits for job %d, which died and was deleted: it can never run", id, parent)
			}
			return apperr.Errorf(apperr.Conflict, "job %d waits for job %d, which is DEAD: retry that one first", id, parent)
		}
		// Not DEAD any more, or deleted by retention since it was read.
		return apperr.Errorf(apperr.Conflict, "job %d is not DEAD", id)
	}
	return nil
}

// isUniqueKeyHeld reports whether err is a write refused by jobs_unique_key_idx.
func isUniqueKeyHeld(err error) bool {
	e, ok := errors.AsType[*pgconn.PgError](err)
	return ok && e.Code == "23505" && e.ConstraintName == "jobs_unique_key_idx"
}

// revive is the domain side of j's retry: its kind's Revive, and a wake-up of its runners.
func (q *Queue) revive(j Job) func(ctx context.Context, tx pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		if k := q.kinds.kinds[j.Kind]; k.Revive != nil {
			if err := k.Revive(ctx, tx, j); err != nil {
				return err
			}
		}
		return notify.Send(ctx, tx, Channel, j.Kind)
	}
}

// retryGroup retries the group of j (see RetryDead) in one transaction, and reports whether j
// is live again; when it is not (a job it waits for died and was deleted), nothing is written.
func (q *Queue) retryGroup(ctx context.Context, j Job) (bool, error) {
	retried := false
	err := pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
		// Unlocked: the job row is locked after the domain rows, by each root's transition.
		var dead bool
		if err := tx.QueryRow(ctx, `SELECT status = 'DEAD' FROM jobs WHERE id = $1`, j.ID).Scan(&dead); err != nil || !dead {
			return cmp.Or(err, errUnchanged)
		}
		rows, err := tx.Query(ctx, `SELECT `+jobColumns+` FROM jobs j WHERE j.group_id = $1 AND j.status = 'DEAD'
			AND NOT EXISTS (SELECT 1 FROM job_dependencies d LEFT JOIN jobs p ON p.id = d.parent_id WHERE d.job_id = j.id AND `+blockedParent+`)
			ORDER BY j.id`, j.Group)
		if err != nil {
			return err
		}
		roots, err := pgx.CollectRows(rows, scanJob)
		if err != nil {
			return err
		}
		for _, r := range roots {
			if _, known := q.kinds.kinds[r.Kind]; !known {
				return apperr.Errorf(apperr.Conflict, "job %d of the group is of kind %q, which this node does not know", r.ID, r.Kind)
			}
			if _, err := q.transitionIn(ctx, tx, r, change{to: StatusPending}, q.revive(r), retrySQL, r.ID); err != nil {
				return err
			}
		}
		if err := tx.QueryRow(ctx, `SELECT status <> 'DEAD' FROM jobs WHERE id = $1`, j.ID).Scan(&retried); err != nil {
			return err
		}
		if !retried {
			return errUnchanged
		}
		return nil
	})
	if errors.Is(err, errUnchanged) || errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	return retried && err == nil, err
}

// AdminHandler serves /v1/admin/jobs.
type AdminHandler struct {
	Queue *Queue
	// Actor names the administrator of a request, as a pause records it (paused_by): the
	// queue core knows no identities. Optional: "an administrator" without it.
	Actor func(c *fiber.Ctx) string
}

// Register adds the admin job routes to router, the /v1/admin group that requires the admin
// role.
func (h *AdminHandler) Register(router fiber.Router) {
	httpserver.Get(router, "/jobs", h.list)
	httpserver.Get(router, "/jobs/counts", h.counts)
	httpserver.Get(router, "/jobs/schedules", h.schedules)
	// Before /jobs/:id, which would take "kinds" for an id.
	httpserver.Get(router, "/jobs/kinds", h.kindStates)
	router.Post("/jobs/kinds/:kind/pause", h.pause)
	router.Post("/jobs/kinds/:kind/resume", h.resume)
	httpserver.Get(router, "/jobs/:id", h.get)
	router.Post("/jobs/:id/retry", h.action(h.Queue.RetryDead))
	router.Post("/jobs/:id/cancel", h.action(h.Queue.Cancel))
	router.Delete("/jobs/:id", h.discard)
}

func (h *AdminHandler) list(c *fiber.Ctx) error {
	f := Filter{Kind: c.Query("kind"), Status: Status(strings.ToUpper(c.Query("status")))}
	if f.Status != "" && !slices.Contains(Statuses, f.Status) {
		return apperr.Errorf(apperr.Invalid, "status must be WAITING, PENDING, PROCESSING, COMPLETED or DEAD")
	}
	if f.Kind != "" && !slices.Contains(h.Queue.kinds.names, f.Kind) {
		return apperr.Errorf(apperr.Invalid, "kind must be one of %s", strings.Join(h.Queue.kinds.names, ", "))
	}
	var err error
	if f.Before, err = httpserver.QueryID(c, "before"); err != nil {
		return err
	}
	if f.Group, err = httpserver.QueryID(c, "group"); err != nil {
		return err
	}
	if f.Limit, err = httpserver.QueryLimitUpTo(c, 100, 1000); err != nil {
		return err
	}
	rows, err := h.Queue.List(c.UserContext(), f)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []Row{}
	}
	return c.JSON(fiber.Map{"jobs": rows})
}

func (h *AdminHandler) counts(c *fiber.Ctx) error {
	counts, err := h.Queue.Counts(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"counts": counts})
}

func (h *AdminHandler) schedules(c *fiber.Ctx) error {
	rows, err := h.Queue.Schedules(c.UserContext())
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []ScheduleRow{}
	}
	return c.JSON(fiber.Map{"schedules": rows})
}

func (h *AdminHandler) get(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	row, err := h.Queue.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(row)
}

// action serves an administrator's change of one job (retry, cancel): 202 once done.
func (h *AdminHandler) action(do func(ctx context.Context, id int64) error) fiber.Handler {
	return func(c *fiber.Ctx) error {
		id, err := httpserver.ParamID(c, "id")
		if err != nil {
			return err
		}
		if err := do(c.UserContext(), id); err != nil {
			return err
		}
		return c.SendStatus(fiber.StatusAccepted)
	}
}

func (h *AdminHandler) discard(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.Queue.Discard(c.UserContext(), id); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

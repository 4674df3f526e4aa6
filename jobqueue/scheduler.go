package jobqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/lifecycle"
)

// SchedulerConfig configures a Scheduler. Zero values take the defaults named on each field.
type SchedulerConfig struct {
	// Interval is how often the scheduler reads its clock: a run starts at most this late.
	// Default 1 s.
	Interval time.Duration
	// Logger receives enqueued runs, skipped ones and errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts enqueued and skipped runs. Optional.
	Metrics *Metrics
}

// Scheduler enqueues the jobs of the Queue's periodic kinds: at each run time of a kind's
// schedule, one job for the whole cluster. Every node may run one; no leader is elected. A
// run time is enqueued in the transaction that moves the kind's job_schedules row past it,
// under that row's lock, so two nodes, a restart or a kill never enqueue it twice, and the run
// times compared are the database's clock, not the nodes'. The job then runs like any other:
// lease, fence, retries, DEAD.
//
// Run times missed while no node was enqueuing (every node down) are not made up for: the
// latest one runs once when a node comes back, the others are counted as skipped.
type Scheduler struct {
	q    *Queue
	cfg  SchedulerConfig
	loop lifecycle.Loop
	// next is each kind's next run time as last read, by the node's clock: a tick before it
	// does not ask the database. Only the loop's goroutine touches it.
	next map[string]time.Time
}

// NewScheduler returns a Scheduler of q's periodic kinds. It does nothing until Start.
func NewScheduler(q *Queue, cfg SchedulerConfig) *Scheduler {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{q: q, cfg: cfg, next: make(map[string]time.Time)}
}

// Start launches the scheduling.
func (s *Scheduler) Start(ctx context.Context) error {
	return s.loop.Every(ctx, s.cfg.Interval, s.tick)
}

// Stop ends the scheduling and waits for the enqueue in progress (its transaction rolls back
// if cancelled, and another node or the next start enqueues the run time).
func (s *Scheduler) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

// recheck bounds how long a node trusts its own clock's view of a next run time: a node whose
// clock is behind the database's starts a run at most this late.
const recheck = time.Minute

func (s *Scheduler) tick(ctx context.Context) {
	for _, name := range s.q.kinds.names {
		k := s.q.kinds.kinds[name]
		if k.Periodic == nil || time.Now().Before(s.next[name]) {
			continue
		}
		run, err := s.enqueueDue(ctx, k)
		if err != nil {
			if ctx.Err() == nil {
				s.cfg.Logger.Warn("periodic enqueue failed", "kind", name, "err", err)
			}
			continue
		}
		if run.busy {
			continue
		}
		s.next[name] = time.Now().Add(recheck)
		if !run.next.IsZero() && run.next.Before(s.next[name]) {
			s.next[name] = run.next
		}
		if run.job != 0 {
			s.cfg.Metrics.scheduled(name, run.skipped)
			s.cfg.Logger.Info("periodic job enqueued", "kind", name, "job", run.job, "run_time", run.due, "skipped", run.skipped)
		}
	}
}

// scheduledRun is what one look at a schedule did: the job enqueued for the run time due
// (job 0 when none was due), the run times skipped, and the next run time; busy when another
// transaction held the schedule (this node looks again at its next tick).
type scheduledRun struct {
	job       int64
	due, next time.Time
	skipped   int64
	busy      bool
}

// enqueueDue enqueues k's run time due now, if any, in one transaction under k's schedule row.
func (s *Scheduler) enqueueDue(ctx context.Context, k Kind) (scheduledRun, error) {
	sched := k.Periodic.Schedule
	var run scheduledRun
	err := pgx.BeginFunc(ctx, s.q.pool, func(tx pgx.Tx) error {
		run = scheduledRun{}
		// SKIP LOCKED: a node holding the row (or a transaction left open on it) is
		// enqueuing, or will roll back; waiting for it would stall this node's other kinds.
		// The look comes before any write: an INSERT … ON CONFLICT would wait on a row another
		// transaction has updated and not committed.
		var last, now time.Time
		var was string
		err := tx.QueryRow(ctx, `SELECT last_run, schedule, statement_timestamp() FROM job_schedules WHERE kind = $1 FOR UPDATE SKIP LOCKED`,
			k.Name).Scan(&last, &was, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			// Held by another transaction, or never seen. A plain read waits for nothing.
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM job_schedules WHERE kind = $1)`, k.Name).Scan(&exists); err != nil {
				return err
			}
			run.busy = true
			if exists {
				return nil
			}
			// Seen for the first time: it starts now, and its first run is its first run time
			// after that. Two nodes seeing it at once: the second waits for the first's short
			// transaction and inserts nothing.
			_, err := tx.Exec(ctx, `
				INSERT INTO job_schedules (kind, schedule, last_run) VALUES ($1, $2, statement_timestamp())
				ON CONFLICT (kind) DO NOTHING`, k.Name, sched.String())
			return err
		}
		if err != nil {
			return err
		}
		due, skipped, ok := dueRunTime(sched, last, now)
		if was != sched.String() {
			// A schedule changed in a deploy missed nothing: its new run times since the
			// old one's last are not an outage.
			skipped = 0
		}
		if !ok {
			run.next = sched.Next(last)
			_, err := tx.Exec(ctx, `
				UPDATE job_schedules SET schedule = $2, next_run = $3
				WHERE kind = $1 AND (schedule, next_run) IS DISTINCT FROM ($2, $3)`, k.Name, sched.String(), timeOrNull(run.next))
			return err
		}
		id, err := Enqueue(ctx, tx, k.Name, due.UnixMilli(), cmp.Or(k.Periodic.MaxAttempts, 3))
		if err != nil {
			return err
		}
		run = scheduledRun{job: id, due: due, next: sched.Next(due), skipped: skipped}
		_, err = tx.Exec(ctx, `
			UPDATE job_schedules SET schedule = $2, last_run = $3, last_job_id = $4, next_run = $5, skipped = skipped + $6
			WHERE kind = $1`, k.Name, sched.String(), due, id, timeOrNull(run.next), skipped)
		return err
	})
	if err != nil {
		return scheduledRun{}, fmt.Errorf("schedule %s: %w", k.Name, err)
	}
	return run, nil
}

// timeOrNull is t, or SQL NULL for the zero time (a schedule with no next run time).
func timeOrNull(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// ScheduleRow is a periodic kind's schedule as the admin routes show it.
type ScheduleRow struct {
	Kind     string     `json:"kind"`
	Schedule string     `json:"schedule"`
	LastRun  time.Time  `json:"last_run"`
	LastJob  *int64     `json:"last_job_id,omitempty"`
	NextRun  *time.Time `json:"next_run,omitempty"`
	Skipped  int64      `json:"skipped"`
}

// Schedules returns every periodic kind's schedule that a node has enqueued, by kind.
func (q *Queue) Schedules(ctx context.Context) ([]ScheduleRow, error) {
	rows, err := q.pool.Query(ctx, `
		SELECT kind, schedule, last_run, last_job_id, next_run, skipped FROM job_schedules ORDER BY kind`)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (ScheduleRow, error) {
		var r ScheduleRow
		err := row.Scan(&r.Kind, &r.Schedule, &r.LastRun, &r.LastJob, &r.NextRun, &r.Skipped)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	return list, nil
}

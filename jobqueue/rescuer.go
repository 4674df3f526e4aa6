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

// RescuerConfig configures a Rescuer. Zero values take the defaults named on each field.
type RescuerConfig struct {
	// Interval is the time between sweeps. Default 5 s.
	Interval time.Duration
	// Logger receives swept jobs and errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics counts swept jobs as the outcome "dead". Optional.
	Metrics *Metrics
}

// Rescuer turns PROCESSING jobs that lost their kind's MaxLostLeases-th lease into DEAD, with
// their kind's Lock and Fail hooks, for every kind registered with the Queue. A node runs one.
// (An expired job with leases left to lose is not the rescuer's: the next claim of its kind
// takes it after its lost-lease back-off, its attempts untouched.) Such a job killed or hung
// its worker on every run: it is stopped within MaxLostLeases runs, however many attempts it
// has.
//
// One rescuer for all kinds, running each job's own kind's hooks, keeps jobs from being left
// stuck: were each kind's worker to sweep every kind with its own hooks, the encode worker
// would mark an expired ingest job DEAD without failing its media (which would stay
// PROCESSING forever, with no notification).
// Expired jobs of kinds this node does not know are logged and left alone: a node that knows
// the kind will sweep them properly.
type Rescuer struct {
	q    *Queue
	cfg  RescuerConfig
	loop lifecycle.Loop
}

// NewRescuer returns a Rescuer on q. It does nothing until Start.
func NewRescuer(q *Queue, cfg RescuerConfig) *Rescuer {
	cfg.Interval = cmp.Or(cfg.Interval, 5*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Rescuer{q: q, cfg: cfg}
}

// Start launches the sweeps.
func (r *Rescuer) Start(ctx context.Context) error {
	return r.loop.Every(ctx, r.cfg.Interval, r.tick)
}

// Stop ends the sweeps and waits for the one in progress.
func (r *Rescuer) Stop(ctx context.Context) error { return r.loop.Stop(ctx) }

func (r *Rescuer) tick(ctx context.Context) {
	swept, err := r.Sweep(ctx)
	if err != nil && ctx.Err() == nil {
		r.cfg.Logger.Warn("sweep of expired jobs failed", "err", err)
	}
	for _, j := range swept {
		r.cfg.Metrics.observe(j.Kind, "dead", 0)
		r.cfg.Logger.Error("job is dead: its worker died or hung on each of its runs", "job", j.ID, "kind", j.Kind, "subject", j.Subject, "runs", j.LostLeases+1)
	}
}

// rescueReason is the last_error of a job the rescuer swept after its runs lost their leases.
func rescueReason(runs int) string {
	return fmt.Sprintf("the worker died or hung on each of the job's %d runs (every lease expired); not claimed again", runs)
}

// Sweep makes one pass and returns the jobs it marked DEAD. Several nodes may sweep at once:
// each job is swept by exactly one of them. A job that cannot be swept (its kind's Lock or
// Fail hook failed) stays PROCESSING for the next pass, and the pass goes on: one such job,
// first in lease order, must not keep every job behind it from ever being swept. Its error is
// returned, joined with the others.
func (r *Rescuer) Sweep(ctx context.Context) ([]Job, error) {
	r.logUnknown(ctx)
	maxLost := make([]int32, len(r.q.kinds.names))
	for i, name := range r.q.kinds.names {
		maxLost[i] = int32(r.q.kinds.kinds[name].withDefaults().MaxLostLeases)
	}
	rows, err := r.q.pool.Query(ctx, `
		SELECT `+jobColumns+` FROM unnest($1::text[], $2::int[]) AS k(kind, max_lost)
		CROSS JOIN LATERAL (
		    SELECT * FROM jobs j
		    WHERE j.kind = k.kind AND j.status = 'PROCESSING' AND j.lease_until <= statement_timestamp()
		      AND j.lost_count + 1 >= k.max_lost
		    ORDER BY j.lease_until LIMIT 100) j
		ORDER BY j.lease_until LIMIT 100`, r.q.kinds.names, maxLost)
	if err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	candidates, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return nil, fmt.Errorf("find expired jobs: %w", err)
	}
	var swept []Job
	var errs []error
	for _, j := range candidates {
		if ctx.Err() != nil {
			break
		}
		dead, err := r.sweepOne(ctx, j)
		if err != nil {
			errs = append(errs, fmt.Errorf("sweep job %d: %w", j.ID, err))
		}
		if dead {
			swept = append(swept, j)
		}
	}
	return swept, errors.Join(errs...)
}

// sweepOne marks j DEAD if it is still the expired claim the sweep saw, as a transition:
// the kind's domain rows locked first, then the job row, like every finish.
func (r *Rescuer) sweepOne(ctx context.Context, j Job) (bool, error) {
	reason := rescueReason(j.LostLeases + 1)
	cause := WithReason(errors.New(reason), "processing stopped: the worker running it died or hung on every try")
	var fail func(ctx context.Context, tx pgx.Tx) error
	if kindFail := r.q.kinds.kinds[j.Kind].Fail; kindFail != nil {
		fail = func(ctx context.Context, tx pgx.Tx) error { return kindFail(ctx, tx, j, cause) }
	}
	// 0 rows: another node swept it first, or its worker came back in time.
	return r.q.transition(ctx, j, change{to: StatusDead, cause: cause}, fail, `
		UPDATE jobs SET status = 'DEAD', completed_at = statement_timestamp(), lease_until = NULL, last_error = $3, `+appendError("$3")+`
		WHERE id = $1 AND status = 'PROCESSING' AND claim_token = $2::uuid AND lease_until <= statement_timestamp()`,
		j.ID, j.ClaimToken, reason)
}

// logUnknown warns about expired jobs of kinds this node does not know that the default
// MaxLostLeases would make DEAD.
func (r *Rescuer) logUnknown(ctx context.Context) {
	rows, err := r.q.pool.Query(ctx, `
		SELECT kind, count(*) FROM jobs
		WHERE status = 'PROCESSING' AND lease_until <= statement_timestamp() AND lost_count + 1 >= $2
		  AND kind <> ALL($1::text[])
		GROUP BY kind`, r.q.kinds.names, DefaultMaxLostLeases)
	if err != nil {
		return // the sweep's own query reports a broken database
	}
	defer rows.Close()
	for rows.Next() {
		var kind string
		var n int
		if rows.Scan(&kind, &n) == nil {
			r.cfg.Logger.Warn("expired jobs of a kind this node does not know; left for a node that does", "kind", kind, "jobs", n)
		}
	}
}

package jobqueue

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/dbpool"
	"github.com/playhead/playhead/lifecycle"
)

// PrunerConfig configures a Pruner. Zero values take the defaults named on each field.
type PrunerConfig struct {
	// CompletedAfter and DeadAfter are how long COMPLETED and DEAD jobs are kept. Defaults 7
	// and 30 days.
	CompletedAfter, DeadAfter time.Duration
	// Interval is the time between prunes. Default 10 min.
	Interval time.Duration
	// Batch is how many rows one DELETE removes. Default 1 000.
	Batch int
	// Logger receives prune counts and errors. Default slog.Default().
	Logger *slog.Logger
}

// Pruner deletes finished jobs after their retention, every Interval. River and Oban prune the
// same way; their users' table-bloat reports are why a queue must prune at all.
type Pruner struct {
	q    *Queue
	cfg  PrunerConfig
	loop lifecycle.Loop
}

// NewPruner returns a Pruner on q. It does nothing until Start.
func NewPruner(q *Queue, cfg PrunerConfig) *Pruner {
	cfg.CompletedAfter = cmp.Or(cfg.CompletedAfter, 7*24*time.Hour)
	cfg.DeadAfter = cmp.Or(cfg.DeadAfter, 30*24*time.Hour)
	cfg.Interval = cmp.Or(cfg.Interval, 10*time.Minute)
	cfg.Batch = cmp.Or(cfg.Batch, 1000)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Pruner{q: q, cfg: cfg}
}

// Start launches the prunes.
func (p *Pruner) Start(ctx context.Context) error {
	return p.loop.Every(ctx, p.cfg.Interval, p.tick)
}

// Stop ends the prunes and waits for the one in progress (its batch rolls back if cancelled).
func (p *Pruner) Stop(ctx context.Context) error { return p.loop.Stop(ctx) }

func (p *Pruner) tick(ctx context.Context) {
	n, err := p.Prune(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		p.cfg.Logger.Warn("job retention failed", "err", err)
	case n > 0:
		p.cfg.Logger.Info("pruned finished jobs", "deleted", n)
	}
}

// pruneLockKey is the advisory lock that lets one node at a time prune.
const pruneLockKey = 0x706c6179_72657465 // "playrete"

// pruneSQL deletes one batch of jobs of status $1 finished more than $2 ago.
//
// The batch's rows are locked by the inner SELECT (FOR UPDATE), and that is what spares a row
// changed meanwhile: under READ COMMITTED, a row another transaction changed while the lock
// waited is re-checked against that SELECT's own WHERE, so a job an admin retry made PENDING
// again is left out. A plain "DELETE … WHERE id IN (subquery)" re-checked nothing but the id: an admin retry
// racing a prune had its job deleted (220 of 267 in one test; with a tiny retention, PENDING
// and PROCESSING rows of running jobs went too). Repeating the status and age on the outer
// DELETE fixed that, but let PostgreSQL join the batch's ids against every finished row past
// its retention (a hash semi-join): each batch read the whole backlog. The locked ids, as one
// array, make the DELETE a primary-key lookup: a batch reads a batch (and a join on the ids
// would still be free to hash the whole table).
//
// A deleted job of a group takes the edges that name it as the dependant (forgetEdges).
const pruneSQL = `
WITH gone AS (
    DELETE FROM jobs
    WHERE id = ANY(ARRAY(
        SELECT id FROM jobs
        WHERE status = $1 AND completed_at < statement_timestamp() - $2::interval
        ORDER BY completed_at LIMIT $3
        FOR UPDATE))
    RETURNING id, group_id
)
` + forgetEdges

// forgetEdges follows a CTE "gone" of deleted jobs (id, group_id): it deletes the edges whose
// dependant is one of the grouped ones, and counts the jobs deleted (as the statement's
// command tag does not). An edge whose parent went is kept: it still says whether that parent
// COMPLETED (done), which is what its dependant waits for, and it goes with its dependant.
const forgetEdges = `, edges AS (
    DELETE FROM job_dependencies d USING gone WHERE gone.group_id IS NOT NULL AND d.job_id = gone.id
)
SELECT count(*) FROM gone`

// Prune deletes finished jobs older than their retention, in batches (dbpool.Batches), each in
// its own short transaction under a transaction advisory lock: one node prunes at a time, and
// no transaction grows with the backlog. It returns how many rows it deleted.
func (p *Pruner) Prune(ctx context.Context) (int64, error) {
	var total int64
	for _, r := range []struct {
		status Status
		age    time.Duration
	}{{StatusCompleted, p.cfg.CompletedAfter}, {StatusDead, p.cfg.DeadAfter}} {
		// Bounded: at most 1000 batches per call; the next run continues.
		deleted, err := dbpool.Batches(ctx, p.q.pool, pruneLockKey, p.cfg.Batch, 1000, func(tx pgx.Tx) (int64, error) {
			var deleted int64
			err := tx.QueryRow(ctx, pruneSQL, r.status, r.age, p.cfg.Batch).Scan(&deleted)
			return deleted, err
		})
		total += deleted
		if err != nil {
			return total, fmt.Errorf("prune %s jobs: %w", r.status, err)
		}
	}
	return total, nil
}

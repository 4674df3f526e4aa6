package jobqueue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/lifecycle"
)

// maxCompleteBatch caps the jobs one batch completion carries (and so the arrays of one
// statement). It is also how many finished jobs a runner may hold, waiting for their batch,
// beyond its Concurrency: at most that many jobs ran and are not yet marked COMPLETED, the
// jobs a crash at that moment would run again (their leases expire and the next claim takes
// them: at-least-once, as a crash between Run and a single completion always was).
const maxCompleteBatch = 1000

// errCompleterStopped is what a completion gets when the completer stopped before taking it:
// the runner then completes the job on its own.
var errCompleterStopped = errors.New("jobqueue: completer stopped")

// completer finishes the successful runs of one Runner's batchable jobs (no Lock hook, no
// domain writes) in batches, as River's batch completer does: it waits for a first
// completion, collects whatever else arrives within the window (or until the batch is full),
// and finishes them all with Queue.completeBatch, one fenced statement. Each job's goroutine
// waits for its own outcome, so what follows a completion (Committed, Discard, the outcome
// metric, the settling of an unknown outcome) is the same as for a completion on its own.
//
// Kinds with domain writes are not batched (Runner.finishAlone): their Lock hook locks rows
// the queue knows nothing about (the owner, then the media), and one transaction holding the
// locks of many jobs until it commits would take them in an order the queue cannot sort,
// deadlocking against another node's batch whose jobs share owners. Those kinds run for
// seconds (an encode, a download), so a transaction per job costs them nothing measurable.
type completer struct {
	q      *Queue
	window time.Duration
	// hurry is closed when the runner stops: a batch is then sent without waiting for the
	// window.
	hurry   <-chan struct{}
	timeout time.Duration
	in      chan completion
	loop    lifecycle.Loop
	// stopped is closed when the loop has returned: a completion then goes its own way.
	stopped chan struct{}
}

// completion is one job waiting for its batch.
type completion struct {
	job Job
	// result receives nil (committed), ErrClaimLost, or the error that left the batch's
	// outcome unknown. Buffered: the completer never waits for the job's goroutine.
	result chan error
}

func newCompleter(q *Queue, window, timeout time.Duration, hurry <-chan struct{}) *completer {
	return &completer{q: q, window: window, hurry: hurry, timeout: timeout,
		in: make(chan completion), stopped: make(chan struct{})}
}

func (c *completer) start(ctx context.Context) error {
	return c.loop.Start(ctx, func(ctx context.Context) {
		defer close(c.stopped)
		for {
			select {
			case <-ctx.Done():
				return
			case first := <-c.in:
				c.finish(c.collect(first))
			}
		}
	})
}

func (c *completer) stop(ctx context.Context) error { return c.loop.Stop(ctx) }

// complete hands j to the batch and waits for its outcome; errCompleterStopped when the
// completer no longer takes completions.
func (c *completer) complete(j Job) error {
	done := completion{job: j, result: make(chan error, 1)}
	select {
	case c.in <- done:
		return <-done.result
	case <-c.stopped:
		return errCompleterStopped
	}
}

// collect gathers first and what arrives within the window after it, up to a full batch.
func (c *completer) collect(first completion) []completion {
	batch := []completion{first}
	window := time.NewTimer(c.window)
	defer window.Stop()
	for len(batch) < maxCompleteBatch {
		select {
		case next := <-c.in:
			batch = append(batch, next)
		case <-window.C:
			return batch
		case <-c.hurry:
			return c.drain(batch)
		}
	}
	return batch
}

// drain adds the completions already waiting, without waiting for more.
func (c *completer) drain(batch []completion) []completion {
	for len(batch) < maxCompleteBatch {
		select {
		case next := <-c.in:
			batch = append(batch, next)
		default:
			return batch
		}
	}
	return batch
}

// finish completes batch in one statement and tells each job its outcome. The statement is
// not cancelled by Stop (the jobs' goroutines are waiting for it), only bounded by the
// runner's FinishTimeout.
func (c *completer) finish(batch []completion) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	jobs := make([]Job, len(batch))
	for i, b := range batch {
		jobs[i] = b.job
	}
	results, err := c.q.completeBatch(ctx, jobs)
	for i, b := range batch {
		if err != nil {
			b.result <- err
			continue
		}
		b.result <- results[i]
	}
}

// completeBatchSQL completes every job of a batch whose row still passes the fence (this job,
// PROCESSING, under this claim's token, lease live) in one statement, so one round trip and one
// commit finish the whole batch. It returns the claim tokens of the rows it changed: a job whose
// token is missing had lost its claim, and nothing was written for it.
const completeBatchSQL = `
UPDATE jobs j
SET status = 'COMPLETED', completed_at = statement_timestamp(), lease_until = NULL, last_error = NULL
FROM unnest($1::bigint[], $2::uuid[]) AS c(id, token)
WHERE j.id = c.id AND j.status = 'PROCESSING' AND j.claim_token = c.token AND j.lease_until > statement_timestamp()
RETURNING j.claim_token::text`

// completeBatch marks jobs COMPLETED in one fenced statement (its own transaction) and reports,
// for each job in order, nil when its completion committed and ErrClaimLost when its claim was
// lost. It is only for jobs whose kind has no Lock hook and whose completion has no domain
// writes (see Runner): there is nothing of theirs to roll back but the job row itself. An
// error means the outcome of every job in the batch is unknown (the statement may have
// committed): settle each with Settle.
func (q *Queue) completeBatch(ctx context.Context, jobs []Job) ([]error, error) {
	ids := make([]int64, len(jobs))
	tokens := make([]string, len(jobs))
	grouped := false
	for i, j := range jobs {
		ids[i], tokens[i] = j.ID, j.ClaimToken
		grouped = grouped || j.Group != 0
	}
	var won []string
	var err error
	if grouped {
		// The same statement, then the dependants of the jobs it completed count them done,
		// in its transaction: plain batches keep their one statement, so jobs without a group
		// pay nothing for dependencies.
		err = pgx.BeginFunc(ctx, q.pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, completeBatchSQL, ids, tokens)
			if err != nil {
				return err
			}
			if won, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
				return err
			}
			completed := make([]int64, 0, len(won))
			for i, j := range jobs {
				if j.Group != 0 && slices.Contains(won, tokens[i]) {
					completed = append(completed, j.ID)
				}
			}
			if len(completed) == 0 {
				return nil
			}
			return releaseDependants(ctx, tx, completed...)
		})
	} else {
		var rows pgx.Rows
		if rows, err = q.pool.Query(ctx, completeBatchSQL, ids, tokens); err == nil {
			won, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("complete %d jobs: %w", len(jobs), err)
	}
	committed := make(map[string]bool, len(won))
	for _, token := range won {
		committed[token] = true
	}
	results := make([]error, len(jobs))
	for i, j := range jobs {
		if !committed[j.ClaimToken] {
			results[i] = ErrClaimLost
		}
	}
	return results, nil
}

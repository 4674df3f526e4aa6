package encodejobs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/backoff"
)

// Kind is one kind of job the worker runs.
type Kind struct {
	// Name is the jobs.kind value.
	Name string
	// Run does the work outside any transaction. On success it returns the writes to make
	// inside the fenced completion. On error it must have cleaned up after itself (deleted the
	// files it wrote). Wrap an error with Permanent when retrying cannot help.
	Run func(ctx context.Context, j Job) (Result, error)
	// Fail writes the domain side of a job that is DEAD. Optional.
	Fail DeadFunc
}

// Result is a successful run, waiting to be committed.
type Result struct {
	// Commit makes the domain writes inside the fenced completion. Optional.
	Commit DomainFunc
	// Discard undoes Run's side effects when the completion fails (the claim was lost).
	// Optional.
	Discard func(ctx context.Context)
	// Committed runs after the completion committed: cleanup that only the winner may do,
	// such as deleting what workers that died mid-job left behind. Optional; its failure is
	// logged, the job stays completed.
	Committed func(ctx context.Context) error
}

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the job goes DEAD at once.
func Permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether err was marked with Permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[permanentError](err)
	return ok
}

// errStopping is the cancel cause of jobs interrupted by a graceful stop.
var errStopping = errors.New("encodejobs: worker stopping")

// WorkerConfig configures a Worker. Zero values take the defaults named on each field.
type WorkerConfig struct {
	// Node names this worker in claimed_by. Required.
	Node string
	// Concurrency is how many jobs run at once on this node. Default 1.
	Concurrency int
	// Lease is the claim's lease; heartbeats extend it every Lease/3. Must match the Queue's.
	// Default 60 s.
	Lease time.Duration
	// PollInterval is the fallback poll when no notification arrives. Default 1 s.
	PollInterval time.Duration
	// RetryBase and RetryCap shape the backoff before a failed job's next attempt (full
	// jitter). Defaults 5 s and 5 min.
	RetryBase, RetryCap time.Duration
	// FinishTimeout bounds the database writes after a job ends. Default 30 s.
	FinishTimeout time.Duration
	// Logger receives job outcomes and errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the worker's figures. Optional.
	Metrics *Metrics
}

func (c WorkerConfig) withDefaults() WorkerConfig {
	c.Concurrency = cmp.Or(c.Concurrency, 1)
	c.Lease = cmp.Or(c.Lease, 60*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.RetryBase = cmp.Or(c.RetryBase, 5*time.Second)
	c.RetryCap = cmp.Or(c.RetryCap, 5*time.Minute)
	c.FinishTimeout = cmp.Or(c.FinishTimeout, 30*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Worker claims jobs and runs them: one poller goroutine claims up to the free slots, and each
// claimed job runs in its own goroutine with a heartbeat beside it.
type Worker struct {
	q     *Queue
	cfg   WorkerConfig
	kinds map[string]Kind
	names []string

	// running is written by the poller (+1) and job goroutines (−1), read by the poller.
	running atomic.Int32
	wake    chan struct{}

	ctx    context.Context // cancelled with errStopping by Stop: running jobs see it
	cancel context.CancelCauseFunc
	stop   chan struct{}
	done   chan struct{} // closed when the poller has exited
	jobs   sync.WaitGroup
	once   sync.Once
}

// NewWorker returns a worker for kinds. It does nothing until Start.
func NewWorker(q *Queue, cfg WorkerConfig, kinds ...Kind) (*Worker, error) {
	cfg = cfg.withDefaults()
	if cfg.Node == "" {
		return nil, errors.New("encodejobs: WorkerConfig.Node is required")
	}
	if len(kinds) == 0 {
		return nil, errors.New("encodejobs: a worker needs at least one kind")
	}
	w := &Worker{q: q, cfg: cfg, kinds: map[string]Kind{}, wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, k := range kinds {
		w.kinds[k.Name] = k
		w.names = append(w.names, k.Name)
	}
	w.ctx, w.cancel = context.WithCancelCause(context.Background())
	return w, nil
}

// Wake makes the poller claim now. The LISTEN handler calls it for every notification.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Start launches the poller.
func (w *Worker) Start() { go w.poll() }

// Stop stops claiming, cancels running jobs (their ffmpeg is killed) and gives each claim
// back, then returns. It is idempotent; ctx bounds the wait.
func (w *Worker) Stop(ctx context.Context) error {
	w.once.Do(func() {
		close(w.stop)
		w.cancel(errStopping)
	})
	finished := make(chan struct{})
	go func() { <-w.done; w.jobs.Wait(); close(finished) }()
	select {
	case <-finished:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("worker stop: %w", ctx.Err())
	}
}

func (w *Worker) poll() {
	defer close(w.done)
	ticker := time.NewTicker(w.cfg.PollInterval)
	defer ticker.Stop()
	var lastSweep time.Time
	for {
		if free := w.cfg.Concurrency - int(w.running.Load()); free > 0 {
			w.claim(free)
		}
		if time.Since(lastSweep) >= 5*w.cfg.PollInterval {
			lastSweep = time.Now()
			w.sweep()
		}
		select {
		case <-w.stop:
			return
		case <-w.wake:
		case <-ticker.C:
		}
	}
}

func (w *Worker) claim(free int) {
	jobs, err := w.q.Claim(w.ctx, w.names, free, w.cfg.Node)
	if err != nil {
		if w.ctx.Err() == nil {
			w.cfg.Logger.Warn("claim failed", "err", err)
		}
		return
	}
	for _, j := range jobs {
		w.cfg.Metrics.claimed(j.Kind)
		w.running.Add(1)
		w.jobs.Go(func() {
			defer func() {
				w.running.Add(-1)
				w.Wake() // a slot is free: claim the next job now
			}()
			w.execute(j)
		})
	}
}

func (w *Worker) sweep() {
	swept, err := w.q.SweepExpired(w.ctx, func(kind string) DeadFunc { return w.kinds[kind].Fail })
	if err != nil && w.ctx.Err() == nil {
		w.cfg.Logger.Warn("sweep of expired jobs failed", "err", err)
	}
	for _, j := range swept {
		w.cfg.Metrics.observe(j.Kind, "dead", 0)
		w.cfg.Logger.Error("job is dead: its lease expired on the last attempt", "job", j.ID, "kind", j.Kind, "media", j.MediaID)
	}
}

// execute runs one claimed job to its end: completed, retried, dead, released or lost.
func (w *Worker) execute(j Job) {
	kind := w.kinds[j.Kind]
	log := w.cfg.Logger.With("job", j.ID, "kind", j.Kind, "media", j.MediaID, "attempt", j.Attempt)
	ctx, cancel := context.WithCancelCause(w.ctx)
	defer cancel(nil)
	heartbeatDone := w.heartbeat(ctx, cancel, j, log)

	start := time.Now()
	res, err := kind.Run(ctx, j)
	cancel(nil) // stop the heartbeat; the cause of an earlier cancel is kept
	<-heartbeatDone
	cause := context.Cause(ctx)

	// The writes after a job ends must happen even when the job was cancelled.
	finishCtx, finishCancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.FinishTimeout)
	defer finishCancel()
	outcome := w.finish(finishCtx, kind, j, res, err, cause, log)
	w.cfg.Metrics.observe(j.Kind, outcome, time.Since(start))
}

func (w *Worker) finish(ctx context.Context, kind Kind, j Job, res Result, runErr, cause error, log *slog.Logger) string {
	discard := func() {
		if res.Discard != nil {
			res.Discard(ctx)
		}
	}
	switch {
	case runErr == nil:
		err := w.q.Complete(ctx, j, res.Commit)
		if err == nil {
			log.Info("job completed")
			if res.Committed != nil {
				if err := res.Committed(ctx); err != nil {
					log.Warn("cleanup after completion failed", "err", err)
				}
			}
			return "completed"
		}
		discard()
		if errors.Is(err, ErrClaimLost) {
			log.Warn("claim lost before completion; result discarded")
			return "claim_lost"
		}
		log.Error("completing job failed; its lease will expire and another attempt will run", "err", err)
		return "error"
	case errors.Is(cause, ErrClaimLost):
		log.Warn("claim lost while running; job abandoned", "err", runErr)
		return "claim_lost"
	case errors.Is(cause, errStopping):
		if err := w.q.Release(ctx, j); err != nil {
			log.Error("releasing job on stop failed; its lease will expire", "err", err)
			return "error"
		}
		log.Info("job released for another node (graceful stop)")
		return "released"
	case IsPermanent(runErr) || j.LastAttempt():
		reason := runErr.Error()
		err := w.q.Dead(ctx, j, reason, func(ctx context.Context, tx pgx.Tx, owner int64) error {
			if kind.Fail == nil {
				return nil
			}
			return kind.Fail(ctx, tx, j, owner, runErr)
		})
		if err != nil {
			log.Error("marking job dead failed", "err", err)
			return lostOrError(err)
		}
		log.Error("job is dead", "err", runErr)
		return "dead"
	default:
		delay := backoff.Delay(j.Attempt, w.cfg.RetryBase, w.cfg.RetryCap, retryAfterOf(runErr))
		if err := w.q.Retry(ctx, j, runErr.Error(), delay); err != nil {
			log.Error("scheduling retry failed", "err", err)
			return lostOrError(err)
		}
		log.Warn("job failed; will retry", "err", runErr, "delay", delay.String())
		return "retried"
	}
}

func lostOrError(err error) string {
	if errors.Is(err, ErrClaimLost) {
		return "claim_lost"
	}
	return "error"
}

// heartbeat extends the lease every Lease/3 until ctx ends. When the lease cannot be
// extended because the claim is gone, it cancels the job with ErrClaimLost.
func (w *Worker) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, j Job, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(w.cfg.Lease / 3)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				err := w.q.Heartbeat(ctx, j)
				switch {
				case errors.Is(err, ErrClaimLost):
					cancel(ErrClaimLost)
					return
				case err != nil && ctx.Err() == nil:
					// A database blip: keep trying; if the lease runs out meanwhile, the next
					// heartbeat finds the claim lost.
					log.Warn("heartbeat failed", "err", err)
				}
			}
		}
	}()
	return done
}

package jobqueue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/playhead/playhead/backoff"
	"github.com/playhead/playhead/lifecycle"
)

// errStopping is the cancel cause of jobs interrupted by a graceful stop.
var errStopping = errors.New("jobqueue: runner stopping")

// RunnerConfig configures a Runner. Zero values take the defaults named on each field.
type RunnerConfig struct {
	// Kind is the kind this runner claims and runs; it must be registered with the Queue with
	// a Run function. Required.
	Kind string
	// Node names this node in claimed_by. Required.
	Node string
	// Concurrency is how many jobs of the kind run at once on this node. Default 1.
	Concurrency int
	// PollInterval is the fallback poll when no notification arrives. Default 1 s.
	PollInterval time.Duration
	// RetryBase and RetryCap shape the backoff before a failed job's next attempt (full
	// jitter). Defaults 5 s and 5 min.
	RetryBase, RetryCap time.Duration
	// FinishTimeout bounds the database writes after a job ends. Default 30 s.
	FinishTimeout time.Duration
	// CompleteWindow is how long the completer collects the successful runs of jobs without
	// domain writes before it finishes them in one fenced statement (see completer). Longer
	// windows make fewer, larger batches; a job's COMPLETED row lands up to this much later.
	// Default 5 ms.
	CompleteWindow time.Duration
	// Logger receives job outcomes and errors. Default slog.Default().
	Logger *slog.Logger
	// Metrics receives the runner's figures. Optional.
	Metrics *Metrics
}

func (c RunnerConfig) withDefaults() RunnerConfig {
	c.Concurrency = cmp.Or(c.Concurrency, 1)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.RetryBase = cmp.Or(c.RetryBase, 5*time.Second)
	c.RetryCap = cmp.Or(c.RetryCap, 5*time.Minute)
	c.FinishTimeout = cmp.Or(c.FinishTimeout, 30*time.Second)
	c.CompleteWindow = cmp.Or(c.CompleteWindow, 5*time.Millisecond)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Runner claims the jobs of one kind and runs them: one poller goroutine claims up to the
// free slots in one statement, and each claimed job runs in its own goroutine with a heartbeat
// beside it. Its lease is the Queue's, so the heartbeat and the claim can never disagree about
// it.
//
// A successful run of a job without domain writes (its kind has no Lock hook and its Result no
// Commit) frees its slot at once and waits for the completer, which finishes many such jobs in
// one fenced statement; every other ending (a completion with domain writes, a retry, a death,
// a release) is one fenced transaction of its own, as before.
type Runner struct {
	q         *Queue
	cfg       RunnerConfig
	kind      Kind
	completer *completer

	// running counts the jobs in their Run; finishing those that ran and wait for their
	// batch's completion. Both are written by the poller (+1 running) and job goroutines,
	// read by the poller.
	running   atomic.Int32
	finishing atomic.Int32
	wake      chan struct{}
	poller    lifecycle.Loop

	// jobsCtx is the parent of every job's context; Stop cancels it with errStopping.
	jobsCtx    context.Context
	cancelJobs context.CancelCauseFunc
	jobs       sync.WaitGroup
}

// NewRunner returns a runner of cfg.Kind on q. It does nothing until Start.
func NewRunner(q *Queue, cfg RunnerConfig) (*Runner, error) {
	cfg = cfg.withDefaults()
	kind, ok := q.kinds.kinds[cfg.Kind]
	switch {
	case cfg.Node == "":
		return nil, errors.New("jobqueue: RunnerConfig.Node is required")
	case !ok:
		return nil, fmt.Errorf("jobqueue: kind %q is not registered with the queue", cfg.Kind)
	case kind.Run == nil:
		return nil, fmt.Errorf("jobqueue: kind %q has no Run function", cfg.Kind)
	case cfg.Concurrency < 1:
		return nil, errors.New("jobqueue: RunnerConfig.Concurrency must be positive")
	}
	r := &Runner{q: q, cfg: cfg, kind: kind, wake: make(chan struct{}, 1)}
	r.jobsCtx, r.cancelJobs = context.WithCancelCause(context.Background())
	r.completer = newCompleter(q, cfg.CompleteWindow, cfg.FinishTimeout, r.jobsCtx.Done())
	return r, nil
}

// Wake makes the poller claim now. The LISTEN handler calls it for every notification.
func (r *Runner) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start launches the completer and the poller.
func (r *Runner) Start(ctx context.Context) error {
	if err := r.completer.start(ctx); err != nil {
		return err
	}
	return r.poller.Start(ctx, r.poll)
}

// Stop stops claiming, cancels running jobs and gives each claim back (attempt returned), and
// returns when every job goroutine has ended or ctx is done. It is idempotent and safe when
// the runner was never started.
func (r *Runner) Stop(ctx context.Context) error {
	err := r.poller.Stop(ctx)
	r.cancelJobs(errStopping)
	finished := make(chan struct{})
	go func() { r.jobs.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("%s runner: jobs still running: %w", r.cfg.Kind, context.Cause(ctx)))
	}
	// Only now: the jobs that ended were waiting for their batch. A job still running past
	// ctx completes on its own.
	return errors.Join(err, r.completer.stop(ctx))
}

func (r *Runner) poll(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	for {
		if free := r.freeSlots(); free > 0 {
			r.claim(ctx, free)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-ticker.C:
		}
	}
}

// freeSlots is how many jobs the poller may claim: the slots no Run occupies, as long as the
// jobs waiting for their batch stay within one batch's worth beyond the Concurrency.
func (r *Runner) freeSlots() int {
	running, finishing := int(r.running.Load()), int(r.finishing.Load())
	return min(r.cfg.Concurrency-running, r.cfg.Concurrency+maxCompleteBatch-running-finishing)
}

func (r *Runner) claim(ctx context.Context, free int) {
	// The claim is not cancelled by Stop: a claim that commits must reach this runner, which
	// then releases its jobs at once, rather than be abandoned to burn an attempt on lease
	// expiry. Half a lease bounds it; a later answer finds the heartbeat's deadline near.
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.q.lease/2)
	defer cancel()
	sent := time.Now()
	jobs, err := r.q.Claim(claimCtx, r.cfg.Kind, free, r.cfg.Node)
	if err != nil {
		if ctx.Err() == nil {
			r.cfg.Logger.Warn("claim failed", "kind", r.cfg.Kind, "err", err)
		}
		return
	}
	for _, j := range jobs {
		r.cfg.Metrics.claimed(j.Kind)
		r.running.Add(1)
		r.jobs.Go(func() { r.execute(j, sent) })
	}
}

// execute runs one claimed job to its end: completed, retried, dead, released or lost.
// claimSent is when the claim statement was sent: the lease runs from no earlier than that.
// Its slot is freed when it ends, or earlier, once its Run is done, if it waits for a batch.
func (r *Runner) execute(j Job, claimSent time.Time) {
	s := &slot{r: r}
	defer s.free()
	log := r.cfg.Logger.With("job", j.ID, "kind", j.Kind, "subject", j.Subject, "attempt", j.Attempt)
	if !time.Now().Before(localDeadline(claimSent, r.q.lease)) {
		// The claim's answer came too late (a stalled network): the lease may already be
		// another node's. Starting the work could run the job twice at once.
		log.Warn("claim arrived past its lease's local deadline; not run")
		r.cfg.Metrics.observe(j.Kind, "claim_lost", 0)
		return
	}
	ctx, cancel := context.WithCancelCause(r.jobsCtx)
	defer cancel(nil)
	heartbeatDone := r.heartbeat(ctx, cancel, j, claimSent, log)

	start := time.Now()
	res, err := r.kind.Run(ctx, j)
	cancel(nil) // stop the heartbeat; the cause of an earlier cancel is kept
	<-heartbeatDone
	cause := context.Cause(ctx)

	// The writes after a job ends must happen even when the job was cancelled.
	finishCtx, finishCancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.FinishTimeout)
	defer finishCancel()
	outcome := r.finish(finishCtx, j, res, err, cause, s, log)
	r.cfg.Metrics.observe(j.Kind, outcome, time.Since(start))
}

// slot is one claimed job's place in its runner's counts.
type slot struct {
	r       *Runner
	waiting bool // moved from running to finishing
}

// wait moves the job from running to finishing: its slot is free for the next claim while
// its completion waits for the batch.
func (s *slot) wait() {
	s.r.running.Add(-1)
	s.r.finishing.Add(1)
	s.waiting = true
	s.r.Wake()
}

// free gives the slot back when the job has ended, however.
func (s *slot) free() {
	if s.waiting {
		s.r.finishing.Add(-1)
	} else {
		s.r.running.Add(-1)
	}
	s.r.Wake() // a slot is free: claim the next job now
}

func (r *Runner) finish(ctx context.Context, j Job, res Result, runErr, cause error, s *slot, log *slog.Logger) string {
	switch {
	case runErr == nil:
		return r.complete(ctx, j, res, s, log)
	case errors.Is(cause, ErrClaimLost):
		log.Warn("claim lost while running; job abandoned", "err", runErr)
		return "claim_lost"
	case errors.Is(cause, errStopping):
		if err := r.q.Release(ctx, j); err != nil {
			log.Error("releasing job on stop failed; its lease will expire", "err", err)
			return lostOrError(err)
		}
		log.Info("job released for another node (graceful stop)")
		return "released"
	case IsPermanent(runErr) || j.LastAttempt():
		if err := r.q.Dead(ctx, j, runErr); err != nil {
			log.Error("marking job dead failed", "err", err)
			return lostOrError(err)
		}
		log.Error("job is dead", "err", runErr)
		return "dead"
	default:
		delay := backoff.Delay(j.Attempt, r.cfg.RetryBase, r.cfg.RetryCap, retryAfterOf(runErr))
		if err := r.q.Retry(ctx, j, runErr.Error(), delay); err != nil {
			log.Error("scheduling retry failed", "err", err)
			return lostOrError(err)
		}
		log.Warn("job failed; will retry", "err", runErr, "delay", delay.String())
		return "retried"
	}
}

// complete commits a successful run. An error that is not ErrClaimLost leaves the outcome
// unknown: the COMMIT may have succeeded on the server while the client saw a reset or a
// timeout. Deleting the run's outputs then would leave a COMPLETED job whose media points at
// nothing, and nothing would ever retry it. So the outcome is settled first, with a locking
// read: committed → success; still our live claim → complete again; someone else's → discard;
// unknown (the read failed too, or the row is gone) → keep the outputs (true orphans are
// cheaper than lost results).
//
// A job without domain writes (no Lock hook, no Commit) is completed in a batch; every later
// attempt, once the outcome is settled as still ours, is a completion on its own.
func (r *Runner) complete(ctx context.Context, j Job, res Result, s *slot, log *slog.Logger) string {
	discard := func() {
		if res.Discard != nil {
			res.Discard(ctx)
		}
	}
	committed := func() string {
		log.Info("job completed")
		if res.Committed != nil {
			if err := res.Committed(ctx); err != nil {
				log.Warn("cleanup after completion failed", "err", err)
			}
		}
		return "completed"
	}
	var err error
	batched := r.kind.Lock == nil && res.Commit == nil
	if batched {
		s.wait()
		err = r.completer.complete(j)
	}
	if !batched || errors.Is(err, errCompleterStopped) {
		err = r.q.Complete(ctx, j, res.Commit)
	}
	for attempt := 1; ; attempt++ {
		switch {
		case err == nil:
			return committed()
		case errors.Is(err, ErrClaimLost):
			discard()
			log.Warn("claim lost before completion; result discarded")
			return "claim_lost"
		}
		log.Warn("completing job failed; settling its outcome", "err", err)
		settled, serr := r.q.Settle(ctx, j)
		switch {
		case serr != nil:
			log.Error("completion outcome unknown; outputs kept, the lease will expire", "err", serr)
			return "error"
		case settled == SettledCompleted:
			return committed()
		case settled == SettledLost:
			discard()
			log.Warn("completion did not commit and the claim is lost; result discarded")
			return "claim_lost"
		case settled == SettledUnknown:
			log.Error("completion outcome unknown (job row gone); outputs kept")
			return "error"
		}
		// Still our live claim: the completion did not commit; try again shortly.
		select {
		case <-ctx.Done():
			log.Error("completion did not commit before the finish timeout; outputs kept, the lease will expire")
			return "error"
		case <-time.After(backoff.FullJitter(attempt, 50*time.Millisecond, time.Second)):
		}
		err = r.q.Complete(ctx, j, res.Commit)
	}
}

func lostOrError(err error) string {
	if errors.Is(err, ErrClaimLost) {
		return "claim_lost"
	}
	return "error"
}

package jobqueue

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"
)

// leaseMargin is the part of the lease a run gives up before the database would: the local
// deadline is the last successful heartbeat's send time + lease − lease/leaseMargin. It covers
// the time to cancel the run (an ffmpeg to kill, a busy scheduler) before another node may
// claim the job: 12 s of a 60 s lease.
const leaseMargin = 5

// localDeadline is when a claim whose lease was last extended by a write sent at sent must be
// given up.
func localDeadline(sent time.Time, lease time.Duration) time.Time {
	return sent.Add(lease - lease/leaseMargin)
}

// heartbeat extends the lease every lease/3 until ctx ends, and cancels the run with
// ErrClaimLost when the claim is gone or can no longer be proven ours.
//
// A failed heartbeat is retried within lease/20 (jittered), not at the next tick: with a tick
// every lease/3, two failures in a row would land after the lease had run out, so a database
// blip of a third of the lease would lose every running claim (and sweep last attempts DEAD).
// And each write is bounded, with a local deadline beside it: when no heartbeat has succeeded
// for lease − margin, counted from when the last good one was sent (the database's lease began
// no earlier), the run is cancelled as lost — with the database gone for good, a run must not
// go on past a lease that another node may already have taken over.
func (r *Runner) heartbeat(ctx context.Context, cancel context.CancelCauseFunc, j Job, claimSent time.Time, log *slog.Logger) <-chan struct{} {
	done := make(chan struct{})
	lease := r.q.lease
	interval := lease / 3
	go func() {
		defer close(done)
		lastGood := claimSent
		deadline := localDeadline(lastGood, lease)
		next := lastGood.Add(interval)
		timer := time.NewTimer(time.Until(next))
		defer timer.Stop()
		failures := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			if !time.Now().Before(deadline) {
				log.Warn("no heartbeat got through before the lease's local deadline; run cancelled as lost",
					"failures", failures, "lease", lease.String())
				cancel(ErrClaimLost)
				return
			}
			sent := time.Now()
			beatCtx, beatCancel := context.WithDeadline(ctx, earliest(sent.Add(interval/2), deadline))
			err := r.q.Heartbeat(beatCtx, j)
			beatCancel()
			switch {
			case err == nil:
				lastGood, failures = sent, 0
				deadline = localDeadline(lastGood, lease)
				next = lastGood.Add(interval)
			case errors.Is(err, ErrClaimLost):
				cancel(ErrClaimLost)
				return
			case ctx.Err() != nil:
				return
			default:
				failures++
				log.Warn("heartbeat failed; retrying", "err", err, "failures", failures)
				next = time.Now().Add(lease/40 + rand.N(lease/40+1))
			}
			timer.Reset(time.Until(earliest(next, deadline)))
		}
	}()
	return done
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

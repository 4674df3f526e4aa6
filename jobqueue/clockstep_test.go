package jobqueue_test

import (
	"sync"
	"testing"
	"time"
)

// clockStepMin is the smallest jump of the wall clock against the monotonic clock that
// clockSteps records. NTP slews the wall clock by at most 0.5 ms a second, so a sampling
// period never sees a tenth of this; a step is a clock set at once.
const clockStepMin = 50 * time.Millisecond

// clockSteps records the forward steps of this machine's wall clock during a test. A lease is
// PostgreSQL's wall-clock time while a run's own deadline is monotonic, so a forward step
// expires every lease at once: another node may claim a job whose run has not yet heard, at
// its next heartbeat, that its claim is gone. That is a second run at once, which the
// queue's fence makes harmless (the stale run's completion does not commit) and which no
// lease-based queue can prevent. The CI machine is a virtual machine whose wall clock was
// seen to step 22 s while its monotonic clock did not move, so the chaos tests excuse such
// an overlap, and only one that a step explains.
type clockSteps struct {
	mu    sync.Mutex
	steps []clockStep
}

// clockStep is one forward step of the wall clock, which happened between two samples: after
// before and before after (both carry monotonic readings).
type clockStep struct {
	before, after time.Time
	by            time.Duration
}

// watchClock samples the clocks every 20 ms until t's cleanup.
func watchClock(t *testing.T) *clockSteps {
	w := &clockSteps{}
	stop, stopped := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		prev := time.Now()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			now := time.Now()
			// Round(0) strips the monotonic reading, so the first difference is the wall
			// clock's and the second the monotonic clock's.
			if by := now.Round(0).Sub(prev.Round(0)) - now.Sub(prev); by >= clockStepMin {
				w.mu.Lock()
				w.steps = append(w.steps, clockStep{before: prev, after: now, by: by})
				w.mu.Unlock()
			}
			prev = now
		}
	}()
	return w
}

// between returns the first step that happened after from and before to, if any.
func (w *clockSteps) between(from, to time.Time) (clockStep, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.steps {
		if s.after.After(from) && s.before.Before(to) {
			return s, true
		}
	}
	return clockStep{}, false
}

// all returns every step recorded so far.
func (w *clockSteps) all() []clockStep {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]clockStep(nil), w.steps...)
}

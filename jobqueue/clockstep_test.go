package jobqueue_test

import (
	"sync"
	"testing"
	"time"
)

// clockStepMin is the smallest jump of the wall clock against the monotonic clock that
// clockSteps records: a quarter of the chaos tests' lease, less than a step needs to expire a
// lease whose heartbeat (every third of it) got through. NTP slews the wall clock by at most
// 0.5 ms a second; a step is a clock set at once. time.Now reads the two clocks one after the
// other, so a thread descheduled between the two readings looks like a step of that long,
// which this is far above.
const clockStepMin = chaosLease / 4

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

// explains returns the first step that can explain a second run started at second while a
// first one, started at first, was still running: a step after first began, and less than a
// lease before second began (the first run hears within a lease that its claim is gone).
func (w *clockSteps) explains(first, second time.Time) (clockStep, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.steps {
		if s.after.After(first) && s.before.Before(second) && second.Sub(s.after) < chaosLease {
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

package jobqueue_test

import (
	"sync"
	"testing"
	"time"
)

// clockStepMin is the smallest jump of the wall clock against the monotonic clock that
// clockSteps records: a quarter of the chaos tests' lease. With its heartbeats getting through
// (every third of the lease), a run's lease survives a step of up to two thirds of it; during
// an injected stall of the database only the local deadline's margin (a fifth of the lease)
// protects it, so a step between a fifth and a quarter then goes unrecorded and can fail the
// test: a false failure, never a masked bug. NTP slews the wall clock by at most 0.5 ms a
// second; a step is a clock set at once.
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
	mu     sync.Mutex
	origin time.Time
	// prev and prevPrev are the offsets (wall minus monotonic time since origin) of the last
	// two samples, prevAt the last sample.
	prev, prevPrev time.Duration
	prevAt         time.Time
	steps          []clockStep
}

// clockStep is one forward step of the wall clock, which happened between two samples: after
// before and before after (both carry monotonic readings).
type clockStep struct {
	before, after time.Time
	by            time.Duration
}

// watchClock samples the clocks every 20 ms until t's cleanup.
func watchClock(t *testing.T) *clockSteps {
	now := time.Now()
	w := &clockSteps{origin: now, prevAt: now}
	stop, stopped := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-stopped })
	go func() {
		defer close(stopped)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				w.sample()
			}
		}
	}()
	return w
}

// sample reads the clocks once and records a step if the wall clock moved ahead of the
// monotonic one by clockStepMin since the two samples before. time.Now reads the wall clock,
// then the monotonic one: a thread descheduled between the two readings gives one sample whose
// offset dips by that long, and against the previous sample alone the next would look like a
// step; against the higher of the two before it does not.
func (w *clockSteps) sample() {
	w.mu.Lock() // before the reading: samples of two goroutines are then in order
	defer w.mu.Unlock()
	now := time.Now()
	// Round(0) strips the monotonic reading, so the first difference is the wall clock's and
	// the second the monotonic clock's.
	off := now.Round(0).Sub(w.origin.Round(0)) - now.Sub(w.origin)
	if by := off - max(w.prev, w.prevPrev); by >= clockStepMin {
		w.steps = append(w.steps, clockStep{before: w.prevAt, after: now, by: by})
	}
	w.prevPrev, w.prev, w.prevAt = w.prev, off, now
}

// explains returns the first step that can explain two runs of one job at once: the first
// run (from start to end) was going when the step happened, and both the second run's start
// and the first run's end came less than a lease after it (the first run hears at its next
// heartbeat, or at its local deadline, that its claim is gone). A check takes a sample before
// its first call, so a step just before the check is seen.
func (w *clockSteps) explains(start, end, second time.Time) (clockStep, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.steps {
		if s.after.After(start) && s.before.Before(second) &&
			second.Sub(s.after) < chaosLease && end.Sub(s.after) < chaosLease {
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

// Package lifecycle is the one shape every long-lived component of Playhead has: Start(ctx)
// launches its goroutines and returns, Stop(ctx) ends them and waits until they are gone. Both
// are idempotent, and Stop is safe on a component that was never started. River's
// rivershared/startstop is the model; Group is the ordered list cmd/api keeps.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Service is a long-lived component.
type Service interface {
	// Start launches the service's goroutines and returns. ctx bounds the start-up work only:
	// the service runs until Stop, not until ctx is cancelled, so that a process can cancel its
	// signal context and still stop its services one by one, in order.
	Start(ctx context.Context) error
	// Stop ends the service and waits for its goroutines, within ctx's deadline.
	Stop(ctx context.Context) error
}

// ErrStopped is the cancel cause a Loop's function sees when Stop ends it, and what Start
// returns after Stop: a stopped service does not come back.
var ErrStopped = errors.New("lifecycle: stopped")

// Loop runs one function in its own goroutine from Start until Stop. Components embed its
// Start and Stop in their own: `func (r *Rescuer) Start(ctx) error { return r.loop.Start(ctx, r.run) }`.
// The zero Loop is ready to use.
type Loop struct {
	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelCauseFunc
	done    chan struct{} // closed when run has returned; nil until Start
}

// Start runs run(ctx) in a new goroutine. ctx is cancelled, with ErrStopped as its cause, when
// Stop is called; cancelling the ctx given to Start does not stop it (its values are kept).
// A second Start is a no-op; a Start after Stop returns ErrStopped.
func (l *Loop) Start(ctx context.Context, run func(ctx context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.stopped:
		return ErrStopped
	case l.started:
		return nil
	}
	l.started = true
	runCtx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	l.cancel = cancel
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		run(runCtx)
	}()
	return nil
}

// Every starts a loop that calls tick(ctx) once per interval, the first time one interval
// after Start, until Stop: the shape of every periodic background task (the job rescuer and
// pruner, the orphan sweep, the rate limiter's sweep). A tick still running when the next is
// due delays it; Stop cancels the running tick's ctx and waits for it.
func (l *Loop) Every(ctx context.Context, interval time.Duration, tick func(ctx context.Context)) error {
	return l.Start(ctx, func(ctx context.Context) {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				tick(ctx)
			}
		}
	})
}

// Stop cancels run's context and waits for run to return, or for ctx to end (then it returns
// ctx's error and run goes on; a later Stop waits again). Stop without Start returns nil.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	l.stopped = true
	if !l.started {
		l.mu.Unlock()
		return nil
	}
	l.cancel(ErrStopped)
	done := l.done
	l.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Group is an ordered list of services: Start starts them in order, Stop stops them in
// reverse. A process keeps one Group and calls its Stop on every way out (a signal, a server
// error, a start-up failure), so there is one shutdown path.
type Group struct {
	services []named
}

type named struct {
	name    string
	service Service
}

// Add appends service, known as name in errors, to the group. Add every service before Start.
func (g *Group) Add(name string, service Service) {
	g.services = append(g.services, named{name, service})
}

// Start starts the services in order and stops at the first that fails, returning its error.
// The services started before it stay started: the caller stops the group as on any other
// way out, so a failed start-up is stopped exactly like a signal.
func (g *Group) Start(ctx context.Context) error {
	for _, s := range g.services {
		if err := s.service.Start(ctx); err != nil {
			return fmt.Errorf("start %s: %w", s.name, err)
		}
	}
	return nil
}

// Stop stops every service in reverse order, also those never started (their Stop is a
// no-op), within ctx's deadline, and returns all their errors joined.
func (g *Group) Stop(ctx context.Context) error {
	var errs []error
	for i := len(g.services) - 1; i >= 0; i-- {
		s := g.services[i]
		if err := s.service.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", s.name, err))
		}
	}
	return errors.Join(errs...)
}

package httpserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
)

// Service serves on a listener opened beforehand — so that a busy port fails the start-up
// before anything else starts — from Start until Stop. When serving ends without Stop (the
// listener broke), the error is sent on Err, and the owner stops everything.
type Service struct {
	name     string
	ln       net.Listener
	serve    func(net.Listener) error
	shutdown func(ctx context.Context) error

	err  chan error // buffered: the serving goroutine never blocks on it
	mu   sync.Mutex
	done chan struct{} // closed when serving has returned; nil until Start
	stop bool
}

// NewAppService serves the Fiber app on ln.
func NewAppService(name string, app *fiber.App, ln net.Listener) *Service {
	return &Service{name: name, ln: ln, serve: app.Listener, shutdown: app.ShutdownWithContext, err: make(chan error, 1)}
}

// NewHTTPService serves srv on ln.
func NewHTTPService(name string, srv *http.Server, ln net.Listener) *Service {
	return &Service{name: name, ln: ln, serve: srv.Serve, shutdown: srv.Shutdown, err: make(chan error, 1)}
}

// Err receives the error that ended serving before Stop.
func (s *Service) Err() <-chan error { return s.err }

// Start begins serving in a goroutine.
func (s *Service) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil || s.stop {
		return nil
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		err := s.serve(s.ln)
		s.mu.Lock()
		stopping := s.stop
		s.mu.Unlock()
		if !stopping && !errors.Is(err, http.ErrServerClosed) {
			if err == nil {
				err = errors.New("listener closed")
			}
			s.err <- fmt.Errorf("%s server: %w", s.name, err)
		}
	}()
	return nil
}

// Stop stops accepting, lets in-flight requests finish within ctx, and waits for the serving
// goroutine. A Service never started just closes its listener, freeing the port.
func (s *Service) Stop(ctx context.Context) error {
	s.mu.Lock()
	first := !s.stop
	s.stop = true
	done := s.done
	s.mu.Unlock()
	if done == nil {
		if first {
			_ = s.ln.Close()
		}
		return nil
	}
	var err error
	if first {
		if err = s.shutdown(ctx); err != nil {
			err = fmt.Errorf("%s server shutdown: %w", s.name, err)
		}
		// A shutdown that ran before the serving goroutine reached Serve did not see the
		// listener (fasthttp only closes listeners it already serves): close it here too.
		_ = s.ln.Close()
		if err == nil {
			// Every connection is closed and so is the listener: serving returns at once, also
			// when ctx's deadline has already passed (a select on both would pick either).
			<-done
			return nil
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		err = errors.Join(err, fmt.Errorf("%s server: %w", s.name, context.Cause(ctx)))
	}
	return err
}

// BoundRequests is a Service whose stop bounds its in-flight requests: they get half of what
// is left of the stop's budget, then Cancel cancels the context their database calls run
// under, and they answer 503. A request hung on a database that does not answer would
// otherwise take the whole budget from what stops after the server (the playback buffer's
// final flush), and keep its pool connection.
type BoundRequests struct {
	*Service
	// Cancel cancels every request's context.
	Cancel context.CancelFunc
}

// Stop stops the server, cancelling the requests still running halfway to ctx's deadline.
func (b BoundRequests) Stop(ctx context.Context) error {
	if deadline, ok := ctx.Deadline(); ok {
		late := time.AfterFunc(time.Until(deadline)/2, b.Cancel)
		defer late.Stop()
	}
	err := b.Service.Stop(ctx)
	b.Cancel()
	return err
}

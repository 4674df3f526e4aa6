package ratelimit

import (
	"context"
	"time"

	"github.com/playhead/playhead/lifecycle"
)

// Sweeper runs Limiter.Sweep every interval from Start until Stop.
type Sweeper struct {
	limiter  *Limiter
	interval time.Duration
	loop     lifecycle.Loop
}

// NewSweeper returns a Sweeper of l. It does nothing until Start.
func NewSweeper(l *Limiter, interval time.Duration) *Sweeper {
	return &Sweeper{limiter: l, interval: interval}
}

// Start launches the sweeps.
func (s *Sweeper) Start(ctx context.Context) error {
	return s.loop.Every(ctx, s.interval, func(context.Context) { s.limiter.Sweep() })
}

// Stop ends the sweeps and waits for the one in progress.
func (s *Sweeper) Stop(ctx context.Context) error { return s.loop.Stop(ctx) }

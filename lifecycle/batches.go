package lifecycle

import (
	"context"
	"sync"
	"time"
)

// maxBatchesInARow bounds the batches a Batches loop runs before it waits again, so that a
// backlog is worked off batch after batch without holding the loop forever.
const maxBatchesInARow = 100

// Batches is the loop of a component that moves rows in batches (the webhook relay, the xAPI
// relay, the completion mover): it runs its batch function until a batch comes back short or
// fails, then waits for Wake or the next interval, until Stop. The zero Batches is ready to use.
type Batches struct {
	loop     Loop
	wakeOnce sync.Once
	wake     chan struct{}
}

// BatchFunc moves one batch of at most size rows and returns how many it moved.
type BatchFunc func(ctx context.Context) (int, error)

// Wake makes the loop run its batches now instead of at its next interval. A Wake while the
// loop is busy is kept (one), so rows written meanwhile are not left to the interval.
func (b *Batches) Wake() {
	select {
	case b.channel() <- struct{}{}:
	default:
	}
}

// Start runs batch until it moves fewer than size rows or fails (failed, if not nil, is told
// the error), then idle (if not nil), then waits for Wake or interval, until Stop.
func (b *Batches) Start(ctx context.Context, interval time.Duration, size int, batch BatchFunc, failed func(error), idle func(ctx context.Context)) error {
	wake := b.channel()
	return b.loop.Start(ctx, func(ctx context.Context) {
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			for range maxBatchesInARow {
				n, err := batch(ctx)
				if err != nil && ctx.Err() == nil && failed != nil {
					failed(err)
				}
				if err != nil || n < size {
					break
				}
			}
			if idle != nil {
				idle(ctx)
			}
			select {
			case <-ctx.Done():
				return
			case <-wake:
			case <-ticker.C:
			}
		}
	})
}

// Stop ends the loop and waits for a batch in flight, within ctx's deadline (Loop.Stop).
func (b *Batches) Stop(ctx context.Context) error { return b.loop.Stop(ctx) }

// channel returns the wake-up channel, made at the first call (the zero Batches is ready).
func (b *Batches) channel() chan struct{} {
	b.wakeOnce.Do(func() { b.wake = make(chan struct{}, 1) })
	return b.wake
}

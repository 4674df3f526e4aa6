// Package buffer is a bounded write-behind buffer: producers Offer entries without ever
// blocking, and one flusher goroutine coalesces them by key, sorts the keys and hands batches
// to a flush function.
//
// Entries are dropped, never waited for, when the channel is full: the seed's playback API
// prefers losing one position report (re-sent 5 s later) to holding request threads.
package buffer

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Offer once Close has begun.
var ErrClosed = errors.New("buffer: closed")

// Entry is one buffered write.
type Entry[K comparable, V any] struct {
	Key   K
	Value V
}

// FlushFunc writes a batch. The batch is coalesced (one entry per key) and sorted by key, and
// is only valid until the function returns.
type FlushFunc[K comparable, V any] func(ctx context.Context, batch []Entry[K, V]) error

// Config configures a Buffer. Zero values take the defaults named on each field.
type Config[K comparable, V any] struct {
	// Capacity bounds the entries waiting in the channel. Default 10 000.
	Capacity int
	// FlushBatch flushes as soon as the flusher holds this many distinct keys. Default 1 000.
	FlushBatch int
	// FlushInterval flushes what is held at least this often. Default 5 s.
	FlushInterval time.Duration
	// FlushTimeout bounds one call of Flush. Default 10 s.
	FlushTimeout time.Duration
	// Flush writes a batch. Required.
	Flush FlushFunc[K, V]
	// Compare orders keys; batches are sorted with it so that concurrent flushes on many
	// nodes take row locks in one order and cannot deadlock. Required.
	Compare func(a, b K) int
	// Newer reports whether a supersedes b for the same key. Required.
	Newer func(a, b V) bool
	// Metrics receives the buffer's figures. Optional.
	Metrics *Metrics
	// Logger receives flush failures and rate-limited drop warnings. Default slog.Default().
	Logger *slog.Logger
}

func (c Config[K, V]) withDefaults() Config[K, V] {
	c.Capacity = cmp.Or(c.Capacity, 10_000)
	c.FlushBatch = cmp.Or(c.FlushBatch, 1_000)
	c.FlushInterval = cmp.Or(c.FlushInterval, 5*time.Second)
	c.FlushTimeout = cmp.Or(c.FlushTimeout, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config[K, V]) validate() error {
	switch {
	case c.Capacity < 1:
		return errors.New("buffer: Capacity must be positive")
	case c.FlushBatch < 1:
		return errors.New("buffer: FlushBatch must be positive")
	case c.FlushInterval <= 0 || c.FlushTimeout <= 0:
		return errors.New("buffer: FlushInterval and FlushTimeout must be positive")
	case c.Flush == nil || c.Compare == nil || c.Newer == nil:
		return errors.New("buffer: Flush, Compare and Newer are required")
	}
	return nil
}

// Buffer is a bounded write-behind buffer. Create it with New, call Start once, Offer from any
// goroutine, and Close once.
type Buffer[K comparable, V any] struct {
	cfg Config[K, V]
	ch  chan Entry[K, V]

	// mu guards closed. Offer holds it shared while it sends, so once Close has taken it
	// exclusively no sender can still be inside Offer: the channel can be drained to empty
	// without ever being closed under a sender.
	mu     sync.RWMutex
	closed bool

	// pending holds the newest offered value per key until it has been flushed (or its flush
	// failed), so that reads on this node see their own writes. Written by Offer and the
	// flusher, read by Pending.
	pending pendingIndex[K, V]

	// droppedSinceLog is added to by Offer and swapped to zero by the flusher's log tick.
	droppedSinceLog atomic.Int64
	// held mirrors len(held) for the metrics: written by the flusher, read at scrape time.
	held atomic.Int64

	stop    chan struct{} // closed by Close: the flusher drains and exits
	done    chan struct{} // closed by the flusher when it has exited
	started atomic.Bool
	// finalCtx is set by Close before stop is closed and read by the flusher after: the
	// deadline for the final drain.
	finalCtx context.Context
}

// New returns a Buffer. It does nothing until Start.
func New[K comparable, V any](cfg Config[K, V]) (*Buffer[K, V], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Buffer[K, V]{
		cfg:  cfg,
		ch:   make(chan Entry[K, V], cfg.Capacity),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	b.pending.init()
	if cfg.Metrics != nil {
		cfg.Metrics.capacity.Set(float64(cfg.Capacity))
		cfg.Metrics.depth = func() float64 { return float64(len(b.ch)) }
		cfg.Metrics.heldKeys = func() float64 { return float64(b.held.Load()) }
	}
	return b, nil
}

// Start launches the flusher goroutine.
func (b *Buffer[K, V]) Start() {
	if b.started.Swap(true) {
		return
	}
	go b.run()
}

// Offer queues value for key without blocking. It returns true when the entry was accepted,
// false when the buffer was full and the entry was dropped, and ErrClosed after Close began.
func (b *Buffer[K, V]) Offer(key K, value V) (bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false, ErrClosed
	}
	select {
	case b.ch <- Entry[K, V]{Key: key, Value: value}:
		b.pending.store(key, value, b.cfg.Newer)
		if m := b.cfg.Metrics; m != nil {
			m.offered.Inc()
		}
		return true, nil
	default:
		b.droppedSinceLog.Add(1)
		if m := b.cfg.Metrics; m != nil {
			m.dropped.Inc()
		}
		return false, nil
	}
}

// Pending returns the newest value offered for key on this buffer that has not been flushed.
func (b *Buffer[K, V]) Pending(key K) (V, bool) {
	return b.pending.load(key)
}

// Close stops intake (Offer returns ErrClosed), drains the channel and flushes everything
// held, in batches, within ctx's deadline. It returns ctx's error if the deadline passed
// first. Close is idempotent; later calls wait for the first.
func (b *Buffer[K, V]) Close(ctx context.Context) error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		b.finalCtx = ctx
		if !b.started.Swap(true) {
			go b.run()
		}
		close(b.stop)
	}
	select {
	case <-b.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the flusher: the only goroutine that receives from ch or touches held.
func (b *Buffer[K, V]) run() {
	defer close(b.done)
	held := make(map[K]V, b.cfg.FlushBatch)
	flushTick := time.NewTicker(b.cfg.FlushInterval)
	defer flushTick.Stop()
	logTick := time.NewTicker(time.Second)
	defer logTick.Stop()

	for {
		select {
		case e := <-b.ch:
			b.hold(held, e)
			if len(held) >= b.cfg.FlushBatch {
				b.flush(context.Background(), held)
			}
		case <-flushTick.C:
			b.flush(context.Background(), held)
		case <-logTick.C:
			b.logDrops()
		case <-b.stop:
			b.drain(held)
			b.logDrops()
			return
		}
	}
}

// drain empties the channel after Close: no sender can be inside Offer any more, so an empty
// channel stays empty.
func (b *Buffer[K, V]) drain(held map[K]V) {
	for {
		select {
		case e := <-b.ch:
			b.hold(held, e)
			if len(held) >= b.cfg.FlushBatch {
				b.flush(b.finalCtx, held)
			}
		default:
			b.flush(b.finalCtx, held)
			return
		}
	}
}

func (b *Buffer[K, V]) hold(held map[K]V, e Entry[K, V]) {
	if old, ok := held[e.Key]; ok {
		if b.cfg.Metrics != nil {
			b.cfg.Metrics.coalesced.Inc()
		}
		if !b.cfg.Newer(e.Value, old) {
			return
		}
	}
	held[e.Key] = e.Value
	b.held.Store(int64(len(held)))
}

// flush hands everything held to the flush function and empties held. A failed flush is
// counted and logged and its entries are dropped: players re-send their position every 5 s,
// and retrying would block intake behind a sick database.
func (b *Buffer[K, V]) flush(parent context.Context, held map[K]V) {
	if len(held) == 0 {
		return
	}
	batch := Sorted(held, b.cfg.Compare)
	clear(held)
	b.held.Store(0)

	ctx, cancel := context.WithTimeout(parent, b.cfg.FlushTimeout)
	start := time.Now()
	err := b.cfg.Flush(ctx, batch)
	cancel()
	elapsed := time.Since(start)

	if m := b.cfg.Metrics; m != nil {
		m.flushDuration.Observe(elapsed.Seconds())
		m.flushRows.Observe(float64(len(batch)))
		if err != nil {
			m.flushFailures.Inc()
		} else {
			m.flushedRows.Add(float64(len(batch)))
		}
	}
	if err != nil {
		b.cfg.Logger.Error("buffer flush failed; entries dropped", "rows", len(batch), "err", err)
	}
	for _, e := range batch {
		b.pending.forget(e.Key, e.Value, b.cfg.Newer)
	}
}

func (b *Buffer[K, V]) logDrops() {
	if n := b.droppedSinceLog.Swap(0); n > 0 {
		b.cfg.Logger.Warn("buffer full; entries dropped", "dropped", n, "capacity", b.cfg.Capacity)
	}
}

// Sorted returns the entries of held as a slice sorted by key.
func Sorted[K comparable, V any](held map[K]V, compare func(a, b K) int) []Entry[K, V] {
	batch := make([]Entry[K, V], 0, len(held))
	for k, v := range held {
		batch = append(batch, Entry[K, V]{Key: k, Value: v})
	}
	slices.SortFunc(batch, func(x, y Entry[K, V]) int { return compare(x.Key, y.Key) })
	return batch
}

// Package buffer is a bounded write-behind buffer: producers Offer entries without ever
// blocking, and one flusher goroutine sorts the keys and hands batches to a flush function.
//
// What it accepts it keeps until it is written: a flush that fails because the database is
// away is retried with backoff while newer offers keep replacing older values in place, a
// batch rejected for one bad row is split so that row costs only itself, and what the final
// flush at Stop cannot write before its deadline is spilled to a file that Start replays.
// Memory is bounded by MaxKeys: beyond it, offers for new keys are dropped and counted, never
// waited for (the seed's playback API prefers losing one position report to holding request
// threads).
package buffer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// ErrClosed is returned by Offer once Stop has begun, and by Start after Stop.
var ErrClosed = errors.New("buffer: closed")

// ErrRejected marks a flush error caused by the batch's data (a constraint violation, an
// invalid value) rather than by the database being unreachable: the buffer splits such a
// batch to find the rows at fault instead of retrying it whole. Wrap errors with Rejected.
var ErrRejected = errors.New("buffer: batch rejected")

// Rejected wraps err so that errors.Is(result, ErrRejected) holds; the flush function returns
// it when the database refused the batch's data. Rejected(nil) is nil.
func Rejected(err error) error {
	if err == nil {
		return nil
	}
	return rejectedError{err}
}

type rejectedError struct{ err error }

func (e rejectedError) Error() string        { return e.err.Error() }
func (e rejectedError) Unwrap() error        { return e.err }
func (e rejectedError) Is(target error) bool { return target == ErrRejected }

// Entry is one buffered write.
type Entry[K comparable, V any] struct {
	Key   K
	Value V
}

// FlushFunc writes a batch. The batch has one entry per key and is sorted by key; it is only
// valid until the function returns. An error wrapped with Rejected says the data was refused;
// any other error is taken as transient and the batch is retried.
type FlushFunc[K comparable, V any] func(ctx context.Context, batch []Entry[K, V]) error

// Config configures a Buffer. Zero values take the defaults named on each field.
type Config[K comparable, V any] struct {
	// Capacity bounds the channel that announces new keys to the flusher. Default 10 000.
	Capacity int
	// MaxKeys bounds the distinct keys the buffer holds: announced, held by the flusher, held
	// for retry. An Offer for a new key beyond it is dropped; a key already held is updated in
	// place. Default 20 × Capacity.
	MaxKeys int
	// FlushBatch bounds the keys in one call of Flush. Default 1 000.
	FlushBatch int
	// FlushAt flushes before FlushInterval as soon as the flusher holds this many distinct
	// keys. Default FlushBatch (MaxKeys if smaller). Above FlushBatch, a key offered again
	// within the interval is written once (its values coalesce for the whole interval) while
	// each call of Flush still carries at most FlushBatch keys. At most MaxKeys (MaxKeys also
	// counts the keys that arrive while a flush runs, so leave room).
	FlushAt int
	// FlushInterval flushes what is held at least this often. Default 5 s.
	FlushInterval time.Duration
	// FlushTimeout bounds one call of Flush. Default 10 s.
	FlushTimeout time.Duration
	// RetryBase and RetryCap shape the wait before retrying after a failed flush: full
	// jitter, the n-th retry drawn from [0, min(RetryBase·2^(n-1), RetryCap)). Defaults 1 s
	// (FlushInterval if shorter) and FlushInterval.
	RetryBase, RetryCap time.Duration
	// Flush writes a batch. Required.
	Flush FlushFunc[K, V]
	// Compare orders keys; batches are sorted with it so that concurrent flushes on many
	// nodes take row locks in one order and cannot deadlock. Required.
	Compare func(a, b K) int
	// Newer reports whether a supersedes b for the same key. Required.
	Newer func(a, b V) bool
	// Spill keeps what Stop could not write before its deadline; Start replays it. Optional:
	// without it, such entries are lost (counted, and Stop returns an error).
	Spill *SpillDir[K, V]
	// CheckReplayed is applied to every entry read back from a spill file before it is
	// written. An error wrapped with Rejected refuses that entry (dropped, counted as a bad
	// row and logged); any other error is transient: the replay retries, then stops and keeps
	// the file for the next start. Optional. A file's checksum proves it whole, not honest:
	// whoever can write to the directory can write a valid file, so the caller checks a
	// replayed entry as it checked the entry when it first arrived.
	CheckReplayed func(ctx context.Context, e Entry[K, V]) error
	// Metrics receives the buffer's figures. Optional.
	Metrics *Metrics
	// Logger receives flush failures and rate-limited drop warnings. Default slog.Default().
	Logger *slog.Logger
}

func (c Config[K, V]) withDefaults() Config[K, V] {
	c.Capacity = cmp.Or(c.Capacity, 10_000)
	c.MaxKeys = cmp.Or(c.MaxKeys, 20*c.Capacity)
	c.FlushBatch = cmp.Or(c.FlushBatch, 1_000)
	c.FlushAt = cmp.Or(c.FlushAt, min(c.FlushBatch, c.MaxKeys))
	c.FlushInterval = cmp.Or(c.FlushInterval, 5*time.Second)
	c.FlushTimeout = cmp.Or(c.FlushTimeout, 10*time.Second)
	c.RetryBase = cmp.Or(c.RetryBase, min(time.Second, c.FlushInterval))
	c.RetryCap = cmp.Or(c.RetryCap, c.FlushInterval)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config[K, V]) validate() error {
	switch {
	case c.Capacity < 1:
		return errors.New("buffer: Capacity must be positive")
	case c.MaxKeys < c.Capacity:
		return errors.New("buffer: MaxKeys must be at least Capacity")
	case c.FlushBatch < 1:
		return errors.New("buffer: FlushBatch must be positive")
	case c.FlushAt < 1 || c.FlushAt > c.MaxKeys:
		return errors.New("buffer: FlushAt must be from 1 to MaxKeys")
	case c.FlushInterval <= 0 || c.FlushTimeout <= 0:
		return errors.New("buffer: FlushInterval and FlushTimeout must be positive")
	case c.RetryBase <= 0 || c.RetryCap < c.RetryBase:
		return errors.New("buffer: need 0 < RetryBase <= RetryCap")
	case c.Flush == nil || c.Compare == nil || c.Newer == nil:
		return errors.New("buffer: Flush, Compare and Newer are required")
	}
	return nil
}

// Buffer is a bounded write-behind buffer. Create it with New, call Start once, Offer from any
// goroutine, and Stop once.
type Buffer[K comparable, V any] struct {
	cfg Config[K, V]
	// ch announces new keys to the flusher; their values are in pending.
	ch chan K

	// mu guards closed. Offer holds it shared while it sends, so once Stop has taken it
	// exclusively no sender can still be inside Offer: the channel can be drained to empty
	// without ever being closed under a sender.
	mu     sync.RWMutex
	closed bool

	// pending holds the newest unwritten value of every key the buffer holds. Written by Offer
	// and the flusher, read by the flusher and Pending.
	pending pendingIndex[K, V]

	// keys is the flusher's held set: every key it has received and not yet settled, with the
	// time (Unix ns) of the first failed flush round it was due in, 0 if none. Only the flusher
	// goroutine (or Start's replay, before it runs) touches it.
	keys map[K]int64

	// Figures: written by Offer and the flusher, read by Stats and the metrics at any time.
	droppedSinceLog atomic.Int64 // swapped to zero by the flusher's log tick
	heldKeys        atomic.Int64 // len(keys)
	retryHeld       atomic.Int64 // keys held since a failed flush round
	retryOldest     atomic.Int64 // Unix ns of the oldest such failure, 0 when none
	retries         atomic.Int64
	replayed        atomic.Int64
	corruptSpills   atomic.Int64
	lost            [lostReasons]atomic.Int64

	// runCtx bounds the flusher's own flushes. Stop cancels it when its write window ends, so a
	// flush hung on an unanswering database cannot keep the stop from spilling.
	runCtx    context.Context
	cancelRun context.CancelFunc

	startMu sync.Mutex // serialises Start: its replay must not run twice at once
	stop    chan struct{}
	done    chan struct{} // closed by the flusher when it has exited
	started atomic.Bool
	// finalCtx is set by Stop before stop is closed and read by the flusher after: the
	// deadline for the final flush. stopErr is set by the flusher before done is closed.
	finalCtx context.Context
	stopErr  error
}

// lostReason says why accepted entries were never written.
type lostReason int

const (
	lostFull        lostReason = iota // the buffer held MaxKeys keys, or its channel was full
	lostBadRow                        // the database rejected the row on its own
	lostSpillFailed                   // not written before Stop's deadline, and not spilled
	lostReasons
)

var lostReasonNames = [lostReasons]string{"full", "bad_row", "spill_failed"}

// New returns a Buffer. It does nothing until Start.
func New[K comparable, V any](cfg Config[K, V]) (*Buffer[K, V], error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Buffer[K, V]{
		cfg:  cfg,
		ch:   make(chan K, cfg.Capacity),
		keys: make(map[K]int64, cfg.FlushBatch),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	b.runCtx, b.cancelRun = context.WithCancel(context.Background())
	b.pending.init()
	if cfg.Metrics != nil {
		cfg.Metrics.capacity.Set(float64(cfg.Capacity))
		cfg.Metrics.maxKeys.Set(float64(cfg.MaxKeys))
		cfg.Metrics.depth = func() float64 { return float64(len(b.ch)) }
		cfg.Metrics.stats = b.Stats
	}
	return b, nil
}

// Start replays the spill files a previous run left (when Spill is configured), then launches
// the flusher. A replay that cannot reach the database returns an error and keeps the files
// for the next start; a corrupt file is moved aside and does not stop the others. Start
// returns nil at once when the buffer is already started, and ErrClosed after Stop.
func (b *Buffer[K, V]) Start(ctx context.Context) error {
	b.startMu.Lock()
	defer b.startMu.Unlock()
	b.mu.RLock()
	closed := b.closed
	b.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if b.started.Load() {
		return nil
	}
	if b.cfg.Spill != nil {
		if err := b.replay(ctx); err != nil {
			return err
		}
	}
	if !b.started.Swap(true) {
		go b.run()
	}
	return nil
}

// Offer holds value for key without blocking. It returns true when the entry was accepted,
// false when it was dropped (a new key while the buffer is at MaxKeys or its channel is
// full), and ErrClosed after Stop began. A value for a key already held replaces the held one
// if it is newer.
func (b *Buffer[K, V]) Offer(key K, value V) (bool, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return false, ErrClosed
	}
	switch b.pending.offer(key, value, b.cfg.Newer, int64(b.cfg.MaxKeys), b.ch) {
	case offerFull:
		b.droppedSinceLog.Add(1)
		b.lost[lostFull].Add(1)
		return false, nil
	case offerCoalesced:
		if m := b.cfg.Metrics; m != nil {
			m.coalesced.Inc()
		}
	}
	if m := b.cfg.Metrics; m != nil {
		m.offered.Inc()
	}
	return true, nil
}

// Pending returns the newest value offered for key on this buffer that has not been written.
func (b *Buffer[K, V]) Pending(key K) (V, bool) {
	return b.pending.load(key)
}

// Drop forgets every held entry whose key match selects, unwritten, and returns how many it
// dropped: a member erased, an item forgotten. An entry the flusher has already handed to a
// Flush call in progress may still be written by that call; the caller's database fence is
// what keeps such a write out (package erasure). A key offered again after Drop is held anew.
func (b *Buffer[K, V]) Drop(match func(K) bool) int {
	return b.pending.drop(match)
}

// Stop stops intake (Offer returns ErrClosed), drains the channel and writes everything held,
// retrying failed flushes within ctx's deadline; what is still unwritten shortly before the
// deadline is spilled (see SpillDir). Without a deadline, the final flush is tried once before
// spilling. Stop returns nil when every accepted entry was written or spilled, an error naming
// what was lost otherwise, and ctx's error if the deadline passed before the flusher finished
// (a flush function that ignores its context). It is idempotent (later calls wait for the
// first) and safe when Start was never called.
func (b *Buffer[K, V]) Stop(ctx context.Context) error {
	b.mu.Lock()
	first := !b.closed
	b.closed = true
	b.mu.Unlock()
	if first {
		b.finalCtx = ctx
		if writeBy, ok := b.writeBy(ctx); ok {
			time.AfterFunc(time.Until(writeBy), b.cancelRun)
		}
		if !b.started.Swap(true) {
			go b.run()
		}
		close(b.stop)
	}
	select {
	case <-b.done:
		return b.stopErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are the buffer's figures at one moment.
type Stats struct {
	// HeldKeys is the distinct keys the flusher holds (received, not yet written).
	HeldKeys int64 `json:"held_keys"`
	// HeldForRetry is the keys that were due in a flush round that failed (written or not,
	// the round stopped at its first failure) and are held for the next retry.
	HeldForRetry int64 `json:"held_for_retry"`
	// OldestHeldForRetry is how long ago the first failed round of the oldest of them was.
	OldestHeldForRetry time.Duration `json:"-"`
	// OldestHeldForRetrySeconds is OldestHeldForRetry in seconds, for JSON.
	OldestHeldForRetrySeconds float64 `json:"oldest_held_for_retry_seconds"`
	// Retries counts flush rounds retried after a failure.
	Retries int64 `json:"retries"`
	// Replayed counts rows written from spill files at Start.
	Replayed int64 `json:"replayed_rows"`
	// CorruptSpills counts spill files found corrupt at Start and moved aside.
	CorruptSpills int64 `json:"corrupt_spill_files"`
	// Lost counts accepted entries never written, by reason: full, bad_row, spill_failed.
	Lost map[string]int64 `json:"lost"`
}

// Stats returns the buffer's current figures.
func (b *Buffer[K, V]) Stats() Stats {
	s := Stats{
		HeldKeys:      b.heldKeys.Load(),
		HeldForRetry:  b.retryHeld.Load(),
		Retries:       b.retries.Load(),
		Replayed:      b.replayed.Load(),
		CorruptSpills: b.corruptSpills.Load(),
		Lost:          make(map[string]int64, lostReasons),
	}
	if oldest := b.retryOldest.Load(); oldest != 0 {
		s.OldestHeldForRetry = max(0, time.Since(time.Unix(0, oldest)))
		s.OldestHeldForRetrySeconds = s.OldestHeldForRetry.Seconds()
	}
	for r := range lostReasons {
		s.Lost[lostReasonNames[r]] = b.lost[r].Load()
	}
	return s
}

func (b *Buffer[K, V]) logDrops() {
	if n := b.droppedSinceLog.Swap(0); n > 0 {
		b.cfg.Logger.Warn("buffer full; entries dropped", "dropped", n, "max_keys", b.cfg.MaxKeys, "capacity", b.cfg.Capacity)
	}
}

// errLost is Stop's error when entries could not be written nor spilled.
func errLost(n int, cause error) error {
	return fmt.Errorf("buffer: %d entries neither written nor spilled before the deadline: %w", n, cause)
}

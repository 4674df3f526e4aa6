package buffer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/playhead/playhead/backoff"
)

// run is the flusher: the only goroutine that receives from ch or touches keys.
//
// While the flushes succeed it writes when it holds FlushAt keys or every FlushInterval.
// After a failure it keeps everything (an earlier design dropped the failed batch, and with it
// the pause position a player sends once and never again) and only retries, after a
// full-jitter backoff capped at RetryCap; meanwhile it keeps receiving new keys, and Offer
// keeps updating held ones in place, so producers never wait for the database.
func (b *Buffer[K, V]) run() {
	defer close(b.done)
	defer b.cancelRun()
	flushTick := time.NewTicker(b.cfg.FlushInterval)
	defer flushTick.Stop()
	logTick := time.NewTicker(time.Second)
	defer logTick.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	var retryC <-chan time.Time // nil while the last flush succeeded
	attempt := 0                // flush rounds failed in a row
	var failingSince time.Time
	// again re-checks the FlushAt trigger after a round that wrote. The keys received while it
	// ran, and those offered anew while their row was in its statement, stay held; they may
	// already number FlushAt, and when they fill MaxKeys no new key can reach the channel,
	// so no receive would check the trigger: every new key was dropped until the next tick
	// (with FlushAt at MaxKeys, a whole interval of a raised FlushInterval).
	again := make(chan struct{}, 1)

	flush := func() {
		err := b.flushHeld(b.runCtx)
		if err == nil {
			if attempt > 0 {
				b.cfg.Logger.Info("buffer flush recovered; held entries written",
					"failed_rounds", attempt, "outage", time.Since(failingSince).Round(time.Millisecond).String())
			}
			attempt, retryC = 0, nil
			if len(b.keys) >= b.cfg.FlushAt {
				select {
				case again <- struct{}{}:
				default:
				}
			}
			return
		}
		if attempt == 0 {
			failingSince = time.Now()
		}
		attempt++
		wait := backoff.FullJitter(attempt, b.cfg.RetryBase, b.cfg.RetryCap)
		retry.Reset(wait)
		retryC = retry.C
		b.cfg.Logger.Error("buffer flush failed; entries kept for retry", "held", len(b.keys),
			"held_for_retry", b.retryHeld.Load(), "failed_rounds", attempt, "retry_in", wait.Round(time.Millisecond).String(), "err", err)
	}

	for {
		select {
		case k := <-b.ch:
			b.receive(k)
			if retryC == nil && len(b.keys) >= b.cfg.FlushAt {
				flush()
			}
		case <-flushTick.C:
			if retryC == nil {
				flush()
			}
		case <-again:
			if retryC == nil && len(b.keys) >= b.cfg.FlushAt {
				flush()
			}
		case <-retryC:
			retryC = nil
			b.retries.Add(1)
			flush()
		case <-logTick.C:
			b.logDrops()
		case <-b.stop:
			retry.Stop()
			b.final()
			b.logDrops()
			return
		}
	}
}

// receivePending receives every key waiting in the channel, without blocking.
func (b *Buffer[K, V]) receivePending() {
	for {
		select {
		case k := <-b.ch:
			b.receive(k)
		default:
			return
		}
	}
}

func (b *Buffer[K, V]) receive(k K) {
	if _, ok := b.keys[k]; !ok {
		b.keys[k] = 0
		b.heldKeys.Store(int64(len(b.keys)))
	}
}

// flushHeld writes every held key, FlushBatch keys per call of Flush, in key order, each with
// its newest value. It stops at the first transient error and returns it; the keys not
// written stay held and are marked as held for retry.
func (b *Buffer[K, V]) flushHeld(ctx context.Context) error {
	if len(b.keys) == 0 {
		return nil
	}
	order := make([]K, 0, len(b.keys))
	for k := range b.keys {
		order = append(order, k)
	}
	slices.SortFunc(order, b.cfg.Compare)
	batch := make([]Entry[K, V], 0, min(len(order), b.cfg.FlushBatch))
	var rejected rejections[K]
	defer rejected.log(b.cfg.Logger, rejectedByDatabase, "flush")
	settle := func(e Entry[K, V], rejectErr error) {
		if rejectErr != nil {
			rejected.add(e.Key, rejectErr)
			b.lost[lostBadRow].Add(1)
		}
		if b.pending.settle(e.Key, e.Value, b.cfg.Newer) {
			b.keys[e.Key] = 0 // a newer value arrived meanwhile: held again, not yet tried
		} else {
			delete(b.keys, e.Key)
		}
	}
	for start := 0; start < len(order); start += b.cfg.FlushBatch {
		// Catching up after an outage takes many statements; keep taking new keys meanwhile,
		// or the channel fills behind this loop and Offer drops them.
		b.receivePending()
		batch = batch[:0]
		for _, k := range order[start:min(start+b.cfg.FlushBatch, len(order))] {
			v, ok := b.pending.load(k)
			if !ok { // dropped (Drop): only this goroutine settles keys
				delete(b.keys, k)
				continue
			}
			batch = append(batch, Entry[K, V]{Key: k, Value: v})
		}
		if _, err := b.write(ctx, batch, settle); err != nil {
			b.markFailed(time.Now())
			return err
		}
	}
	b.heldKeys.Store(int64(len(b.keys)))
	b.retryHeld.Store(0)
	b.retryOldest.Store(0)
	return nil
}

// markFailed marks every held key not yet marked as failed at now, and publishes how many are
// held for retry and since when.
func (b *Buffer[K, V]) markFailed(now time.Time) {
	var count, oldest int64
	for k, at := range b.keys {
		if at == 0 {
			at = now.UnixNano()
			b.keys[k] = at
		}
		count++
		if oldest == 0 || at < oldest {
			oldest = at
		}
	}
	b.heldKeys.Store(int64(len(b.keys)))
	b.retryHeld.Store(count)
	b.retryOldest.Store(oldest)
}

// write hands batch to the flush function. When the database rejects the batch's data, it
// splits the batch in halves and writes each, down to single rows, so that one bad row costs
// only itself (about 2·log2(n) extra statements for one bad row in n). settle is called for
// every entry once it is written (rejectErr nil) or rejected on its own. The settled entries
// are always a prefix of batch: write returns their number and, at the first transient error,
// that error.
func (b *Buffer[K, V]) write(ctx context.Context, batch []Entry[K, V], settle func(e Entry[K, V], rejectErr error)) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	err := b.flushOnce(ctx, batch)
	switch {
	case err == nil:
		for _, e := range batch {
			settle(e, nil)
		}
		return len(batch), nil
	case !errors.Is(err, ErrRejected):
		return 0, err
	case len(batch) == 1:
		settle(batch[0], err)
		return 1, nil
	}
	mid := len(batch) / 2
	n, err := b.write(ctx, batch[:mid], settle)
	if err != nil {
		return n, err
	}
	m, err := b.write(ctx, batch[mid:], settle)
	return n + m, err
}

// flushOnce calls the flush function once, within FlushTimeout, and records the figures.
func (b *Buffer[K, V]) flushOnce(parent context.Context, batch []Entry[K, V]) error {
	ctx, cancel := context.WithTimeout(parent, b.cfg.FlushTimeout)
	start := time.Now()
	err := b.cfg.Flush(ctx, batch)
	cancel()
	if m := b.cfg.Metrics; m != nil {
		m.flushDuration.Observe(time.Since(start).Seconds())
		m.flushRows.Observe(float64(len(batch)))
		if err != nil {
			m.flushFailures.Inc()
		} else {
			m.flushedRows.Add(float64(len(batch)))
		}
	}
	return err
}

// writeBy is when the stop must give up writing to the database and spill instead: ctx's
// deadline less a fifth of the time left, at most 2 s. Writing and syncing a few megabytes
// takes milliseconds on a healthy disk; the rest of the reserve is for a slow one.
func (b *Buffer[K, V]) writeBy(ctx context.Context) (time.Time, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return time.Time{}, false
	}
	return deadline.Add(-min(time.Until(deadline)/5, 2*time.Second)), true
}

// final runs once Stop has closed intake: it drains the channel, writes everything held,
// retrying with backoff until shortly before the deadline, and spills what is left.
func (b *Buffer[K, V]) final() {
	b.receivePending() // no sender can be inside Offer any more: empty stays empty
	ctx := b.finalCtx
	writeCtx, cancel := ctx, context.CancelFunc(func() {})
	writeBy, hasDeadline := b.writeBy(ctx)
	if hasDeadline {
		writeCtx, cancel = context.WithDeadline(ctx, writeBy)
	}
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		if err = b.flushHeld(writeCtx); err == nil || !hasDeadline {
			break
		}
		wait := backoff.FullJitter(attempt, b.cfg.RetryBase, b.cfg.RetryCap)
		b.cfg.Logger.Warn("buffer final flush failed; retrying until the stop deadline", "held", len(b.keys),
			"retry_in", wait.Round(time.Millisecond).String(), "err", err)
		t := time.NewTimer(wait)
		select {
		case <-writeCtx.Done():
			t.Stop()
		case <-t.C:
			continue
		}
		break
	}
	if len(b.keys) > 0 {
		b.spillHeld(err)
	}
}

// spillHeld writes every held entry to the spill directory, or counts them lost.
func (b *Buffer[K, V]) spillHeld(cause error) {
	entries := make([]Entry[K, V], 0, len(b.keys))
	for k := range b.keys {
		if v, ok := b.pending.load(k); ok {
			entries = append(entries, Entry[K, V]{Key: k, Value: v})
		}
	}
	slices.SortFunc(entries, func(x, y Entry[K, V]) int { return b.cfg.Compare(x.Key, y.Key) })
	for _, e := range entries {
		b.pending.remove(e.Key)
	}
	clear(b.keys)
	b.heldKeys.Store(0)
	b.retryHeld.Store(0)
	b.retryOldest.Store(0)

	if b.cfg.Spill == nil {
		b.lost[lostSpillFailed].Add(int64(len(entries)))
		b.stopErr = errLost(len(entries), fmt.Errorf("no spill directory configured; last flush error: %w", cause))
		b.cfg.Logger.Error("buffer stopped with unwritten entries and nowhere to spill them; entries lost", "lost", len(entries), "err", cause)
		return
	}
	path, err := b.cfg.Spill.Write(entries)
	if err != nil {
		b.lost[lostSpillFailed].Add(int64(len(entries)))
		b.stopErr = errLost(len(entries), err)
		b.cfg.Logger.Error("buffer spill failed; entries lost", "lost", len(entries), "err", err, "flush_err", cause)
		return
	}
	b.cfg.Logger.Warn("buffer could not write before the stop deadline; entries spilled, replayed at the next start",
		"spilled", len(entries), "file", path, "flush_err", cause)
}

// rejectedByDatabase is the log message of the rows a flush or a replay found refused by the
// flush function (buffer.Rejected).
const rejectedByDatabase = "buffer rows rejected by the database; dropped"

// rejections collects the rows one flush round gave up on, so they are logged in one line.
type rejections[K comparable] struct {
	n     int
	first K
	err   error
}

func (r *rejections[K]) add(key K, err error) {
	if r.n == 0 {
		r.first, r.err = key, err
	}
	r.n++
}

func (r *rejections[K]) log(logger *slog.Logger, msg, during string) {
	if r.n > 0 {
		logger.Error(msg, "during", during, "rows", r.n,
			"first_key", fmt.Sprint(r.first), "err", r.err)
	}
}

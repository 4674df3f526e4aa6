package buffer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
)

// waitFor polls cond until it holds, failing the test after a generous bound (a deadline for
// failure, not a speed check).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	giveUp := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(giveUp) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// flaky is a flush function that fails while down is set (like a database that is away) and
// records what it wrote otherwise.
type flaky struct {
	down     atomic.Bool
	failures atomic.Int64
	mu       sync.Mutex
	written  []buffer.Entry[int, val] // every entry of every successful call, in order
}

var errDown = errors.New("connection refused")

func (f *flaky) flush(_ context.Context, batch []buffer.Entry[int, val]) error {
	if f.down.Load() {
		f.failures.Add(1)
		return errDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.written = append(f.written, batch...)
	return nil
}

// last returns the last value written for each key.
func (f *flaky) last() map[int]val {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int]val{}
	for _, e := range f.written {
		out[e.Key] = e.Value
	}
	return out
}

// fastRetry makes the flusher retry within milliseconds, so the tests do not wait seconds.
func fastRetry(cfg buffer.Config[int, val]) buffer.Config[int, val] {
	cfg.FlushInterval = 10 * time.Millisecond
	cfg.RetryBase, cfg.RetryCap = time.Millisecond, 5*time.Millisecond
	return cfg
}

// A failed flush keeps its entries rather than dropping them, and retries them until the
// database answers again; meanwhile they count as held for retry and stay readable.
func TestBuffer_RetryKeepsEntries(t *testing.T) {
	f := &flaky{}
	f.down.Store(true)
	b, _, reg := setup(t, fastRetry(buffer.Config[int, val]{Flush: f.flush}))
	for k := range 50 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	waitFor(t, "three failed flushes", func() bool { return f.failures.Load() >= 3 })
	waitFor(t, "all 50 keys held for retry", func() bool { return b.Stats().HeldForRetry == 50 })
	if s := b.Stats(); s.OldestHeldForRetry <= 0 || s.Retries < 2 {
		t.Fatalf("stats while the database is away: %+v; want an oldest age and retries counted", s)
	}
	if v, ok := b.Pending(7); !ok || v.n != 7 {
		t.Fatalf("Pending(7) while held for retry = %v, %v", v, ok)
	}

	f.down.Store(false)
	waitFor(t, "every held entry written after the database came back", func() bool { return len(f.last()) == 50 })
	for k, v := range f.last() {
		if v != (val{n: k, at: 1}) {
			t.Fatalf("key %d written as %v", k, v)
		}
	}
	waitFor(t, "nothing held for retry", func() bool { s := b.Stats(); return s.HeldForRetry == 0 && s.HeldKeys == 0 })
	if s := b.Stats(); s.OldestHeldForRetry != 0 {
		t.Fatalf("oldest held age %v after recovery, want 0", s.OldestHeldForRetry)
	}
	if n := counterValue(t, reg, "playhead_test_buffer_flush_failures_total"); n < 3 {
		t.Fatalf("flush failures = %v, want at least 3", n)
	}
	if _, ok := b.Pending(7); ok {
		t.Fatal("key 7 still pending after it was written")
	}
}

// A newer offer for a key whose older value is held for retry replaces it; an older offer
// does not; and what is finally written is the newest.
func TestBuffer_NewerOfferWinsOverHeldFailedEntry(t *testing.T) {
	f := &flaky{}
	f.down.Store(true)
	b, _, _ := setup(t, fastRetry(buffer.Config[int, val]{Flush: f.flush}))
	mustOffer(t, b, 1, val{n: 1, at: 10})
	waitFor(t, "key 1 held for retry", func() bool { return b.Stats().HeldForRetry == 1 })
	mustOffer(t, b, 1, val{n: 2, at: 20}) // newer: wins
	mustOffer(t, b, 1, val{n: 0, at: 5})  // older than what is held: ignored
	if v, _ := b.Pending(1); v.n != 2 {
		t.Fatalf("Pending(1) = %v, want the newest (n=2)", v)
	}
	f.down.Store(false)
	waitFor(t, "key 1 written", func() bool { _, ok := f.last()[1]; return ok })
	if got := f.last()[1]; got != (val{n: 2, at: 20}) {
		t.Fatalf("key 1 written as %v, want the newest offer {2 20}", got)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.written {
		if e.Key == 1 && e.Value.n != 2 {
			t.Fatalf("an older value %v of key 1 was written", e.Value)
		}
	}
}

// Beyond MaxKeys, an offer for a new key is dropped and counted, while keys already held are
// still updated in place; what is held is written once the database is back.
func TestBuffer_CeilingDropsNewKeysButUpdatesHeld(t *testing.T) {
	f := &flaky{}
	f.down.Store(true)
	b, _, reg := setup(t, fastRetry(buffer.Config[int, val]{Capacity: 5, MaxKeys: 5, Flush: f.flush}))
	for k := range 5 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	// The flusher has received every key, so the channel is empty: a drop now is the ceiling.
	waitFor(t, "5 keys held", func() bool { return b.Stats().HeldKeys == 5 })
	for k := 5; k < 15; k++ {
		if ok, err := b.Offer(k, val{n: k, at: 1}); ok || err != nil {
			t.Fatalf("Offer(new key %d) at the ceiling = %v, %v; want dropped", k, ok, err)
		}
	}
	mustOffer(t, b, 3, val{n: 33, at: 2}) // held: updated in place
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "full"); lost != 10 {
		t.Fatalf("lost{full} = %v, want 10", lost)
	}
	f.down.Store(false)
	waitFor(t, "the held keys written", func() bool { return len(f.last()) == 5 })
	got := f.last()
	if got[3] != (val{n: 33, at: 2}) {
		t.Fatalf("key 3 written as %v, want the in-place update {33 2}", got[3])
	}
	for k := 5; k < 15; k++ {
		if _, ok := got[k]; ok {
			t.Fatalf("dropped key %d was written", k)
		}
	}
	// Below the ceiling again, new keys are accepted.
	waitFor(t, "the buffer empty", func() bool { return b.Stats().HeldKeys == 0 })
	mustOffer(t, b, 100, val{at: 1})
}

// rejecting fails, as the database would with a constraint violation, any batch holding a
// bad key, and fails everything while down is set.
type rejecting struct {
	flaky
	bad   map[int]bool
	calls atomic.Int64
}

func (r *rejecting) flush(ctx context.Context, batch []buffer.Entry[int, val]) error {
	r.calls.Add(1)
	for _, e := range batch {
		if r.bad[e.Key] && !r.down.Load() {
			return buffer.Rejected(fmt.Errorf("violates foreign key (key %d)", e.Key))
		}
	}
	return r.flaky.flush(ctx, batch)
}

// A batch that the database rejects for one bad row is split until the bad row is alone:
// every other row is written, the bad one is counted and not retried for ever.
func TestBuffer_SplitIsolatesBadRow(t *testing.T) {
	r := &rejecting{bad: map[int]bool{37: true}}
	b, _, reg := setup(t, buffer.Config[int, val]{FlushBatch: 100, FlushInterval: time.Hour, Flush: r.flush})
	for k := range 100 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	waitFor(t, "the good rows written and the batch settled", func() bool { return len(r.last()) == 99 && b.Stats().HeldKeys == 0 })
	got := r.last()
	if len(got) != 99 {
		t.Fatalf("%d rows written, want the 99 good ones", len(got))
	}
	if _, ok := got[37]; ok {
		t.Fatal("the bad row was written")
	}
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "bad_row"); lost != 1 {
		t.Fatalf("lost{bad_row} = %v, want 1", lost)
	}
	// One bad row in 100: the whole batch, then two halves per level down to it (7 levels).
	if c := r.calls.Load(); c > 1+2*7 {
		t.Fatalf("%d flush calls to isolate one bad row in 100, want at most 15", c)
	}
	if s := b.Stats(); s.HeldForRetry != 0 || s.Retries != 0 {
		t.Fatalf("a rejected row was held for retry: %+v", s)
	}
}

// When the database goes away in the middle of a split, what was written stays written and
// the rest is kept and retried, so only the bad rows are lost.
func TestBuffer_SplitThenOutageKeepsTheRest(t *testing.T) {
	r := &rejecting{bad: map[int]bool{3: true, 90: true}}
	var once sync.Once
	flush := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		err := r.flush(ctx, batch)
		if errors.Is(err, buffer.ErrRejected) {
			once.Do(func() { r.down.Store(true) }) // the first split attempt meets an outage
		}
		return err
	}
	b, _, reg := setup(t, fastRetry(buffer.Config[int, val]{FlushBatch: 100, Flush: flush}))
	for k := range 100 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	waitFor(t, "an outage during the split", func() bool { return r.failures.Load() > 0 })
	r.down.Store(false)
	waitFor(t, "the good rows written and everything settled", func() bool { return len(r.last()) == 98 && b.Stats().HeldKeys == 0 })
	got := r.last()
	var missing []int
	for k := range 100 {
		if _, ok := got[k]; !ok {
			missing = append(missing, k)
		}
	}
	if !slices.Equal(missing, []int{3, 90}) {
		t.Fatalf("keys not written: %v, want only the bad rows [3 90]", missing)
	}
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "bad_row"); lost != 2 {
		t.Fatalf("lost{bad_row} = %v, want 2", lost)
	}
}

// Stop with the database away and nowhere to spill: the entries are counted as lost and Stop
// says so.
func TestBuffer_StopWithoutSpillReportsLoss(t *testing.T) {
	f := &flaky{}
	f.down.Store(true)
	b, _, reg := setup(t, fastRetry(buffer.Config[int, val]{Flush: f.flush}))
	for k := range 3 {
		mustOffer(t, b, k, val{at: 1})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := b.Stop(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want an error naming the lost entries", err)
	}
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "spill_failed"); lost != 3 {
		t.Fatalf("lost{spill_failed} = %v, want 3", lost)
	}
}

// Start and Stop in any order and any number of times: no panic, no leak, and Start after
// Stop is refused.
func TestBuffer_Lifecycle(t *testing.T) {
	rec := &recorder{}
	newBuf := func() *buffer.Buffer[int, val] {
		b, err := buffer.New(buffer.Config[int, val]{Flush: rec.flush, Compare: func(a, b int) int { return a - b }, Newer: newer})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ctx := context.Background()

	never := newBuf() // never started: Stop still writes what was offered
	mustOffer(t, never, 1, val{at: 1})
	for range 2 {
		if err := never.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := rec.all()[1]; !ok {
		t.Fatal("Stop of a never-started buffer did not write its entry")
	}
	if err := never.Start(ctx); !errors.Is(err, buffer.ErrClosed) {
		t.Fatalf("Start after Stop = %v, want ErrClosed", err)
	}

	twice := newBuf()
	for range 2 {
		if err := twice.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := twice.Stop(ctx); err != nil {
		t.Fatal(err)
	}
}

// Catching up after an outage takes one statement per FlushBatch keys. New keys offered
// meanwhile are taken between statements, so a small channel does not fill behind the
// catch-up and drop them.
func TestBuffer_CatchUpKeepsTakingNewKeys(t *testing.T) {
	f := &flaky{}
	f.down.Store(true)
	gate, open := make(chan struct{}), make(chan struct{})
	flush := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		if !f.down.Load() {
			select { // one statement at a time, when the test says so
			case <-gate:
			case <-open:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return f.flush(ctx, batch)
	}
	// A statement never times out here: only taking keys between statements can empty the
	// channel while the next one waits for the gate.
	b, _, reg := setup(t, fastRetry(buffer.Config[int, val]{Capacity: 5, MaxKeys: 1000, FlushBatch: 10, FlushTimeout: time.Hour, Flush: flush}))
	var opened sync.Once
	openGate := func() { opened.Do(func() { close(open) }) }
	t.Cleanup(openGate) // runs before setup's Stop, which would otherwise wait for the gate
	for k := range 100 {
		mustOffer(t, b, k, val{at: 1})
		waitFor(t, "the flusher took the key", func() bool { return b.Stats().HeldKeys == int64(k+1) })
	}
	waitFor(t, "100 keys held for retry", func() bool { return b.Stats().HeldForRetry == 100 })
	f.down.Store(false) // the next retry writes 10 statements of 10 keys, one per gate
	next := 1000
	for range 5 {
		for range 5 { // as many new keys as the channel holds
			mustOffer(t, b, next, val{at: 1})
			next++
		}
		gate <- struct{}{} // one statement done; the flusher takes the new keys before the next
		waitFor(t, "the channel emptied between statements", func() bool { return counterValue(t, reg, "playhead_test_buffer_depth") == 0 })
	}
	openGate()
	waitFor(t, "everything written", func() bool { return len(f.last()) == 125 })
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "full"); lost != 0 {
		t.Fatalf("%v new keys dropped during the catch-up, want 0", lost)
	}
}

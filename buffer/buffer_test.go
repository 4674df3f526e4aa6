package buffer_test

import (
	"cmp"
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/playhead/playhead/buffer"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// val is a test value: a payload and the logical time that orders versions of one key.
type val struct{ n, at int }

func newer(a, b val) bool { return a.at > b.at }

// recorder is a flush function that keeps every batch it was given.
type recorder struct {
	mu      sync.Mutex
	batches [][]buffer.Entry[int, val]
}

func (r *recorder) flush(_ context.Context, batch []buffer.Entry[int, val]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, append([]buffer.Entry[int, val](nil), batch...))
	return nil
}

func (r *recorder) all() map[int]val {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]val{}
	for _, b := range r.batches {
		for _, e := range b {
			if old, ok := out[e.Key]; !ok || newer(e.Value, old) {
				out[e.Key] = e.Value
			}
		}
	}
	return out
}

func setup(t *testing.T, cfg buffer.Config[int, val]) (*buffer.Buffer[int, val], *buffer.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	cfg.Metrics = buffer.NewMetrics(reg, "test")
	cfg.Compare = cmp.Compare[int]
	cfg.Newer = newer
	b, err := buffer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, cfg.Metrics, reg
}

func mustOffer(t *testing.T, b *buffer.Buffer[int, val], k int, v val) {
	t.Helper()
	ok, err := b.Offer(k, v)
	if err != nil || !ok {
		t.Fatalf("Offer(%d) = %v, %v; want accepted", k, ok, err)
	}
}

// counterValue reads a counter or gauge from reg; labels are name=value pairs.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for i := 0; i+1 < len(labels); i += 2 {
				if have[labels[i]] != labels[i+1] {
					continue metrics
				}
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s%v not found", name, labels)
	return 0
}

func TestBuffer_CoalescesAndSorts(t *testing.T) {
	rec := &recorder{}
	b, _, reg := setup(t, buffer.Config[int, val]{FlushBatch: 1000, FlushInterval: time.Hour, Flush: rec.flush})
	// Key 3 gets three versions offered out of order; the newest (at=9) must win.
	mustOffer(t, b, 3, val{n: 1, at: 1})
	mustOffer(t, b, 1, val{n: 10, at: 2})
	mustOffer(t, b, 3, val{n: 3, at: 9})
	mustOffer(t, b, 2, val{n: 20, at: 3})
	mustOffer(t, b, 3, val{n: 2, at: 5})
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.batches) != 1 {
		t.Fatalf("got %d batches, want 1", len(rec.batches))
	}
	want := []buffer.Entry[int, val]{{1, val{10, 2}}, {2, val{20, 3}}, {3, val{3, 9}}}
	got := rec.batches[0]
	if len(got) != len(want) {
		t.Fatalf("batch = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("batch = %v, want %v", got, want)
		}
	}
	if c := counterValue(t, reg, "playhead_test_buffer_coalesced_total"); c != 2 {
		t.Fatalf("coalesced = %v, want 2", c)
	}
}

func TestBuffer_FlushesOnBatchSize(t *testing.T) {
	flushed := make(chan int, 10)
	b, _, _ := setup(t, buffer.Config[int, val]{FlushBatch: 5, FlushInterval: time.Hour,
		Flush: func(_ context.Context, batch []buffer.Entry[int, val]) error { flushed <- len(batch); return nil }})
	for k := range 5 {
		mustOffer(t, b, k, val{at: 1})
	}
	select {
	case n := <-flushed:
		if n != 5 {
			t.Fatalf("flushed %d rows, want 5", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no flush after FlushBatch distinct keys")
	}
}

// A round whose keys were all offered anew while their statement ran ends with them held
// again; with FlushAt at MaxKeys they fill the buffer, so no new key reaches the flusher to
// check the trigger: the flusher must check it again after the round itself, or it waits for
// the interval while every new key is dropped.
func TestBuffer_FlushAtReachedAgainDuringARoundFlushesAgain(t *testing.T) {
	rec := &recorder{}
	entered, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	flush := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		if calls.Add(1) == 1 {
			close(entered)
			<-release
		}
		return rec.flush(ctx, batch)
	}
	b, _, _ := setup(t, buffer.Config[int, val]{Capacity: 4, MaxKeys: 4, FlushAt: 4, FlushInterval: time.Hour, Flush: flush})
	// Registered after setup's Stop, so it runs before it: a test that fails before releasing
	// the first round must not leave Stop's final flush blocked on release.
	releaseOnce := sync.OnceFunc(func() { close(release) })
	t.Cleanup(releaseOnce)
	for k := range 4 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	// The first round's statement carries the 4 keys. The wait is bounded so that a flusher
	// that never triggers fails here instead of hanging until go test's timeout.
	select {
	case <-entered:
	case <-time.After(20 * time.Second):
		t.Fatal("no flush once FlushAt (4) keys were held (a 1 h interval)")
	}
	for k := range 4 {
		mustOffer(t, b, k, val{n: 10 + k, at: 2})
	}
	if ok, err := b.Offer(4, val{n: 4, at: 2}); ok || err != nil {
		t.Fatalf("Offer of a fifth key with MaxKeys 4 held = %v, %v; want dropped", ok, err)
	}
	releaseOnce()
	waitFor(t, "the 4 keys held again (FlushAt) after the round written with their newest values (a 1 h interval)", func() bool {
		written := rec.all()
		done := len(written) == 4
		for k := range 4 {
			done = done && written[k] == val{n: 10 + k, at: 2}
		}
		return done
	})
	// The buffer has room again: a new key is accepted.
	mustOffer(t, b, 4, val{n: 4, at: 3})
}

// With FlushAt above FlushBatch, keys offered again before FlushAt distinct keys are held
// coalesce instead of being written at FlushBatch keys; at FlushAt the round writes every
// held key, newest values, in calls of at most FlushBatch keys.
func TestBuffer_FlushAtCoalescesAndWritesInBatches(t *testing.T) {
	rec := &recorder{}
	b, _, reg := setup(t, buffer.Config[int, val]{FlushBatch: 5, FlushAt: 20, FlushInterval: time.Hour, Flush: rec.flush})
	for k := range 15 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	// The flusher holds all 15 keys, more than FlushBatch, and has written none.
	waitFor(t, "the flusher holding 15 keys", func() bool {
		return counterValue(t, reg, "playhead_test_buffer_held_keys") == 15
	})
	if n := len(rec.all()); n != 0 {
		t.Fatalf("%d keys written before FlushAt distinct keys were held, want 0", n)
	}
	for k := range 15 {
		mustOffer(t, b, k, val{n: 100 + k, at: 2})
	}
	for k := 15; k < 20; k++ {
		mustOffer(t, b, k, val{n: 100 + k, at: 2})
	}
	waitFor(t, "20 keys written after FlushAt distinct keys", func() bool { return len(rec.all()) >= 20 })
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rows := 0
	for _, batch := range rec.batches {
		rows += len(batch)
		if len(batch) > 5 {
			t.Errorf("a call of Flush got %d keys, more than FlushBatch (5)", len(batch))
		}
		for _, e := range batch {
			if e.Value != (val{n: 100 + e.Key, at: 2}) {
				t.Errorf("key %d written as %v, want its newest value", e.Key, e.Value)
			}
		}
	}
	if rows != 20 || len(rec.batches) != 4 {
		t.Errorf("%d rows in %d calls, want 20 in 4 (one per key, FlushBatch each)", rows, len(rec.batches))
	}
}

func TestBuffer_FlushesOnInterval(t *testing.T) {
	flushed := make(chan int, 10)
	b, _, _ := setup(t, buffer.Config[int, val]{FlushBatch: 1000, FlushInterval: 20 * time.Millisecond,
		Flush: func(_ context.Context, batch []buffer.Entry[int, val]) error { flushed <- len(batch); return nil }})
	mustOffer(t, b, 1, val{at: 1})
	select {
	case n := <-flushed:
		if n != 1 {
			t.Fatalf("flushed %d rows, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no flush after FlushInterval")
	}
}

// A flush that blocks must not block producers: once the channel is full, Offer drops and
// returns at once, and the drop is counted.
func TestBuffer_DropsWhenFull(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	b, _, reg := setup(t, buffer.Config[int, val]{Capacity: 4, FlushBatch: 1, FlushInterval: time.Hour,
		Flush: func(context.Context, []buffer.Entry[int, val]) error {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
			return nil
		}})
	mustOffer(t, b, 0, val{at: 1})
	<-entered // the flusher is stuck in Flush and receives nothing more
	for k := 1; k <= 4; k++ {
		mustOffer(t, b, k, val{at: 1})
	}
	for k := 5; k < 105; k++ {
		ok, err := b.Offer(k, val{at: 1})
		if err != nil || ok {
			t.Fatalf("Offer into a full buffer = %v, %v; want dropped", ok, err)
		}
	}
	if d := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "full"); d != 100 {
		t.Fatalf("dropped = %v, want 100", d)
	}
	if depth := counterValue(t, reg, "playhead_test_buffer_depth"); depth != 4 {
		t.Fatalf("depth = %v, want 4", depth)
	}
	close(release)
}

func TestBuffer_PendingUntilFlushed(t *testing.T) {
	release := make(chan struct{})
	b, _, _ := setup(t, buffer.Config[int, val]{FlushBatch: 1000, FlushInterval: time.Hour,
		Flush: func(context.Context, []buffer.Entry[int, val]) error { <-release; return nil }})
	mustOffer(t, b, 7, val{n: 1, at: 1})
	mustOffer(t, b, 7, val{n: 2, at: 2})
	if v, ok := b.Pending(7); !ok || v.n != 2 {
		t.Fatalf("Pending(7) = %v, %v; want n=2", v, ok)
	}
	if _, ok := b.Pending(8); ok {
		t.Fatal("Pending(8) found a key never offered")
	}
	close(release)
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.Pending(7); ok {
		t.Fatal("Pending(7) after the flush")
	}
}

// Close under concurrent Offers: every accepted entry is flushed, every Offer that began after
// Stop returned is refused with ErrClosed, and nothing else is lost. The producers offer until
// they are refused, so Stop always lands while they run.
func TestBuffer_CloseFlushesEveryAcceptedEntry(t *testing.T) {
	rec := &recorder{}
	b, _, _ := setup(t, buffer.Config[int, val]{Capacity: 100_000, FlushBatch: 100, FlushInterval: time.Millisecond, Flush: rec.flush})
	const producers, perProducer = 8, 5000
	accepted := make([]map[int]val, producers)
	var offered, refusedAfterStop, acceptedAfterStop atomic.Int64
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for p := range producers {
		accepted[p] = map[int]val{}
		wg.Go(func() {
			for i := 0; ; i++ {
				k := p*perProducer + i%500 // each producer owns 500 keys and rewrites them
				v := val{n: i, at: i}
				afterStop := stopped.Load()
				ok, err := b.Offer(k, v)
				offered.Add(1)
				if errors.Is(err, buffer.ErrClosed) {
					refusedAfterStop.Add(1)
					return
				}
				if afterStop {
					acceptedAfterStop.Add(1)
					return
				}
				if ok {
					accepted[p][k] = v
				}
			}
		})
	}
	for offered.Load() < 1000 { // some load first; the deadline is the test's timeout
		runtime.Gosched()
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped.Store(true)
	wg.Wait()
	if n := acceptedAfterStop.Load(); n > 0 {
		t.Fatalf("%d Offers that began after Stop returned were not refused with ErrClosed", n)
	}
	if n := refusedAfterStop.Load(); n != producers {
		t.Fatalf("%d of %d producers were refused with ErrClosed, want all", n, producers)
	}
	if _, err := b.Offer(1, val{}); !errors.Is(err, buffer.ErrClosed) {
		t.Fatalf("Offer after Close = %v, want ErrClosed", err)
	}
	stored := rec.all()
	total := 0
	for _, acc := range accepted {
		for k, v := range acc {
			total++
			if got, ok := stored[k]; !ok || got != v {
				t.Fatalf("key %d: flushed %v (present %v), newest accepted %v", k, got, ok, v)
			}
		}
	}
	if total == 0 {
		t.Fatal("no entry was accepted before Close; the test proved nothing")
	}
	t.Logf("%d keys accepted and flushed", total)
}

func TestBuffer_CloseHonoursDeadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	b, _, _ := setup(t, buffer.Config[int, val]{FlushBatch: 1000, FlushInterval: time.Hour,
		Flush: func(context.Context, []buffer.Entry[int, val]) error {
			<-release // a flush that ignores its deadline: Close must still return on time
			return nil
		}})
	mustOffer(t, b, 1, val{at: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Stop(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
}

func TestNew_Validates(t *testing.T) {
	_, err := buffer.New(buffer.Config[int, val]{Capacity: -1})
	if err == nil {
		t.Fatal("New accepted a config without Flush and with a negative capacity")
	}
}

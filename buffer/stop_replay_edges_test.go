package buffer_test

// Attacks on the buffer's promises: offers racing a stop, a stop that meets the database
// coming back, a spill directory gone at the stop, a spill file with a key twice, and two
// nodes replaying one shared directory.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/buffer"
)

// Producers offer as fast as they can while Stop runs, with the database away for part of it:
// every offer that returned true is written or spilled (the next Start replays it), with its
// newest accepted value; every offer after the stop began returns ErrClosed.
func TestBuffer_OfferRacingStopLosesNothing(t *testing.T) {
	for round := range 6 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			dir := t.TempDir()
			f := &flaky{}
			f.down.Store(round%2 == 0) // even rounds: the stop has to spill
			b, _ := newSpilling(t, dir, f.flush)
			if err := b.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			const producers, keys = 8, 50
			accepted := make([]map[int]val, producers) // per producer: key → newest accepted value
			var wg sync.WaitGroup
			started := make(chan struct{})
			markStarted := sync.OnceFunc(func() { close(started) })
			for p := range producers {
				accepted[p] = map[int]val{}
				wg.Go(func() {
					for i := 1; ; i++ {
						k := p*keys + i%keys // each producer owns its keys, so its own order is the newest
						v := val{n: i, at: i}
						ok, err := b.Offer(k, v)
						if errors.Is(err, buffer.ErrClosed) {
							return
						}
						if err != nil {
							t.Errorf("Offer = %v", err)
							return
						}
						if ok {
							accepted[p][k] = v
						}
						if i == 1_000 {
							markStarted() // the stop comes while every producer is busy
						}
					}
				})
			}
			<-started
			// A deadline for failure: the stop keeps a fifth of it, at most 2 s, to spill (fsync
			// included). It is generous because CI runs packages side by side: with 2 s (400 ms
			// to spill) an even round once missed it there, while other packages' databases and
			// encodes kept both cores and the disk busy (an fsync on ext4 can wait for other
			// files' dirty data). Even rounds take most of it: the stop retries the database
			// until the reserve is left.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := b.Stop(ctx); err != nil {
				t.Fatalf("Stop = %v", err)
			}
			wg.Wait()
			if ok, err := b.Offer(1, val{at: 1 << 30}); ok || !errors.Is(err, buffer.ErrClosed) {
				t.Fatalf("Offer after Stop = %v, %v; want ErrClosed", ok, err)
			}

			up := &flaky{}
			next, _ := newSpilling(t, dir, up.flush)
			if err := next.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			written := f.last()
			for k, v := range up.last() {
				if old, ok := written[k]; !ok || newer(v, old) {
					written[k] = v
				}
			}
			for p := range producers {
				for k, v := range accepted[p] {
					if got, ok := written[k]; !ok || newer(v, got) {
						t.Fatalf("key %d: accepted %v, written or replayed %v (found %v)", k, v, got, ok)
					}
				}
			}
		})
	}
}

// The database comes back while a stop is retrying its final flush: the entries are written,
// not spilled (the stop retries until shortly before its deadline, not once).
func TestBuffer_StopRetriesUntilTheDatabaseIsBack(t *testing.T) {
	dir := t.TempDir()
	f := &flaky{}
	f.down.Store(true)
	stopBegan := make(chan struct{})
	failedWhileStopping := make(chan struct{}, 1)
	flush := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		err := f.flush(ctx, batch)
		select {
		case <-stopBegan:
			if err != nil {
				select {
				case failedWhileStopping <- struct{}{}:
				default:
				}
			}
		default:
		}
		return err
	}
	b, _ := newSpilling(t, dir, flush)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k := range 20 {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	waitFor(t, "a failed flush", func() bool { return f.failures.Load() > 0 })
	stopped := make(chan error, 1)
	close(stopBegan)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		stopped <- b.Stop(ctx)
	}()
	for range 2 { // a second failure after the stop began: the final flush is retrying
		select {
		case <-failedWhileStopping:
		case err := <-stopped:
			t.Fatalf("Stop returned (%v) after one failed attempt, a minute before its deadline", err)
		}
	}
	f.down.Store(false)
	if err := <-stopped; err != nil {
		t.Fatalf("Stop = %v", err)
	}
	if got := len(f.last()); got != 20 {
		t.Fatalf("%d of 20 entries written by the stop after the database came back", got)
	}
	if files := spillFiles(t, dir); len(files) != 0 {
		t.Fatalf("spill files %v although the database came back before the deadline", files)
	}
}

// The spill directory is replaced by a file after the start (a full or broken disk looks the
// same to the stop: the write fails): Stop reports the loss and counts it, and leaves no
// temporary file behind.
func TestBuffer_StopWithUnwritableSpillDirReportsLoss(t *testing.T) {
	dir := t.TempDir() + "/spill"
	f := &flaky{}
	f.down.Store(true)
	b, reg := newSpilling(t, dir, f.flush)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k := range 5 {
		mustOffer(t, b, k, val{at: 1})
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second)
	defer cancel()
	err := b.Stop(ctx)
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Stop = %v, want an error naming the lost entries", err)
	}
	if lost := counterValue(t, reg, "playhead_test_buffer_lost_total", "reason", "spill_failed"); lost != 5 {
		t.Fatalf("lost{spill_failed} = %v, want 5", lost)
	}
}

// duplicateRefusing refuses, as PostgreSQL does (ON CONFLICT cannot affect a row twice:
// SQLSTATE 21000, not a rejected row), any batch holding a key twice.
func duplicateRefusing(rec *flaky) buffer.FlushFunc[int, val] {
	return func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		seen := map[int]bool{}
		for _, e := range batch {
			if seen[e.Key] {
				return fmt.Errorf("ON CONFLICT DO UPDATE command cannot affect row a second time (key %d)", e.Key)
			}
			seen[e.Key] = true
		}
		return rec.flush(ctx, batch)
	}
}

// A spill file holding one key twice (a file this buffer did not write, or an older format)
// is replayed with the newest value of that key, not refused as a whole for ever.
func TestBuffer_ReplayCoalescesAKeyTwiceInAFile(t *testing.T) {
	dir := t.TempDir()
	if _, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{
		{Key: 1, Value: val{n: 2, at: 20}}, {Key: 2, Value: val{n: 1, at: 1}}, {Key: 1, Value: val{n: 1, at: 10}},
	}); err != nil {
		t.Fatal(err)
	}
	rec := &flaky{}
	b, _ := newSpilling(t, dir, duplicateRefusing(rec))
	if err := b.Start(context.Background()); err != nil {
		t.Fatalf("Start = %v, want the file replayed", err)
	}
	if got := rec.last(); got[1] != (val{n: 2, at: 20}) || got[2] != (val{n: 1, at: 1}) {
		t.Fatalf("replayed %v, want key 1 at its newest {2 20} and key 2", got)
	}
}

// Two nodes sharing a spill directory start at once: a file the other node replayed and
// removed while this one was busy is skipped quietly, not reported as an error.
func TestBuffer_ReplaySkipsAFileAnotherNodeRemoved(t *testing.T) {
	dir := t.TempDir()
	d := spillDir(t, dir)
	first, err := d.Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	second, err := d.Write([]buffer.Entry[int, val]{{Key: 2, Value: val{n: 2, at: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	if first > second {
		first, second = second, first
	}
	rec := &flaky{}
	// The other node replays and removes the second file while this one writes the first.
	otherNode := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		if err := os.Remove(second); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return rec.flush(ctx, batch)
	}
	var log bytes.Buffer
	reg := prometheus.NewRegistry()
	b, err := buffer.New(fastRetry(buffer.Config[int, val]{Flush: otherNode, Compare: func(a, b int) int { return a - b }, Newer: newer,
		Spill: d, Metrics: buffer.NewMetrics(reg, "test"), Logger: slog.New(slog.NewTextHandler(&log, nil))}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(log.Bytes(), []byte("level=ERROR")) {
		t.Fatalf("a spill file another node replayed was reported as an error:\n%s", log.String())
	}
	if files := spillFiles(t, dir); len(files) != 0 {
		t.Fatalf("spill files left: %v", files)
	}
}

// A newer value offered for a key while its older value is being written is not forgotten when
// that write settles the key: it is written by a later flush.
func TestBuffer_NewerOfferDuringFlushIsWrittenToo(t *testing.T) {
	rec := &flaky{}
	inFlush, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	flush := func(ctx context.Context, batch []buffer.Entry[int, val]) error {
		first.Do(func() {
			close(inFlush)
			<-release
		})
		return rec.flush(ctx, batch)
	}
	b, _, _ := setup(t, fastRetry(buffer.Config[int, val]{Flush: flush}))
	mustOffer(t, b, 1, val{n: 1, at: 1})
	<-inFlush
	mustOffer(t, b, 1, val{n: 2, at: 2}) // while {1 1} is being written
	close(release)
	waitFor(t, "the newer value written", func() bool { return rec.last()[1] == val{n: 2, at: 2} })
}

// SIGTERM while the start-up replay waits on a database that does not answer (serve passes the
// signal's context to Start): Start returns at once with the cancellation, and the spill file
// stays for the next start.
func TestBuffer_StartCancelledDuringReplayKeepsTheFile(t *testing.T) {
	dir := t.TempDir()
	path, err := spillDir(t, dir).Write([]buffer.Entry[int, val]{{Key: 1, Value: val{n: 1, at: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	entered := make(chan struct{}, 1)
	hung := func(ctx context.Context, _ []buffer.Entry[int, val]) error {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return ctx.Err()
	}
	b, _ := newSpilling(t, dir, hung)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- b.Start(ctx) }()
	<-entered
	cancel() // the signal
	if err := <-started; !errors.Is(err, context.Canceled) {
		t.Fatalf("Start cancelled during its replay = %v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the spill file is gone after a cancelled replay: %v", err)
	}
}

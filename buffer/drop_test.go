package buffer_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
)

// Drop forgets the held entries it selects: they are not written when the database comes back,
// not spilled at the stop, not readable, and no longer counted as held; the others are.
func TestBuffer_Drop(t *testing.T) {
	t.Run("NotWrittenAfterTheOutage", func(t *testing.T) {
		f := &flaky{}
		f.down.Store(true)
		b, _, _ := setup(t, fastRetry(buffer.Config[int, val]{Flush: f.flush}))
		for k := range 100 {
			mustOffer(t, b, k, val{n: k, at: 1})
		}
		waitFor(t, "a failed flush holding the 100 keys", func() bool { return f.failures.Load() > 0 && b.Stats().HeldKeys == 100 })
		if n := b.Drop(func(k int) bool { return k%2 == 1 }); n != 50 {
			t.Fatalf("Drop = %d, want 50", n)
		}
		if _, ok := b.Pending(7); ok {
			t.Fatal("a dropped key is still pending")
		}
		// A Flush call in progress during Drop may still write what it was handed (Drop's
		// contract; the database fence keeps such writes out). Two more failures mean the call
		// in progress, if any, has ended and the next one started after Drop.
		dropped := f.failures.Load()
		waitFor(t, "a failed flush started after Drop", func() bool { return f.failures.Load() >= dropped+2 })
		f.down.Store(false)
		waitFor(t, "the held keys written", func() bool { return b.Stats().HeldKeys == 0 })
		got := f.last()
		for k := range 100 {
			if _, written := got[k]; written != (k%2 == 0) {
				t.Fatalf("key %d written = %v after Drop of the odd keys", k, written)
			}
		}
		mustOffer(t, b, 7, val{n: 7, at: 2}) // offered again: held anew
		waitFor(t, "key 7 written again", func() bool { return f.last()[7] == val{n: 7, at: 2} })
	})
	t.Run("NotSpilled", func(t *testing.T) {
		dir := t.TempDir()
		down := &flaky{}
		down.down.Store(true)
		b, _ := newSpilling(t, dir, down.flush)
		if err := b.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for k := range 100 {
			mustOffer(t, b, k, val{n: k, at: 1})
		}
		if n := b.Drop(func(k int) bool { return k < 30 }); n != 30 {
			t.Fatalf("Drop = %d, want 30", n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if err := b.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		files := spillFiles(t, dir)
		if len(files) != 1 {
			t.Fatalf("spill files: %v, want 1", files)
		}
		spilled, err := buffer.ReadSpillFile[int, val](files[0], valCodec{})
		if err != nil {
			t.Fatal(err)
		}
		if len(spilled) != 70 {
			t.Fatalf("spilled %d entries, want the 70 not dropped", len(spilled))
		}
		for _, e := range spilled {
			if e.Key < 30 {
				t.Fatalf("dropped key %d spilled", e.Key)
			}
		}
	})
}

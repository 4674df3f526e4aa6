package buffer_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
)

// orderKeys is how many keys the ordering tests offer. The buffer holds keys in a map, whose
// iteration order Go randomises, so a batch written without sorting comes out in key order by
// chance with odds of about 1 in orderKeys!: with three keys (the old test) that was 1 in 6
// per batch and the broken sort passed about 9 runs in 30; with 300 it never does.
const orderKeys = 300

// checkKeyOrder fails unless batches, read one after the other, hold the keys 0 … n-1 each
// once and in ascending order: each statement takes its row locks in key order, and so does
// the sequence of statements of one round.
func checkKeyOrder(t *testing.T, batches [][]buffer.Entry[int, val], n int) {
	t.Helper()
	next := 0
	for i, batch := range batches {
		for j, e := range batch {
			if e.Key != next {
				t.Fatalf("batch %d of %d, entry %d: key %d, want %d (keys must be written in ascending order)",
					i+1, len(batches), j, e.Key, next)
			}
			next++
		}
	}
	if next != n {
		t.Fatalf("wrote %d keys in %d batches, want %d", next, len(batches), n)
	}
}

// Keys offered in descending order are flushed in ascending order, in every batch and across
// the batches of one round.
func TestBuffer_FlushWritesKeysInOrder(t *testing.T) {
	rec := &recorder{}
	b, _, _ := setup(t, buffer.Config[int, val]{Capacity: 2 * orderKeys, FlushBatch: 64, FlushAt: 2 * orderKeys,
		MaxKeys: 4 * orderKeys, FlushInterval: time.Hour, Flush: rec.flush})
	for k := orderKeys - 1; k >= 0; k-- {
		mustOffer(t, b, k, val{n: k, at: 1})
	}
	if err := b.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(rec.batches) < 2 {
		t.Fatalf("%d batches; want several of at most 64 keys", len(rec.batches))
	}
	checkKeyOrder(t, rec.batches, orderKeys)
}

// A spill file's entries are replayed in key order whatever order the file holds them in (a
// file of another node, or one written before the spill was sorted).
func TestBuffer_ReplayWritesKeysInOrder(t *testing.T) {
	dir := t.TempDir()
	entries := make([]buffer.Entry[int, val], 0, orderKeys)
	for k := orderKeys - 1; k >= 0; k-- {
		entries = append(entries, buffer.Entry[int, val]{Key: k, Value: val{n: k, at: 1}})
	}
	if _, err := spillDir(t, dir).Write(entries); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	b, _ := newSpilling(t, dir, rec.flush)
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	checkKeyOrder(t, rec.batches, orderKeys)
}

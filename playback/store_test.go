package playback_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/playback"
)

// Two nodes buffer the same key; the node holding the older position flushes last. The row
// must keep the newer one.
func TestStore_FlushOutOfOrderKeepsNewest(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	key := playback.Key{Member: 3, Media: id}
	older := playback.Position{PositionMS: 1000, EventTime: time.Now().UTC().Truncate(time.Microsecond)}
	newer := playback.Position{PositionMS: 6000, EventTime: older.EventTime.Add(5 * time.Second)}

	newNode := func() *buffer.Buffer[playback.Key, playback.Position] {
		buf, err := buffer.New(buffer.Config[playback.Key, playback.Position]{
			FlushInterval: time.Hour, Flush: b.store.Flush, Compare: playback.CompareKeys, Newer: playback.Newer})
		if err != nil {
			t.Fatal(err)
		}
		if err := buf.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	nodeA, nodeB := newNode(), newNode()
	if _, err := nodeA.Offer(key, older); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeB.Offer(key, newer); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Stop(context.Background()); err != nil { // newer first
		t.Fatal(err)
	}
	if err := nodeA.Stop(context.Background()); err != nil { // then the stale one
		t.Fatal(err)
	}
	got, found, err := b.store.Get(context.Background(), key)
	if err != nil || !found {
		t.Fatalf("Get = %v, %v", found, err)
	}
	if got.PositionMS != newer.PositionMS || !got.EventTime.Equal(newer.EventTime) {
		t.Fatalf("stored %+v, want the newer %+v", got.Position, newer)
	}
}

// Many concurrent flushes over overlapping keys, each batch sorted as the buffer sorts it,
// never fail: in particular never with deadlock_detected.
func TestStore_ConcurrentFlushesDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	var medias []int64
	for range 4 {
		medias = append(medias, b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000}))
	}
	const flushers, rounds, keysPerBatch = 8, 30, 200
	var wg sync.WaitGroup
	errs := make(chan error, flushers*rounds)
	base := time.Now().UTC().Truncate(time.Microsecond)
	for f := range flushers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(f), 1))
			for r := range rounds {
				held := map[playback.Key]playback.Position{}
				for range keysPerBatch {
					k := playback.Key{Member: int64(rng.IntN(300) + 1), Media: medias[rng.IntN(len(medias))]}
					held[k] = playback.Position{PositionMS: int32(r*1000 + f), EventTime: base.Add(time.Duration(r*flushers+f) * time.Microsecond)}
				}
				if err := b.store.Flush(context.Background(), sortedBatch(held)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("flush failed: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM playback`); n == 0 {
		t.Fatal("no rows written; the test proved nothing")
	}
}

func TestCompareKeys(t *testing.T) {
	keys := []playback.Key{{2, 1}, {1, 9}, {1, 2}, {2, 0}}
	want := []playback.Key{{1, 2}, {1, 9}, {2, 0}, {2, 1}}
	for i := range keys {
		for j := range keys {
			a, b := keys[i], keys[j]
			if got := playback.CompareKeys(a, b); got != -playback.CompareKeys(b, a) {
				t.Fatalf("CompareKeys(%v,%v) = %d is not antisymmetric", a, b, got)
			}
		}
	}
	sorted := slices.SortedFunc(slices.Values(keys), playback.CompareKeys)
	if !slices.Equal(sorted, want) {
		t.Fatalf("sorted = %v, want %v", sorted, want)
	}
}

// sortedBatch is a held set as the buffer hands it to Flush: one entry per key, sorted.
func sortedBatch(held map[playback.Key]playback.Position) []buffer.Entry[playback.Key, playback.Position] {
	batch := make([]buffer.Entry[playback.Key, playback.Position], 0, len(held))
	for k, v := range held {
		batch = append(batch, buffer.Entry[playback.Key, playback.Position]{Key: k, Value: v})
	}
	slices.SortFunc(batch, func(x, y buffer.Entry[playback.Key, playback.Position]) int {
		return playback.CompareKeys(x.Key, y.Key)
	})
	return batch
}

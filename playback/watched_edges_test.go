package playback_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/playback"
)

// The edges of the watched-range rules (migration 00018), each on a member of its own on a
// 100 s media (a bucket is a second): a pair of reports exactly playhead_watch_continuity
// (15 s) apart is consecutive and one a microsecond later is not; a move of exactly twice
// real time plus a second is playback and a millisecond more is a seek; a position at (or far
// past) the media's end lands in the last bucket, not in a 101st that the CHECK refuses; a
// row Open created (watched_bucket 0) makes the first report mark what was played since the
// open; a media whose duration was unknown marks only where the first report after the
// duration became known landed.
func TestStore_WatchedRangesAtTheEdgesOfTheRules(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "edges", "duration_ms": 100_000})
	start := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	flush := func(key playback.Key, at time.Duration, positionMS int32) {
		t.Helper()
		if err := b.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{
			{Key: key, Value: playback.Position{PositionMS: positionMS, EventTime: start.Add(at)}}}); err != nil {
			t.Fatalf("flush of %d ms at %s: %v", positionMS, at, err)
		}
	}
	member := int64(100)
	for _, c := range []struct {
		name     string
		dt       time.Duration
		from, to int32
		want     string
	}{
		{name: "exactly 15 s apart", dt: 15 * time.Second, from: 10_000, to: 25_000, want: "10-25"},
		{name: "15 s and 1 µs apart", dt: 15*time.Second + time.Microsecond, from: 10_000, to: 25_000, want: "10,25"},
		{name: "exactly twice real time plus a second", dt: 5 * time.Second, from: 10_000, to: 21_000, want: "10-21"},
		{name: "a millisecond over twice real time plus a second", dt: 5 * time.Second, from: 10_000, to: 21_001, want: "10,21"},
		{name: "the same position 5 s later (paused)", dt: 5 * time.Second, from: 40_000, to: 40_000, want: "40"},
	} {
		member++
		key := playback.Key{Member: member, Media: id}
		flush(key, 0, c.from)
		flush(key, c.dt, c.to)
		if got := watchedBuckets(t, b, key); got != c.want {
			t.Errorf("%s (%d ms then %d ms): watched %q, want %q", c.name, c.from, c.to, got, c.want)
		}
	}

	// The end of the media, and a position far past it (a duration shortened after the
	// media cache checked the PUT): the last bucket, and the flush is not refused.
	member++
	end := playback.Key{Member: member, Media: id}
	flush(end, 0, 97_000)
	flush(end, 5*time.Second, 100_000)
	if got := watchedBuckets(t, b, end); got != "97-99" {
		t.Errorf("played to the end: watched %q, want 97-99", got)
	}
	member++
	past := playback.Key{Member: member, Media: id}
	flush(past, 0, 2_000_000_000)
	if got := watchedBuckets(t, b, past); got != "99" {
		t.Errorf("a position far past the end: watched %q, want 99", got)
	}

	// A stale report that brings an earlier finish (a member who finished on one node and
	// started over on another, flushed late) updates the row for its watched mark only: it
	// marks no bucket, as a stale report that brings nothing does not reach the row at all.
	member++
	stale := playback.Key{Member: member, Media: id}
	flush(stale, 10*time.Second, 20_000)
	flush(stale, 5*time.Second, 99_000)
	if got := watchedBuckets(t, b, stale); got != "20" {
		t.Errorf("a stale finished report: watched %q, want 20 (its bucket 99 not marked)", got)
	}
	if st, ok, err := b.store.Get(ctx, stale); err != nil || !ok || st.WatchedAt == nil {
		t.Errorf("a stale finished report: stored %+v, %v, %v; want its watched mark kept", st, ok, err)
	}

	// Open's row: the first report 5 s after the open marks from the start.
	member++
	opened := playback.Key{Member: member, Media: id}
	if _, err := b.store.Open(ctx, opened, start, ""); err != nil {
		t.Fatal(err)
	}
	flush(opened, 5*time.Second, 5_000)
	if got := watchedBuckets(t, b, opened); got != "0-5" {
		t.Errorf("the first report after an open: watched %q, want 0-5", got)
	}

	// A media of unknown duration, then known: nothing, then the bucket of the first report.
	unknown := b.createMedia(t, map[string]any{"title": "unknown"})
	member++
	late := playback.Key{Member: member, Media: unknown}
	flush(late, 0, 10_000)
	if _, err := b.pool.Exec(ctx, `UPDATE media SET duration_ms = 100000 WHERE id = $1`, unknown); err != nil {
		t.Fatal(err)
	}
	flush(late, 5*time.Second, 15_000)
	flush(late, 10*time.Second, 20_000)
	if got := watchedBuckets(t, b, late); got != "15-20" {
		t.Errorf("duration known after the first report: watched %q, want 15-20", got)
	}
}

package playback_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/playback"
)

// finishes returns the finishes recorded for key (playback_completions), oldest first, as
// "how@event time".
func (b *bundle) finishes(t *testing.T, key playback.Key) []string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT how || '@' || to_char(finished_at AT TIME ZONE 'UTC', 'HH24:MI:SS.US')
		FROM playback_completions WHERE member_id = $1 AND media_id = $2 ORDER BY finished_at`, key.Member, key.Media)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func finishAt(how string, at time.Time) string {
	return how + "@" + at.UTC().Format("15:04:05.000000")
}

// TestFlush_RecordsEachFinishOnce: the flush records a finish (the row going from not finished
// to finished) exactly once, whatever writes the same reports again: the same batch flushed
// again (a retry whose commit answer was lost, a spill file replayed), a report past the point
// on a row already finished, an older finished report flushed after a newer one (another node),
// and a report in the credits before the completion point says so. A rewatch that finishes
// again is a second finish.
func TestFlush_RecordsEachFinishOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	base := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)

	t.Run("RetriedAndReplayed", func(t *testing.T) {
		key := playback.Key{Member: 21, Media: b.createMedia(t, map[string]any{"title": "a", "duration_ms": 600_000})}
		b.flushOne(t, key, at(base, 60*time.Second))
		if got := b.finishes(t, key); len(got) != 0 {
			t.Fatalf("a position at 10 %% recorded %v", got)
		}
		finish := playback.Position{PositionMS: 580_000, EventTime: base.Add(2 * time.Minute)}
		b.flushOne(t, key, finish)
		if got, want := b.finishes(t, key), []string{finishAt("position", finish.EventTime)}; !slices.Equal(got, want) {
			t.Fatalf("finishes %v, want %v", got, want)
		}
		// Moved out, as the mover does: its key no longer stops a second row.
		if _, err := b.pool.Exec(ctx, `DELETE FROM playback_completions WHERE member_id = $1`, key.Member); err != nil {
			t.Fatal(err)
		}
		for range 2 { // its retry, a replay of a spill file holding it
			b.flushOne(t, key, finish)
		}
		b.flushOne(t, key, playback.Position{PositionMS: 590_000, EventTime: base.Add(3 * time.Minute)})
		if got := b.finishes(t, key); len(got) != 0 {
			t.Fatalf("the finish's retries and a later report past the point recorded %v", got)
		}

		// A rewatch: back near the start, then past the point again.
		b.flushOne(t, key, playback.Position{PositionMS: 10_000, EventTime: base.Add(4 * time.Minute)})
		again := playback.Position{PositionMS: 575_000, EventTime: base.Add(5 * time.Minute)}
		b.flushOne(t, key, again)
		b.flushOne(t, key, again)
		want := []string{finishAt("position", again.EventTime)}
		if got := b.finishes(t, key); !slices.Equal(got, want) {
			t.Fatalf("after a rewatch: finishes %v, want %v", got, want)
		}
	})

	t.Run("TwoNodesEitherOrder", func(t *testing.T) {
		for i, newerFirst := range []bool{true, false} {
			key := playback.Key{Member: int64(30 + i), Media: b.createMedia(t, map[string]any{"title": "b", "duration_ms": 600_000})}
			older := playback.Position{PositionMS: 575_000, EventTime: base.Add(time.Minute)}
			newer := playback.Position{PositionMS: 590_000, EventTime: base.Add(time.Minute + 5*time.Second)}
			b.flushFromTwoNodes(t, key, older, newer, !newerFirst)
			first := older
			if newerFirst {
				first = newer
			}
			if got, want := b.finishes(t, key), []string{finishAt("position", first.EventTime)}; !slices.Equal(got, want) {
				t.Errorf("newer flushed first = %v: finishes %v, want %v", newerFirst, got, want)
			}
		}
	})

	// A member finishes on one device (node A) and starts over on another (node B) before A
	// flushes: the finish is stored after the newer rewatch, as a late report that brings the
	// first watched mark. It is still the row's one finish, in either order; a retry or a
	// replay of the late report, or a late finish on a row already finished once, adds none.
	t.Run("FinishFlushedAfterANewerRewatch", func(t *testing.T) {
		for i, finishFirst := range []bool{true, false} {
			key := playback.Key{Member: int64(35 + i), Media: b.createMedia(t, map[string]any{"title": "r", "duration_ms": 600_000})}
			b.flushOne(t, key, at(base, 60*time.Second))
			finish := playback.Position{PositionMS: 590_000, EventTime: base.Add(2 * time.Minute)}
			rewatch := playback.Position{PositionMS: 5_000, EventTime: base.Add(2*time.Minute + 5*time.Second)}
			b.flushFromTwoNodes(t, key, finish, rewatch, finishFirst)
			b.flushOne(t, key, finish) // a retry, or a spill file replayed
			if got, want := b.finishes(t, key), []string{finishAt("position", finish.EventTime)}; !slices.Equal(got, want) {
				t.Errorf("finish flushed first = %v: finishes %v, want %v", finishFirst, got, want)
			}
		}
		// A finish recorded (at 3:00), a rewatch, then a finished report from before it (2:00)
		// arrives late and brings an earlier watched mark: flushed in order, 2:00 would have
		// been the finish and 3:00 the same one, so it is not a second finish.
		key := playback.Key{Member: 37, Media: b.createMedia(t, map[string]any{"title": "s", "duration_ms": 600_000})}
		b.flushOne(t, key, at(base, 60*time.Second))
		recorded := playback.Position{PositionMS: 580_000, EventTime: base.Add(3 * time.Minute)}
		b.flushOne(t, key, recorded)
		b.flushOne(t, key, playback.Position{PositionMS: 5_000, EventTime: base.Add(4 * time.Minute)})
		b.flushOne(t, key, playback.Position{PositionMS: 590_000, EventTime: base.Add(2 * time.Minute)})
		if got, want := b.finishes(t, key), []string{finishAt("position", recorded.EventTime)}; !slices.Equal(got, want) {
			t.Errorf("a late finished report on a row finished since: finishes %v, want %v", got, want)
		}
	})

	t.Run("Credits", func(t *testing.T) {
		key := playback.Key{Member: 40, Media: b.createMedia(t, map[string]any{"title": "c", "duration_ms": 1_200_000})}
		if _, err := b.pool.Exec(ctx, `UPDATE media SET credits_start_ms = 1000000, credits_end_ms = 1200000 WHERE id = $1`, key.Media); err != nil {
			t.Fatal(err)
		}
		pos := playback.Position{PositionMS: 1_010_000, EventTime: base.Add(time.Minute)}
		b.flushOne(t, key, pos)
		if got, want := b.finishes(t, key), []string{finishAt("credits", pos.EventTime)}; !slices.Equal(got, want) {
			t.Fatalf("finishes %v, want %v", got, want)
		}
	})

	t.Run("Marks", func(t *testing.T) {
		key := playback.Key{Member: 50, Media: b.createMedia(t, map[string]any{"title": "d", "duration_ms": 600_000})}
		marked := base.Add(time.Minute)
		if err := b.store.Mark(ctx, key.Member, []int64{key.Media}, true, marked); err != nil {
			t.Fatal(err)
		}
		// Marked again, and a finishing report after the mark: the row is finished already.
		if err := b.store.Mark(ctx, key.Member, []int64{key.Media}, true, base.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		b.flushOne(t, key, playback.Position{PositionMS: 590_000, EventTime: base.Add(3 * time.Minute)})
		if got, want := b.finishes(t, key), []string{finishAt("marked", marked)}; !slices.Equal(got, want) {
			t.Fatalf("finishes %v, want %v", got, want)
		}
		// Unmarked, then finished by a report: a new finish.
		if err := b.store.Mark(ctx, key.Member, []int64{key.Media}, false, base.Add(4*time.Minute)); err != nil {
			t.Fatal(err)
		}
		pos := playback.Position{PositionMS: 590_000, EventTime: base.Add(5 * time.Minute)}
		b.flushOne(t, key, pos)
		if got, want := b.finishes(t, key), []string{finishAt("marked", marked), finishAt("position", pos.EventTime)}; !slices.Equal(got, want) {
			t.Fatalf("after an unmark: finishes %v, want %v", got, want)
		}
	})

	t.Run("OnlyFinishesWrite", func(t *testing.T) {
		key := playback.Key{Member: 60, Media: b.createMedia(t, map[string]any{"title": "e", "duration_ms": 600_000})}
		var batch []buffer.Entry[playback.Key, playback.Position]
		for i := range 5 {
			batch = append(batch, buffer.Entry[playback.Key, playback.Position]{Key: playback.Key{Member: int64(61 + i), Media: key.Media},
				Value: playback.Position{PositionMS: int32(100_000 * i), EventTime: base.Add(time.Minute)}})
		}
		if err := b.store.Flush(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if n := b.count(t, `SELECT count(*) FROM playback_completions WHERE media_id = $1`, key.Media); n != 0 {
			t.Fatalf("positions before the point recorded %d finishes", n)
		}
	})
}

package playback_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// TestStore_OutOfOrderFlushesLeaveTheMediaWatched: two nodes hold a 96 % report and an older
// 40 % report of the same media, and flush them in either order through two buffers. The media ends watched at 96 %: the event_time guard decides the
// position, and a watched mark once written stays.
func TestStore_OutOfOrderFlushesLeaveTheMediaWatched(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, newerFirst := range []bool{true, false} {
		id := b.createMedia(t, map[string]any{"title": "lesson", "duration_ms": 600_000})
		key := playback.Key{Member: 3, Media: id}
		older := playback.Position{PositionMS: 240_000, EventTime: time.Now().UTC().Truncate(time.Microsecond)}
		newer := playback.Position{PositionMS: 576_000, EventTime: older.EventTime.Add(5 * time.Second)}
		got := b.flushFromTwoNodes(t, key, older, newer, !newerFirst)
		if got.PositionMS != newer.PositionMS || got.WatchedAt == nil || !got.WatchedAt.Equal(newer.EventTime) {
			t.Errorf("96%% flushed first = %v: stored %+v watched_at %v, want position %d watched at %v",
				newerFirst, got.Position, got.WatchedAt, newer.PositionMS, newer.EventTime)
		}
	}
}

// node is a second playback buffer on the same database, as another API node has.
func (b *bundle) node(t *testing.T) *buffer.Buffer[playback.Key, playback.Position] {
	t.Helper()
	buf, err := buffer.New(buffer.Config[playback.Key, playback.Position]{
		FlushInterval: time.Hour, Flush: b.store.Flush, Compare: playback.CompareKeys, Newer: playback.Newer})
	if err != nil {
		t.Fatal(err)
	}
	if err := buf.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = buf.Stop(context.Background()) })
	return buf
}

// TestCompletion_DatabaseAndGoAgree: the flush statement marks watched with the SQL function,
// the API's "finished" comes from media.Completion.State; both must put the point at the
// same millisecond for every duration, including the short ones where "never before the
// middle" decides, and for non-default settings.
func TestCompletion_DatabaseAndGoAgree(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	cases := []struct {
		c    media.Completion
		d    int64
		want float64
	}{
		{media.DefaultCompletion, 600_000, 570_000},     // 10 min: both rules give 9:30
		{media.DefaultCompletion, 3_600_000, 3_420_000}, // 1 h: 95 % comes first
		{media.DefaultCompletion, 120_000, 90_000},      // 2 min: the last 30 s come first
		{media.DefaultCompletion, 20_000, 10_000},       // 20 s: never before the middle
		{media.Completion{Ratio: 0.9, Tail: 0}, 1_000_000, 900_000},
		{media.Completion{Ratio: 1, Tail: 0}, 1_000, 1_000},
	}
	for _, tc := range cases {
		got, ok := tc.c.Point(tc.d)
		if !ok || got != tc.want {
			t.Errorf("%+v.Point(%d) = %v, %v; want %v", tc.c, tc.d, got, ok, tc.want)
		}
		var db float64
		if err := b.pool.QueryRow(context.Background(), `SELECT playhead_completion_point($1, $2, $3)`,
			tc.d, tc.c.Ratio, tc.c.TailMS()).Scan(&db); err != nil {
			t.Fatal(err)
		}
		if db != got {
			t.Errorf("%+v, duration %d: SQL point %v, Go point %v", tc.c, tc.d, db, got)
		}
		if tc.c.State(int64(tc.want), tc.d, 0) != media.Finished || tc.c.State(int64(tc.want)-1, tc.d, 0) == media.Finished {
			t.Errorf("%+v, duration %d: State does not switch to Finished at %v", tc.c, tc.d, tc.want)
		}
	}
	if _, ok := media.DefaultCompletion.Point(0); ok {
		t.Error("an unknown duration has a completion point")
	}
}

// TestStore_StaleFinishFlushedAfterARewatchStillMarksWatched: a member reaches 96 % on one
// node, then starts over and reports 10 % on another, and the 10 % is flushed first (the
// first node was slow, or its buffer replayed after a database outage). The position stays
// 10 % (the event_time guard decides it) but the media is watched, since it was: the same
// watched mark as when the flushes come in order, whatever the order.
func TestStore_StaleFinishFlushedAfterARewatchStillMarksWatched(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	for _, finishFirst := range []bool{true, false} {
		id := b.createMedia(t, map[string]any{"title": "lesson", "duration_ms": 600_000})
		key := playback.Key{Member: 4, Media: id}
		finish := playback.Position{PositionMS: 576_000, EventTime: time.Now().UTC().Truncate(time.Microsecond)}
		rewatch := playback.Position{PositionMS: 60_000, EventTime: finish.EventTime.Add(5 * time.Second)}
		got := b.flushFromTwoNodes(t, key, finish, rewatch, finishFirst)
		if got.PositionMS != rewatch.PositionMS || !got.EventTime.Equal(rewatch.EventTime) ||
			got.WatchedAt == nil || !got.WatchedAt.Equal(finish.EventTime) {
			t.Errorf("96%% flushed first = %v: stored %+v watched_at %v, want position %d at %v watched at %v",
				finishFirst, got.Position, got.WatchedAt, rewatch.PositionMS, rewatch.EventTime, finish.EventTime)
		}
	}
}

// flushFromTwoNodes offers x and y for key to two buffers (two nodes), stops them, so that
// they flush, x's first when xFirst, else y's first, and returns the stored position.
func (b *bundle) flushFromTwoNodes(t *testing.T, key playback.Key, x, y playback.Position, xFirst bool) playback.Stored {
	t.Helper()
	nodeX, nodeY := b.node(t), b.node(t)
	if _, err := nodeX.Offer(key, x); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeY.Offer(key, y); err != nil {
		t.Fatal(err)
	}
	first, second := nodeY, nodeX
	if xFirst {
		first, second = nodeX, nodeY
	}
	for _, node := range []*buffer.Buffer[playback.Key, playback.Position]{first, second} {
		if err := node.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	got, found, err := b.store.Get(context.Background(), key)
	if err != nil || !found {
		t.Fatalf("Get = %v, %v", found, err)
	}
	return got
}

package playback_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/playback"
)

// TestFlush_PositionUpdatesAreHOT: players report again and again within the hour, as they do
// every 5 s, and nearly every update the flush makes is a HOT update (no index touched). With
// event_time a key of the list's index, none would be.
//
// Not parallel: an update is HOT only if its page has room, and the room comes from pruning the
// row's older versions, which waits while any transaction of the server (of any database:
// PostgreSQL's snapshot horizon is approximate) might still see them. Beside the package's
// parallel tests 418 of 950 were HOT, alone 938; the design is what this test checks.
func TestFlush_PositionUpdatesAreHOT(t *testing.T) {
	b := setup(t, options{})
	id := b.createMedia(t, map[string]any{"title": "lecture", "duration_ms": 3_600_000})
	ctx := context.Background()
	const members, reports = 50, 20
	// Within one hour whatever the clock: the reports' hour never changes.
	base := time.Now().UTC().Truncate(time.Hour).Add(10 * time.Minute)
	for r := range reports {
		batch := make([]buffer.Entry[playback.Key, playback.Position], members)
		for m := range members {
			batch[m] = buffer.Entry[playback.Key, playback.Position]{Key: playback.Key{Member: int64(100 + m), Media: id},
				Value: playback.Position{PositionMS: int32(5000 * r), EventTime: base.Add(time.Duration(5*r) * time.Second)}}
		}
		if err := b.store.Flush(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// The statistics count a backend's updates once it reports them, within a second or so.
	want := int64(members * (reports - 1))
	var upd, hot int64
	for giveUp := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := b.pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'playback'`).Scan(&upd, &hot); err != nil {
			t.Fatal(err)
		}
		if upd >= want || time.Now().After(giveUp) {
			break
		}
	}
	if upd < want {
		t.Fatalf("the statistics count %d updates of playback, %d were made", upd, want)
	}
	t.Logf("%d of %d position updates were HOT", hot, upd)
	if float64(hot) < 0.95*float64(upd) {
		t.Errorf("%d of %d position updates were HOT, want at least 95%%", hot, upd)
	}
}

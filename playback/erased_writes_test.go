package playback_test

import (
	"context"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/playback"
)

// The writes besides the flush, made for an erased member by a node that has not heard of the
// erasure yet (its token still passes there), store nothing: the hide answers 401 and creates
// no row, the forget leaves no tombstone, the pause no history_paused row. And while a history
// is paused, a hide of an item never stored creates no row.
func TestErasedMember_HideForgetPauseStoreNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	id := b.createMedia(t, map[string]any{"title": "film", "duration_ms": 600_000})
	const erased, paused = 4_700_000_501, 36
	if _, err := erasure.Erase(ctx, b.pool, erased, erasure.MaxAttempts); err != nil {
		t.Fatal(err)
	}
	key := playback.Key{Member: erased, Media: id}
	now := time.Now().UTC()
	err := b.store.Hide(ctx, key, playback.Position{PositionMS: 5000, EventTime: now}, now)
	if code := apperr.CodeOf(err); code != apperr.Unauthenticated {
		t.Errorf("Hide of an erased member = %v (%s), want unauthenticated", err, code)
	}
	if _, err := b.store.Forget(ctx, key, now); err != nil {
		t.Fatal(err)
	}
	if err := b.store.SaveSettings(ctx, erased, playback.Settings{HistoryPaused: true}); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"playback", "playback_forgotten", "history_paused"} {
		if n := b.count(t, `SELECT count(*) FROM `+table+` WHERE member_id = $1`, erased); n != 0 {
			t.Errorf("%s holds %d rows of the erased member", table, n)
		}
	}

	if err := b.store.SaveSettings(ctx, paused, playback.Settings{HistoryPaused: true}); err != nil {
		t.Fatal(err)
	}
	pk := playback.Key{Member: paused, Media: id}
	if err := b.store.Hide(ctx, pk, playback.Position{PositionMS: 5000, EventTime: now}, now); err != nil {
		t.Fatal(err)
	}
	if n := b.rows(t, pk); n != 0 {
		t.Error("a hide while paused created a row")
	}
}

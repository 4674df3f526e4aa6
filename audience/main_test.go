package audience_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// viewing is a database with the playback store, and a clock for scripted reports.
type viewing struct {
	pool  *pgxpool.Pool
	store *playback.Store
	media *media.Store
	start time.Time
}

func setup(t *testing.T) *viewing {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	return &viewing{pool: pool, store: playback.NewStore(pool, media.DefaultCompletion), media: media.NewStore(pool),
		start: time.Now().UTC().Truncate(time.Second).Add(-24 * time.Hour)}
}

// video creates a READY public media of owner lasting 100 s (a watched bucket is a second).
func (v *viewing) video(t *testing.T, owner int64, title string) int64 {
	t.Helper()
	duration := int64(100_000)
	m, err := v.media.Create(context.Background(), media.Media{OwnerID: owner, Title: title, Status: media.StatusReady,
		Visibility: media.VisibilityPublic, DurationMS: duration})
	if err != nil {
		t.Fatal(err)
	}
	return m.ID
}

// report is one position report of a script: member at position (seconds) at offset.
type report struct {
	member  int64
	at, pos int // seconds from the script's start
	mediaID int64
}

// play appends the reports of member playing mediaID from one second to another, every 5 s,
// starting at offset at, and returns the offset after the last report.
func play(reports []report, member, mediaID int64, at, from, to int) ([]report, int) {
	for pos := from; pos <= to; pos += 5 {
		reports = append(reports, report{member: member, mediaID: mediaID, at: at, pos: pos})
		at += 5
	}
	return reports, at
}

// rolledUp runs a rollup and returns media id's figures as its owner reads them.
func (v *viewing) rolledUp(t *testing.T, id, owner int64) audience.Media {
	t.Helper()
	if _, err := audience.Rollup(context.Background(), v.pool); err != nil {
		t.Fatal(err)
	}
	a, err := audience.NewStore(v.pool).Media(context.Background(), id, auth.Identity{MemberID: owner})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// flush writes the reports as the buffer would: everything reported in one 5 s window in one
// batch, coalesced and sorted by key.
func (v *viewing) flush(t *testing.T, reports []report) {
	t.Helper()
	windows := map[int][]buffer.Entry[playback.Key, playback.Position]{}
	last := 0
	for _, r := range reports {
		w := r.at / 5
		windows[w] = append(windows[w], buffer.Entry[playback.Key, playback.Position]{
			Key:   playback.Key{Member: r.member, Media: r.mediaID},
			Value: playback.Position{PositionMS: int32(r.pos * 1000), EventTime: v.start.Add(time.Duration(r.at) * time.Second)},
		})
		last = max(last, w)
	}
	for w := 0; w <= last; w++ {
		batch := windows[w]
		if len(batch) == 0 {
			continue
		}
		slices.SortFunc(batch, func(a, b buffer.Entry[playback.Key, playback.Position]) int {
			return playback.CompareKeys(a.Key, b.Key)
		})
		if err := v.store.Flush(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
}

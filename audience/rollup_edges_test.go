package audience_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// A flush commits its positions and its marks together, but a mark that is already there is
// left alone (ON CONFLICT DO NOTHING takes no lock on it). A rollup that starts while such a
// flush is still open takes that mark, reads the rows without the flush's positions (not yet
// committed in its snapshot), and deletes it; the flush then commits with no mark left, and
// no later rollup reads its media again until another position arrives. The flush is held
// just before its commit by a deferred trigger waiting for an advisory lock the test holds,
// after both of its statements ran: exactly where a rollup on another node can land.
func TestRollup_APositionCommittedDuringARollupIsRolledUpLater(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	id := v.video(t, owner, "lecture")
	flushOne := func(member int64, at, pos int) error {
		return v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{
			Key:   playback.Key{Member: member, Media: id},
			Value: playback.Position{PositionMS: int32(pos * 1000), EventTime: v.start.Add(time.Duration(at) * time.Second)}}})
	}
	if err := flushOne(101, 0, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := audience.Rollup(ctx, v.pool); err != nil {
		t.Fatal(err)
	}
	// The media is marked again (a second viewer), not yet rolled up.
	if err := flushOne(102, 0, 10); err != nil {
		t.Fatal(err)
	}

	holderPID, release := holdCommits(t, v, "playback")
	flushed := make(chan error, 1)
	go func() { flushed <- flushOne(103, 0, 10) }()
	pgtest.WaitBlocked(t, v.pool, holderPID) // both statements ran; the commit waits

	rollupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := audience.Rollup(rollupCtx, v.pool); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}

	a := v.rolledUp(t, id, owner)
	var rows, marks int
	if err := v.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM playback WHERE media_id = $1), (SELECT count(*) FROM audience_dirty)`, id).
		Scan(&rows, &marks); err != nil {
		t.Fatal(err)
	}
	if a.Views != int64(rows) {
		t.Errorf("after every rollup: %d views, but %d playback rows are committed (%d marks left): the position committed during a rollup is never rolled up",
			a.Views, rows, marks)
	}
}

// lessonsOf places the media in a collection (an import of admin 1), in order.
func lessonsOf(t *testing.T, v *viewing, name string, media ...int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := v.pool.Exec(ctx, `INSERT INTO members (id) VALUES (1) ON CONFLICT DO NOTHING`); err != nil {
		t.Fatal(err)
	}
	var importID int64
	if err := v.pool.QueryRow(ctx, `INSERT INTO imports (created_by, filename, total_rows, accepted, rejected) VALUES (1, 'c.xlsx', $1, $1, 0) RETURNING id`,
		len(media)).Scan(&importID); err != nil {
		t.Fatal(err)
	}
	for i, m := range media {
		if _, err := v.pool.Exec(ctx, `INSERT INTO import_rows (import_id, row_number, collection, chapter, position, video_url, media_id)
			VALUES ($1, $2, $3, 1, $2, 'https://example.com/v.mp4', $4)`, importID, i+1, name, m); err != nil {
			t.Fatal(err)
		}
	}
}

// A collection is read only by an admin or the owner of every lesson: the owner of some of
// them (first, last or middle) gets 404 like a stranger, whoever owns the others; the owner of
// all of them reads it. (The package's test checked only a member owning none.)
func TestCollection_APartOwnerReadsNothing(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	const a, b = 50, 60
	mine1, mine2, theirs := v.video(t, a, "a1"), v.video(t, a, "a2"), v.video(t, b, "b1")
	lessonsOf(t, v, "theirs last", mine1, mine2, theirs)
	lessonsOf(t, v, "theirs first", theirs, mine1, mine2)
	lessonsOf(t, v, "theirs between", mine1, theirs, mine2)
	lessonsOf(t, v, "all mine", mine1, mine2)
	store := audience.NewStore(v.pool)
	for _, name := range []string{"theirs last", "theirs first", "theirs between"} {
		for _, who := range []int64{a, b} {
			if c, err := store.Collection(ctx, name, auth.Identity{MemberID: who}); apperr.CodeOf(err) != apperr.NotFound {
				t.Errorf("member %d, owner of part of %q: %+v, %v; want not found", who, name, c, err)
			}
		}
		if _, err := store.Collection(ctx, name, auth.Identity{MemberID: 999, Admin: true}); err != nil {
			t.Errorf("an admin reading %q: %v", name, err)
		}
	}
	if c, err := store.Collection(ctx, "all mine", auth.Identity{MemberID: a}); err != nil || len(c.Lessons) != 2 {
		t.Errorf("the owner of every lesson: %+v, %v; want both lessons", c, err)
	}
}

// docs/api/audience.md: "the figures are aggregates; no route names a member or returns one
// member's ranges". With one viewer, the retention curve was that viewer's bitmap: the owner of
// a public media read exactly which seconds the one other member played. Below
// audience.MinViewers viewers the curve, the watch time and who finished are withheld; from
// MinViewers on the watch time and who finished are shown (with noise), and the curve from
// audience.MinCurveViewers viewers at its release: at 99 viewers, then at 100 (still released
// over 99: the next release is at 99 + 12), and from 111.
func TestMedia_FewViewersFiguresAreWithheld(t *testing.T) {
	t.Parallel()
	v := setup(t)
	const owner = 7
	id := v.video(t, owner, "public lecture")
	member := int64(300)
	// watch adds n viewers who watched 20 s to 40 s, rolls up and reads the owner's figures.
	watch := func(n int) audience.Media {
		t.Helper()
		var reports []report
		for range n {
			reports, _ = play(reports, member, id, 0, 20, 40)
			member++
		}
		v.flush(t, reports)
		return v.rolledUp(t, id, owner)
	}
	for range audience.MinViewers {
		a := watch(1)
		few := a.Viewers < audience.MinViewers
		if a.Viewers != member-300 || a.Withheld != few || few != (a.WatchTimeMS == nil) || few != (a.Finished == nil) || few != (a.CompletionRate == nil) ||
			a.Retention != nil {
			t.Errorf("with %d viewers: %+v; want the watch time and finishes withheld below %d viewers and shown from there, and no curve",
				member-300, a, audience.MinViewers)
		}
	}
	for _, c := range []struct{ add, viewers, figures int64 }{{94, 99, 99}, {1, 100, 99}, {11, 111, 111}} {
		a := watch(int(c.add))
		curve := c.figures >= audience.MinCurveViewers
		if a.Viewers != c.viewers || a.FiguresViewers != c.figures || a.Withheld || a.Finished == nil || curve != (a.Retention != nil) {
			t.Errorf("with %d viewers: %d viewers, figures over %d, curve %v (%+v); want figures over %d, the curve shown %v",
				c.viewers, a.Viewers, a.FiguresViewers, a.Retention != nil, a, c.figures, curve)
		}
	}
}

// PLAYHEAD_FLUSH_INTERVAL is any positive duration, and the buffer keeps only the last report
// of each flush. With a fixed 15 s window, at a flush interval of 20 s consecutive stored
// reports were 20 s apart, and a viewer who played the whole video continuously was recorded
// as having watched one bucket in twenty. The window follows the flush interval now
// (playback.WatchedWindow, which cmd/api passes from PLAYHEAD_FLUSH_INTERVAL).
func TestRetention_AContinuousViewerAtAnAcceptedFlushInterval(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	id := v.video(t, 7, "lecture")
	const flushEvery = 20 * time.Second
	store := playback.NewStore(v.pool, media.DefaultCompletion).WatchedWithin(playback.WatchedWindow(flushEvery))
	key := playback.Key{Member: 400, Media: id}
	for at := time.Duration(0); at <= 100*time.Second; at += playback.ReportInterval { // playing at real time
		if at%flushEvery != 0 && at != 100*time.Second {
			continue // coalesced in the buffer: only the last report of a flush is written
		}
		err := store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{Key: key,
			Value: playback.Position{PositionMS: int32(at.Milliseconds()), EventTime: v.start.Add(at)}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	var watched int
	if err := v.pool.QueryRow(ctx, `SELECT bit_count(watched) FROM playback WHERE member_id = $1 AND media_id = $2`, key.Member, key.Media).Scan(&watched); err != nil {
		t.Fatal(err)
	}
	if watched != audience.Buckets {
		t.Errorf("a viewer who played all 100 s, flushed every %s: %d buckets of %d watched", flushEvery, watched, audience.Buckets)
	}
}

// Two rollups at once (a retry on another worker while the first is still running, or the
// periodic run of a node whose clock is ahead): the second skips the media the first holds
// and returns, instead of waiting for it. The first is held at its commit by a deferred
// trigger on media_audience waiting for an advisory lock the test holds.
func TestRollup_ASecondRollupSkipsWhatTheFirstHolds(t *testing.T) {
	t.Parallel()
	v := setup(t)
	ctx := context.Background()
	id := v.video(t, 7, "lecture")
	reports, _ := play(nil, 101, id, 0, 0, 10)
	v.flush(t, reports)
	holderPID, release := holdCommits(t, v, "media_audience")
	first := make(chan error, 1)
	go func() { _, err := audience.Rollup(ctx, v.pool); first <- err }()
	pgtest.WaitBlocked(t, v.pool, holderPID) // the first holds the media's mark, at its commit
	var firstPID int
	if err := v.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))`,
		holderPID).Scan(&firstPID); err != nil {
		t.Fatal(err)
	}
	secondCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	second := make(chan error, 1)
	go func() { _, err := audience.Rollup(secondCtx, v.pool); second <- err }()
	for waiting := false; !waiting; {
		select {
		case err := <-second:
			if err != nil {
				t.Errorf("the second rollup: %v", err)
			}
			waiting = true
			continue
		default:
		}
		var n int
		if err := v.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND $1 = ANY(pg_blocking_pids(pid))`,
			firstPID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			t.Errorf("the second rollup waits for the first one's marks")
			cancel()
			<-second
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// holdCommits makes every transaction that writes table wait at its commit (a deferred
// constraint trigger that takes an advisory lock) until release; it returns the backend that
// holds the lock, for pgtest.WaitBlocked. release is also run when the test ends.
func holdCommits(t *testing.T, v *viewing, table string) (holderPID int, release func()) {
	t.Helper()
	ctx := context.Background()
	if _, err := v.pool.Exec(ctx, `
		CREATE FUNCTION hold_commit() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER hold_commit AFTER INSERT OR UPDATE ON `+table+`
		DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION hold_commit()`); err != nil {
		t.Fatal(err)
	}
	holder, err := v.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(4242)) l`).Scan(&holderPID); err != nil {
		holder.Release()
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(4242)`); err != nil {
				t.Error(err)
			}
			holder.Release()
		})
	}
	t.Cleanup(release)
	return holderPID, release
}

package audience_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/audience"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/playback"
)

// Review 5: the take now commits before the read, so nothing orders two rollups of the same
// media any more. Rollup A takes m and starts reading (snapshot S_A); a flush then commits a
// position of m and marks it again (nothing waits: A's take is committed); rollup B (another
// node, or the next run time while A is still at a slow batch) takes that mark and writes the
// newer figures; A then writes its older ones over them (ON CONFLICT DO UPDATE, no check of
// computed_at). The mark is gone (B took it): the position is never rolled up until another
// one arrives. Before the split, A's DELETE held m's mark until A committed, so the flush's
// mark waited for A and B could only write after A.
func TestReview5_AnOlderRollupOverwritesANewerOneAndTheMarkIsGone(t *testing.T) {
	v := setup(t)
	ctx := context.Background()
	const owner = 7
	id := v.video(t, owner, "lecture")
	flushOne := func(member int64) {
		t.Helper()
		if err := v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{
			Key:   playback.Key{Member: member, Media: id},
			Value: playback.Position{PositionMS: 10_000, EventTime: v.start}}}); err != nil {
			t.Fatal(err)
		}
	}
	flushOne(101)

	cfg := v.pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["application_name"] = "slow-rollup"
	slow, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	// Stands for a slow batch (a big media in it): rollup A stops at its write, snapshot taken.
	if _, err := v.pool.Exec(ctx, `
		CREATE FUNCTION hold_write() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF current_setting('application_name') = 'slow-rollup' THEN PERFORM pg_advisory_xact_lock(4343); END IF; RETURN NEW; END $$;
		CREATE TRIGGER hold_write BEFORE INSERT ON media_audience FOR EACH ROW EXECUTE FUNCTION hold_write()`); err != nil {
		t.Fatal(err)
	}
	holder, err := v.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Release()
	var holderPID int
	if err := holder.QueryRow(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(4343)) l`).Scan(&holderPID); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := audience.Rollup(ctx, slow); done <- err }()
	pgtest.WaitBlocked(t, v.pool, holderPID)

	flushOne(102) // does not wait: A's take committed
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := audience.Rollup(rctx, v.pool); err != nil { // rollup B
		t.Fatal(err)
	}
	var afterB int64
	if err := v.pool.QueryRow(ctx, `SELECT views FROM media_audience WHERE media_id = $1`, id).Scan(&afterB); err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(4343)`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	var views, marks int64
	if err := v.pool.QueryRow(ctx, `SELECT (SELECT views FROM media_audience WHERE media_id = $1), (SELECT count(*) FROM audience_dirty)`, id).
		Scan(&views, &marks); err != nil {
		t.Fatal(err)
	}
	if views != 2 && marks == 0 {
		t.Errorf("after both rollups: %d views (rollup B had written %d), 2 playback rows, %d marks left: the newer figures were overwritten and nothing will redo them", views, afterB, marks)
	}
}

// Review 5: MinViewers withholds Finished on the media route only. The collection route gives
// the same owner each lesson's Started and Finished unwithheld: with one viewer, whether that
// member finished.
func TestReview5_CollectionShowsWhatTheMediaRouteWithholds(t *testing.T) {
	v := setup(t)
	ctx := context.Background()
	const owner = 50
	id := v.video(t, owner, "only one viewer")
	if err := v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{
		Key:   playback.Key{Member: 101, Media: id},
		Value: playback.Position{PositionMS: 100_000, EventTime: v.start}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := audience.Rollup(ctx, v.pool); err != nil {
		t.Fatal(err)
	}
	lessonsOf(t, v, "course", id)
	who := auth.Identity{MemberID: owner}
	m, err := audience.NewStore(v.pool).Media(ctx, id, who)
	if err != nil {
		t.Fatal(err)
	}
	c, err := audience.NewStore(v.pool).Collection(ctx, "course", who)
	if err != nil {
		t.Fatal(err)
	}
	if m.Withheld && c.Lessons[0].Finished > 0 {
		t.Errorf("media route withholds (viewers %d < %d), collection route shows started=%d finished=%d for the same media",
			m.Viewers, audience.MinViewers, c.Lessons[0].Started, c.Lessons[0].Finished)
	}
}

// Review 5: the marks of a step are deleted (committed) before the step reads; when the
// rewrite fails and the put-back fails too (the database went away between them: a failover,
// a restart, a lost connection; here two triggers), or the process dies between take and
// rewrite, the marks are gone and those media are never rolled up again until a new
// position. Before the split the take and the rewrite were one statement: nothing was lost.
func TestReview5_AFailedStepWhosePutBackFailsLosesItsMarks(t *testing.T) {
	v := setup(t)
	ctx := context.Background()
	id := v.video(t, 7, "lecture")
	if err := v.store.Flush(ctx, []buffer.Entry[playback.Key, playback.Position]{{
		Key:   playback.Key{Member: 101, Media: id},
		Value: playback.Position{PositionMS: 10_000, EventTime: v.start}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := v.pool.Exec(ctx, `
		CREATE FUNCTION fail_now() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'database gone'; END $$;
		CREATE TRIGGER fail_write BEFORE INSERT ON media_audience FOR EACH ROW EXECUTE FUNCTION fail_now();
		CREATE TRIGGER fail_remark BEFORE INSERT ON audience_dirty FOR EACH ROW EXECUTE FUNCTION fail_now()`); err != nil {
		t.Fatal(err)
	}
	if _, err := audience.Rollup(ctx, v.pool); err == nil {
		t.Fatal("rollup did not fail")
	}
	if _, err := v.pool.Exec(ctx, `DROP TRIGGER fail_write ON media_audience; DROP TRIGGER fail_remark ON audience_dirty`); err != nil {
		t.Fatal(err)
	}
	if _, err := audience.Rollup(ctx, v.pool); err != nil {
		t.Fatal(err)
	}
	var rolled int
	if err := v.pool.QueryRow(ctx, `SELECT count(*) FROM media_audience WHERE media_id = $1`, id).Scan(&rolled); err != nil {
		t.Fatal(err)
	}
	if rolled == 0 {
		t.Errorf("after the database came back and a rollup succeeded, media %d has no audience row and no mark: its positions are never rolled up", id)
	}
}

// Review 5: concurrent flushes of overlapping media (sorted by key as the buffer sends them)
// and rollups in a loop: no deadlock (40P01) expected, none found.
func TestReview5_ConcurrentFlushesAndRollupsDoNotDeadlock(t *testing.T) {
	v := setup(t)
	ctx := context.Background()
	var ids []int64
	for i := 0; i < 6; i++ {
		ids = append(ids, v.video(t, 7, "m"))
	}
	stop := time.Now().Add(5 * time.Second)
	errs := make(chan error, 8)
	for w := 0; w < 4; w++ {
		go func(w int) {
			n := 0
			for time.Now().Before(stop) {
				n++
				var batch []buffer.Entry[playback.Key, playback.Position]
				for member := int64(1); member <= 3; member++ {
					for j, id := range ids {
						if (n+j+w+int(member))%3 == 0 {
							continue
						}
						batch = append(batch, buffer.Entry[playback.Key, playback.Position]{
							Key:   playback.Key{Member: member, Media: id},
							Value: playback.Position{PositionMS: int32(n%100) * 1000, EventTime: v.start.Add(time.Duration(n*10+w) * time.Millisecond)}})
					}
				}
				if err := v.store.Flush(ctx, batch); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}(w)
	}
	go func() {
		for time.Now().Before(stop) {
			if _, err := audience.Rollup(ctx, v.pool); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	for i := 0; i < 5; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

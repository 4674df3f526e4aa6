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

// Two rollups of one media never write out of order. A rollup that committed its take before
// reading would let this happen: rollup A takes m and starts reading; a flush commits a
// position of m and marks it again; rollup B takes that mark and writes the newer figures; A
// then writes its older ones over them, and B has used the mark. A's take holds m's mark
// until A commits: the flush's mark waits for A, B finds nothing to take, and once A has
// written, the flush's mark is there for the next rollup.
func TestRollup_AnOlderRollupNeverOverwritesANewerOne(t *testing.T) {
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

	flushed := make(chan struct{})
	go func() { defer close(flushed); flushOne(102) }()
	var rollupA int
	if err := v.pool.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE application_name = 'slow-rollup' AND state <> 'idle'`).Scan(&rollupA); err != nil {
		t.Fatal(err)
	}
	pgtest.WaitBlocked(t, v.pool, rollupA) // the flush waits for A's hold on the mark
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if n, err := audience.Rollup(rctx, v.pool); err != nil || n != 0 { // rollup B
		t.Fatalf("rollup B while A holds the media: %d rewritten, %v; want nothing taken", n, err)
	}
	if _, err := holder.Exec(ctx, `SELECT pg_advisory_unlock(4343)`); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	<-flushed
	if _, err := audience.Rollup(ctx, v.pool); err != nil { // the next rollup
		t.Fatal(err)
	}
	var views, marks int64
	if err := v.pool.QueryRow(ctx, `SELECT (SELECT views FROM media_audience WHERE media_id = $1), (SELECT count(*) FROM audience_dirty)`, id).
		Scan(&views, &marks); err != nil {
		t.Fatal(err)
	}
	if views != 2 || marks != 0 {
		t.Errorf("after the rollups: %d views, %d marks left; want 2 views (both playback rows), nothing left", views, marks)
	}
}

// MinViewers withholds Finished on the collection route as on the media route: otherwise the
// collection route would give the same owner each lesson's Finished, with one viewer whether
// that member finished. A lesson below MinViewers withholds it.
func TestCollection_WithholdsWhatTheMediaRouteWithholds(t *testing.T) {
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
	if l := c.Lessons[0]; !m.Withheld || !l.Withheld || l.Finished != nil {
		t.Errorf("media route withheld %v (viewers %d < %d); collection route: %+v, want finished withheld too",
			m.Withheld, m.Viewers, audience.MinViewers, l)
	}
}

// A step whose rewrite fails keeps its marks: the take and the rewrite are one transaction.
// (A version that committed the take first lost them when the rewrite failed and putting them
// back failed too: the database gone between them, here a trigger on each table.)
func TestRollup_AFailedStepKeepsItsMarks(t *testing.T) {
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

// Concurrent flushes of overlapping media (sorted by key as the buffer sends them)
// and rollups in a loop: no deadlock (40P01) expected, none found.
func TestRollup_ConcurrentFlushesAndRollupsDoNotDeadlock(t *testing.T) {
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

package playback_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/playback"
)

// The statements below are copies of the production upsert (playback/store.go: upsertOneSQL
// and the ON CONFLICT clause of flushSQL), because those constants are unexported. Keep the
// guard identical so that every technique does the same work.

const benchUpsertOneSQL = `
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (member_id, media_id) DO UPDATE
SET position_ms = excluded.position_ms,
    event_time  = excluded.event_time,
    updated_at  = excluded.updated_at,
    hidden      = false
WHERE p.event_time < excluded.event_time`

// benchStageColumns are the columns COPY writes into the staging table.
var benchStageColumns = []string{"member_id", "media_id", "position_ms", "event_time"}

// benchMergeSQL moves a staging table into playback with flushSQL's conflict clause. Rows leave
// a freshly filled staging table in the order COPY wrote them (sorted), as rows leave unnest in
// array order; neither is promised by SQL, and an ORDER BY would add a sort.
const benchMergeSQL = `
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at)
SELECT s.member_id, s.media_id, s.position_ms, s.event_time, $1
FROM %s AS s
ON CONFLICT (member_id, media_id) DO UPDATE
SET position_ms = excluded.position_ms,
    event_time  = excluded.event_time,
    updated_at  = excluded.updated_at,
    hidden      = false
WHERE p.event_time < excluded.event_time`

// benchUpdateFirstSQL is the flush statement rewritten so that rows that exist are changed by a
// plain UPDATE … FROM and only the others go through INSERT … ON CONFLICT (a conflicting insert
// probes the key, locks the row it found, then updates it). Its conflict clause and
// last-finished step are production's; the UPDATE's SET applies the same rules to the reported
// row (but for the watched ranges, which its UPDATE pass does not compute: the experiment
// predates them). What it saves in CPU and why it was not kept (it takes row locks in two passes, so
// concurrent flushes deadlock) is in docs/decisions/0002-rows-that-exist-updated-first.md.
const benchUpdateFirstSQL = `
WITH reported AS (
	SELECT r.*, CASE WHEN r.finished THEN r.event_time END AS watched_at, $5::timestamptz AS updated_at
	FROM (
		SELECT u.*, coalesce(u.position_ms >= playhead_completion_point(m.duration_ms, $6, $7), false) AS finished,
		       CASE WHEN $8 AND m.duration_ms > 0 THEN least(99, u.position_ms::bigint * 100 / m.duration_ms)::smallint END AS watched_bucket
		FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::timestamptz[]) AS u(member_id, media_id, position_ms, event_time)
		LEFT JOIN media m ON m.id = u.media_id
	) r
),
updated AS (
	UPDATE playback AS p
	SET position_ms = CASE WHEN p.event_time < t.event_time THEN t.position_ms ELSE p.position_ms END,
	    event_time  = greatest(p.event_time, t.event_time),
	    updated_at  = t.updated_at,
	    watched_at  = least(p.watched_at, t.watched_at),
	    finished    = CASE WHEN p.event_time < t.event_time THEN t.finished ELSE p.finished END,
	    hidden      = p.hidden AND p.event_time >= t.event_time
	FROM reported t
	WHERE p.member_id = t.member_id AND p.media_id = t.media_id
	  AND (p.event_time < t.event_time OR t.watched_at < coalesce(p.watched_at, 'infinity'))
	RETURNING p.member_id, p.media_id
),
inserted AS (
	INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished, watched_bucket)
	SELECT t.member_id, t.media_id, t.position_ms, t.event_time, t.updated_at, t.watched_at, t.finished, t.watched_bucket
	FROM reported t
	WHERE NOT EXISTS (SELECT 1 FROM updated w WHERE w.member_id = t.member_id AND w.media_id = t.media_id)
	ORDER BY t.member_id, t.media_id
` + playback.UpsertConflictSQL + `
),
written AS (
	SELECT member_id, media_id FROM updated UNION ALL SELECT member_id, media_id FROM inserted
)` + playback.KeepLastFinishedSQL

// benchFloorSQL is not a candidate: it keeps none of the flush's rules (no event-time guard, no
// completion, no watched ranges, no last-finished step, no audience mark, no lock order) and
// writes only the position, the event time and updated_at of rows that exist. It is the least
// a position costs the database when each one is a row updated in place on this table (its
// indexes, generated column, constraints and foreign key), the floor under any rewrite of the
// flush statement.
const benchFloorSQL = `
UPDATE playback AS p
SET position_ms = u.position_ms, event_time = u.event_time, updated_at = $5
FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::timestamptz[]) AS u(member_id, media_id, position_ms, event_time)
WHERE p.member_id = u.member_id AND p.media_id = u.media_id`

type benchBatch = []buffer.Entry[playback.Key, playback.Position]

// benchColumns splits a batch into the four arrays the unnest statements take, as Store.Flush
// does.
func benchColumns(batch benchBatch) (members, medias []int64, positions []int32, times []time.Time) {
	n := len(batch)
	members, medias, positions, times = make([]int64, n), make([]int64, n), make([]int32, n), make([]time.Time, n)
	for i, e := range batch {
		members[i], medias[i], positions[i], times[i] = e.Key.Member, e.Key.Media, e.Value.PositionMS, e.Value.EventTime
	}
	return members, medias, positions, times
}

// upsertFunc writes one coalesced, sorted batch.
type upsertFunc func(ctx context.Context, batch benchBatch) error

// benchMethod is one bulk-write technique. prepare runs outside the timer and returns the
// write function and what to release afterwards.
type benchMethod struct {
	name    string
	prepare func(b *testing.B, pool *pgxpool.Pool) (upsertFunc, func())
}

var benchMethods = []benchMethod{
	// The naive baseline: one statement (one round trip, one transaction) per row.
	{"PerRow", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		store := playback.NewStore(pool, media.DefaultCompletion)
		return func(ctx context.Context, batch benchBatch) error {
			for _, e := range batch {
				if err := store.UpsertOne(ctx, e.Key, e.Value); err != nil {
					return err
				}
			}
			return nil
		}, func() {}
	}},
	// Production: one INSERT … SELECT FROM unnest(arrays) ON CONFLICT.
	{"Unnest", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		return playback.NewStore(pool, media.DefaultCompletion).Flush, func() {}
	}},
	// Production with PLAYHEAD_WATCHED_RANGES off: the same statements, the ranges
	// not computed; the difference to Unnest is what the watched ranges cost.
	{"UnnestNoRanges", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		return playback.NewStore(pool, media.DefaultCompletion).WithoutWatchedRanges().Flush, func() {}
	}},
	// Production's statement on the index design before migration 00014 (the name keeps its
	// tracker number, which the runs of docs/benchmarks/ use; docs/decisions/0003): event_time a
	// key of playback_continue_idx and full pages, so every update inserts index entries (no HOT).
	{"UnnestBefore33", func(b *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		if _, err := pool.Exec(context.Background(), `DROP INDEX playback_continue_idx;
			CREATE INDEX playback_continue_idx ON playback (member_id, finished, event_time DESC, media_id DESC) WHERE NOT hidden;
			ALTER TABLE playback RESET (fillfactor)`); err != nil {
			b.Fatal(err)
		}
		return playback.NewStore(pool, media.DefaultCompletion).Flush, func() {}
	}},
	// Production's rules with the rows that exist rewritten by UPDATE … FROM first
	// (benchUpdateFirstSQL): measured as an alternative to Unnest, not kept.
	{"UpdateFirst", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		return func(ctx context.Context, batch benchBatch) error {
			members, medias, positions, times := benchColumns(batch)
			c := media.DefaultCompletion
			_, err := pool.Exec(ctx, benchUpdateFirstSQL, members, medias, positions, times, time.Now(), c.Ratio, c.TailMS(),
				true, playback.WatchedWindow(5*time.Second))
			return err
		}, func() {}
	}},
	// The floor (benchFloorSQL): what a bare in-place update of the rows costs, for scale. A
	// batch whose rows do not all exist yet (the untimed insert pass) is written by the
	// production flush.
	{"Floor", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		flush := playback.NewStore(pool, media.DefaultCompletion).Flush
		return func(ctx context.Context, batch benchBatch) error {
			members, medias, positions, times := benchColumns(batch)
			tag, err := pool.Exec(ctx, benchFloorSQL, members, medias, positions, times, time.Now())
			if err == nil && tag.RowsAffected() < int64(len(batch)) {
				return flush(ctx, batch)
			}
			return err
		}, func() {}
	}},
	// The one-row upsert queued len(batch) times in a pgx.Batch: one pipelined round trip, one
	// implicit transaction.
	{"Batch", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		return func(ctx context.Context, batch benchBatch) error {
			now := time.Now()
			var pb pgx.Batch
			for _, e := range batch {
				pb.Queue(benchUpsertOneSQL, e.Key.Member, e.Key.Media, e.Value.PositionMS, e.Value.EventTime, now)
			}
			return pool.SendBatch(ctx, &pb).Close()
		}, func() {}
	}},
	// COPY into a temporary table created in the transaction (ON COMMIT DROP), then one
	// INSERT … SELECT … ON CONFLICT.
	{"CopyTemp", func(_ *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		merge := fmt.Sprintf(benchMergeSQL, "playback_stage")
		return func(ctx context.Context, batch benchBatch) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `CREATE TEMP TABLE playback_stage
					(member_id bigint, media_id bigint, position_ms int, event_time timestamptz) ON COMMIT DROP`); err != nil {
					return err
				}
				if err := copyBatch(ctx, tx, "playback_stage", batch); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, merge, time.Now())
				return err
			})
		}, func() {}
	}},
	// The same with a temporary table kept by the connection (created once, emptied at every
	// commit by ON COMMIT DELETE ROWS): no catalog work per batch. A production version would
	// create it in the pool's AfterConnect; here one connection is held for the benchmark.
	{"CopyTempKept", func(b *testing.B, pool *pgxpool.Pool) (upsertFunc, func()) {
		ctx := context.Background()
		conn, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `CREATE TEMP TABLE playback_stage_kept
			(member_id bigint, media_id bigint, position_ms int, event_time timestamptz) ON COMMIT DELETE ROWS`); err != nil {
			conn.Release()
			b.Fatal(err)
		}
		merge := fmt.Sprintf(benchMergeSQL, "playback_stage_kept")
		return func(ctx context.Context, batch benchBatch) error {
			return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
				if err := copyBatch(ctx, tx, "playback_stage_kept", batch); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, merge, time.Now())
				return err
			})
		}, conn.Release
	}},
}

func copyBatch(ctx context.Context, tx pgx.Tx, table string, batch benchBatch) error {
	n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, benchStageColumns, pgx.CopyFromSlice(len(batch), func(i int) ([]any, error) {
		e := batch[i]
		return []any{e.Key.Member, e.Key.Media, e.Value.PositionMS, e.Value.EventTime}, nil
	}))
	if err == nil && n != int64(len(batch)) {
		err = fmt.Errorf("copied %d rows of %d", n, len(batch))
	}
	return err
}

// benchMedia is how many media items the keys spread over; rows/benchMedia members each
// watch all of them.
const benchMedia = 100

// BenchmarkUpsert writes batches of distinct keys into playback with each technique, at a
// small node's batch (100), the production batch size (1 000) and the buffer's capacity
// (10 000). Every timed iteration carries newer event times than the one before, so every row
// takes the ON CONFLICT … DO UPDATE path and is really rewritten; a first pass outside the
// timer inserts the rows. Each run gets a fresh database. Besides rows/s it reports the
// database server's CPU per 1 000 rows (dbcpu-ms/krow: postmaster and all its processes, so
// the server must run on this machine).
func BenchmarkUpsert(b *testing.B) {
	for _, rows := range []int{100, 1_000, 10_000} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			for _, m := range benchMethods {
				b.Run("method="+m.name, func(b *testing.B) { benchUpsert(b, rows, 1, m) })
			}
		})
	}
}

// BenchmarkFlushConcurrent runs 1, 2 and 4 production flushers (Store.Flush, as many API nodes
// would) side by side, each on keys of its own members, with batches of 1 000 rows: where the
// total rows/s stops growing, the database is saturated. b.N counts the batches of each
// flusher.
func BenchmarkFlushConcurrent(b *testing.B) {
	i := slices.IndexFunc(benchMethods, func(m benchMethod) bool { return m.name == "Unnest" })
	for _, flushers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("flushers=%d", flushers), func(b *testing.B) { benchUpsert(b, 1_000, flushers, benchMethods[i]) })
	}
}

func benchUpsert(b *testing.B, rows, flushers int, m benchMethod) {
	ctx := context.Background()
	pool, _ := pgtest.Pool(b)
	keys := benchKeys(b, pool, rows*flushers)
	write, release := m.prepare(b, pool)
	defer release()

	base := time.Now().UTC().Truncate(time.Microsecond)
	// The insert pass: the rows exist before the timed updates, and the connections have
	// prepared their statements.
	writeAll(b, write, keys, rows, base, 0)
	checkWritten(b, pool, len(keys), base)

	cpuBefore, err := pgtest.ServerCPU(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 1; i <= b.N; i++ {
		writeAll(b, write, keys, rows, base, i)
	}
	b.StopTimer()
	cpuAfter, err := pgtest.ServerCPU(ctx, pool)
	if err != nil {
		b.Fatal(err)
	}
	written := float64(len(keys) * b.N)
	b.ReportMetric(written/b.Elapsed().Seconds(), "rows/s")
	b.ReportMetric(float64((cpuAfter-cpuBefore).Milliseconds())/(written/1000), "dbcpu-ms/krow")
	b.ReportMetric(hotShare(b, pool, int64(len(keys)*b.N)), "hot-upd/upd")
	checkWritten(b, pool, len(keys), base.Add(time.Duration(b.N)*time.Second))
}

// writeAll writes iteration iter of keys in batches of rows, one goroutine per batch, and
// waits for all of them; the batches are built before the first is written.
func writeAll(b *testing.B, write upsertFunc, keys []playback.Key, rows int, base time.Time, iter int) {
	b.StopTimer()
	at := base.Add(time.Duration(iter) * time.Second)
	var batches []benchBatch
	for start := 0; start < len(keys); start += rows {
		batch := make(benchBatch, rows)
		for i, k := range keys[start : start+rows] {
			batch[i] = buffer.Entry[playback.Key, playback.Position]{Key: k, Value: playback.Position{
				PositionMS: int32(iter*1000 + i%1000), EventTime: at}}
		}
		batches = append(batches, batch)
	}
	if iter > 0 {
		b.StartTimer()
	}
	errs := make(chan error, len(batches))
	for _, batch := range batches {
		go func() { errs <- write(context.Background(), batch) }()
	}
	for range batches {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}

// benchKeys creates the media and members for rows keys and returns the keys, sorted as the
// buffer sorts a batch.
func benchKeys(b *testing.B, pool *pgxpool.Pool, rows int) []playback.Key {
	ctx := context.Background()
	store := media.NewStore(pool)
	var medias []int64
	for i := range benchMedia {
		m, err := store.Create(ctx, media.Media{OwnerID: 1, Title: fmt.Sprintf("bench %d", i),
			Status: media.StatusReady, Visibility: media.VisibilityPublic, DurationMS: 3_600_000})
		if err != nil {
			b.Fatal(err)
		}
		medias = append(medias, m.ID)
	}
	members := rows / benchMedia
	if _, err := pool.Exec(ctx, `INSERT INTO members (id) SELECT g FROM generate_series(1000, $1::bigint) AS g`,
		1000+members-1); err != nil {
		b.Fatal(err)
	}
	keys := make([]playback.Key, 0, rows)
	for mb := range members {
		for _, md := range medias { // ids ascend: the keys come out sorted
			keys = append(keys, playback.Key{Member: int64(1000 + mb), Media: md})
		}
	}
	return keys
}

// checkWritten fails unless all rows exist and carry the event time at.
func checkWritten(b *testing.B, pool *pgxpool.Pool, rows int, at time.Time) {
	var total, current int
	err := pool.QueryRow(context.Background(),
		`SELECT count(*), count(*) FILTER (WHERE event_time = $1) FROM playback`, at).Scan(&total, &current)
	if err != nil {
		b.Fatal(err)
	}
	if total != rows || current != rows {
		b.Fatalf("playback has %d rows, %d of them at %s; want %d", total, current, at, rows)
	}
}

// hotShare is n_tup_hot_upd / n_tup_upd of playback, once the statistics count at least
// updates (backends report them within a second or so of going idle; it waits at most 10 s
// and fails beyond).
func hotShare(b *testing.B, pool *pgxpool.Pool, updates int64) float64 {
	b.Helper()
	ctx := context.Background()
	for giveUp := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		var upd, hot int64
		if err := pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'playback'`).Scan(&upd, &hot); err != nil {
			b.Fatal(err)
		}
		if upd >= updates {
			return float64(hot) / float64(upd)
		}
		if time.Now().After(giveUp) {
			b.Fatalf("pg_stat_user_tables counts %d playback updates of the %d made", upd, updates)
		}
	}
}

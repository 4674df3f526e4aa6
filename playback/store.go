package playback

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/erasure"
	"github.com/playhead/playhead/media"
)

// Store reads and writes playback rows.
type Store struct {
	pool *pgxpool.Pool
	// lists is the pool List reads on: pool unless ListOn gave another.
	lists      *pgxpool.Pool
	completion media.Completion
	// watchedRanges is whether the flush records the parts of videos members played, and
	// watchedWithin how far apart two reports may be and still mark the range between them.
	watchedRanges bool
	watchedWithin time.Duration
	// forgetWait bounds Forget's wait for the writers in flight: ForgetWait.
	forgetWait time.Duration
}

// ReportInterval is how often a player reports its position (the players' contract: every
// 5 s while playing).
const ReportInterval = 5 * time.Second

// NewStore returns a Store on pool that marks media watched by completion and records the
// parts of videos members played (WithoutWatchedRanges turns that off), for a flush every
// 5 s (WatchedWithin changes that).
func NewStore(pool *pgxpool.Pool, completion media.Completion) *Store {
	return &Store{pool: pool, lists: pool, completion: completion, watchedRanges: true, watchedWithin: WatchedWindow(5 * time.Second),
		forgetWait: ForgetWait}
}

// WatchedWindow is how far apart two consecutive reports can be stored when the buffer
// flushes every flushInterval: it keeps only the last of the reports one flush gathers, so
// twice the report interval plus the flush interval.
func WatchedWindow(flushInterval time.Duration) time.Duration {
	return 2*ReportInterval + flushInterval
}

// WatchedWithin makes two reports at most d apart consecutive for the watched ranges
// (WatchedWindow of the flush interval) and returns s. A longer gap (a flush that waited,
// an outage) marks only where the later report landed.
func (s *Store) WatchedWithin(d time.Duration) *Store {
	s.watchedWithin = d
	return s
}

// WithoutWatchedRanges makes s keep no watched ranges (PLAYHEAD_WATCHED_RANGES=off): positions
// are written without them, and the rows' ranges stay as they were. It returns s.
func (s *Store) WithoutWatchedRanges() *Store {
	s.watchedRanges = false
	return s
}

// firstWatchedSQL is a new row's watched ranges: the bucket its first report landed in. (Each
// upsert's reported CTE computes that bucket, watched_bucket: 1 % of the video each, NULL when
// ranges are off ($8) or the duration is unknown.)
const firstWatchedSQL = `CASE WHEN t.watched_bucket IS NOT NULL THEN playhead_watch_range(t.watched_bucket, t.watched_bucket) END`

// ListOn makes List read on pool (the server's read pool, see dbpool.OpenGenericPlans) and
// returns s.
func (s *Store) ListOn(pool *pgxpool.Pool) *Store {
	s.lists = pool
	return s
}

// keepLastFinishedSQL ends the flush statements: for each row the statement wrote (RETURNING
// gives only the rows the upsert's WHERE let through, so a stale report changes nothing here
// unless it brought an earlier watched mark) whose report is finished, it records the report
// (its own event_time) as its member's last finished item of
// every collection placing the media, unless a newer one is recorded. The list reads this
// table, one row per collection the member finished something in, instead of every finished
// row; it checks there which collection the media follows now (opened from, or used last) and
// that the row is still finished. DISTINCT ON keeps one row per key (ON CONFLICT may touch a
// row once per statement) and its ORDER BY the key order, so locks are taken in one order.
// DO UPDATE uses only excluded.* and the row it updates, as the playback upsert does.
const keepLastFinishedSQL = `
INSERT INTO playback_last_finished AS l (member_id, collection, media_id, event_time)
SELECT DISTINCT ON (w.member_id, r.collection) w.member_id, r.collection, w.media_id, t.event_time
FROM written w
JOIN reported t ON t.member_id = w.member_id AND t.media_id = w.media_id
JOIN import_rows r ON r.media_id = w.media_id
WHERE t.finished
ORDER BY w.member_id, r.collection, t.event_time DESC, w.media_id DESC
ON CONFLICT (member_id, collection) DO UPDATE
SET media_id   = excluded.media_id,
    event_time = excluded.event_time
WHERE l.event_time < excluded.event_time
   OR (l.event_time = excluded.event_time AND l.media_id < excluded.media_id)`

// flushSQL writes a whole batch in one round trip. The batch is coalesced (a key twice in one
// INSERT … ON CONFLICT is a cardinality error) and sorted (row locks in one order on every
// node). The event_time guard makes a late flush of an older position, from this node or
// another, change no position. A newer position un-hides a hidden row: the member is watching
// again. A position at or past the completion point ($6 ratio, $7 tail) sets watched_at; a
// later position before it (a rewatch) keeps the mark. A late report that is finished still
// brings its earlier watched_at (and nothing else): a member who finished on one node and
// started over on another is watched whichever node flushes first (least() skips NULLs). finished follows every position: the list
// reads rows in progress and finished rows apart by it (playback_continue_idx), and the same
// statement keeps playback_last_finished (keepLastFinishedSQL). The media row is read in the SELECT (media is
// a reference table under Citus), and DO UPDATE uses only excluded.* and the row it updates,
// so the statement stays valid when playback is sharded. The ORDER BY keeps the batch's key
// order through the join: rows are inserted, and so locked, in that order. A report is
// skipped when its media is DELETED or keptSQL refuses it (the member erased, their history
// paused, the item forgotten after it was made). That test is a column of reported, kept,
// filtered in written, not a WHERE of reported: under a generic plan the batch's unnest is
// estimated at 10 rows, each anti-join in reported's WHERE halved that to 1, and the planner
// then joined written with reported (keepLastFinishedSQL) by a nested loop over both CTEs,
// 10 000 × 10 000 comparisons for a batch of 10 000 (3.3 s instead of 0.1 s, measured).
var flushSQL = `
WITH reported AS (
	SELECT u.*, coalesce(` + finishedSQL("u.position_ms", "m") + `, false) AS finished,
	       CASE WHEN $8 AND m.duration_ms > 0 THEN least(99, u.position_ms::bigint * 100 / m.duration_ms)::smallint END AS watched_bucket,
	       m.duration_ms,
	       m.status IS DISTINCT FROM 'DELETED' AND ` + keptSQL("u.member_id", "u.media_id", "u.event_time") + ` AS kept
	FROM unnest($1::bigint[], $2::bigint[], $3::int[], $4::timestamptz[]) AS u(member_id, media_id, position_ms, event_time)
	LEFT JOIN media m ON m.id = u.media_id
),
written AS (
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished, finished_at, watched, watched_bucket)
SELECT t.member_id, t.media_id, t.position_ms, t.event_time, $5,
       CASE WHEN t.finished THEN t.event_time END, t.finished, CASE WHEN t.finished THEN t.event_time END, ` + firstWatchedSQL + `, t.watched_bucket
FROM reported t
WHERE t.kept
ORDER BY t.member_id, t.media_id
` + upsertConflictSQL + `
),` + completedSQL + keepLastFinishedSQL

// finishedSQL is whether position in the media row m is finished by playhead_progress
// (migration 00031) at the store's completion point ($6, $7): the resume minimums (0 here)
// decide nothing about a finish.
func finishedSQL(position, m string) string {
	return `playhead_progress(` + position + `, ` + m + `.duration_ms, ` + m + `.credits_start_ms, $6, $7, 0, 0, 0) = 2`
}

// upsertConflictSQL is the conflict clause of both upserts: a newer report replaces the
// position, a report (newer or not) with an earlier watched mark brings the mark, unless the
// member marked the media by hand (marked_at) after the report was made: the WHERE lets such
// a report through only for its earlier mark, and a newer report is always after marked_at
// (a mark sets event_time too). A newer
// report marks what was played since the row's last one in its watched ranges
// (playhead_watched, migration 00018): the range between them when they are consecutive, else
// the bucket it landed in.
//
// One finish arrives as a report that is not newer: a member who finishes on one node and
// starts over on another, whose rewatch is flushed first. The late finished report brings the
// row's first watched mark, and when the row had none (a finish always sets one; only a mark
// unwatched, which a later report must follow, clears it) no statement recorded that finish:
// the clause sets finished_at to the report's event time, on a row that stays not finished,
// so that completedSQL records it. (That finished_at is cleared by the next newer report, and
// replaced by the next finish.) A row that had a watched mark was finished at that later time,
// and that finish was recorded. The clause reads the row as it is (the newest version, under
// its lock), so two nodes' concurrent flushes see each other.
const upsertConflictSQL = `ON CONFLICT (member_id, media_id) DO UPDATE
SET position_ms = CASE WHEN p.event_time < excluded.event_time THEN excluded.position_ms ELSE p.position_ms END,
    event_time  = greatest(p.event_time, excluded.event_time),
    updated_at  = excluded.updated_at,
    watched_at  = least(p.watched_at, excluded.watched_at),
    finished    = CASE WHEN p.event_time < excluded.event_time THEN excluded.finished ELSE p.finished END,
    finished_at = CASE WHEN p.event_time >= excluded.event_time
                       THEN CASE WHEN p.watched_at IS NULL AND NOT p.finished THEN excluded.finished_at ELSE p.finished_at END
                       WHEN NOT excluded.finished THEN NULL
                       WHEN p.finished THEN p.finished_at
                       ELSE excluded.finished_at END,
    hidden      = p.hidden AND p.event_time >= excluded.event_time,
    watched     = CASE WHEN p.event_time < excluded.event_time
                       THEN playhead_watched(p.watched, p.watched_bucket, p.position_ms, p.event_time,
                                             excluded.watched_bucket, excluded.position_ms, excluded.event_time, $9::interval)
                       ELSE p.watched END,
    watched_bucket = CASE WHEN p.event_time < excluded.event_time THEN excluded.watched_bucket ELSE p.watched_bucket END
WHERE p.event_time < excluded.event_time
   OR excluded.watched_at < coalesce(p.watched_at, 'infinity') AND excluded.event_time > coalesce(p.marked_at, '-infinity')
RETURNING p.member_id, p.media_id, p.finished_at`

// completedSQL is the CTE of both upserts that records the finishes they made in
// playback_completions: a row they wrote whose finished_at is its report's own event time
// went from not finished to finished with that report (the conflict clause keeps finished_at
// while a row stays finished and clears it when it is not; a report that is not newer
// changes it only for a late finish, below). So a flush retried after a commit whose answer
// was lost, a spill file replayed, or another node's flush of an older or newer report of a
// row already finished records nothing: only a finish writes here, once. How says whether the
// position passed the completion point or only reached the credits. The first two conditions
// leave the rows in progress, most of a batch, out of the join.
const completedSQL = `
completed AS (
INSERT INTO playback_completions (member_id, media_id, finished_at, position_ms, duration_ms, how)
SELECT w.member_id, w.media_id, w.finished_at, t.position_ms, t.duration_ms,
       CASE WHEN t.position_ms >= playhead_completion_point(t.duration_ms, $6, $7) THEN 'position' ELSE 'credits' END
FROM written w
JOIN reported t ON t.member_id = w.member_id AND t.media_id = w.media_id
WHERE w.finished_at IS NOT NULL AND t.finished AND w.finished_at = t.event_time
ORDER BY w.member_id, w.media_id
ON CONFLICT (member_id, media_id, finished_at) DO NOTHING
)`

// Flush writes a coalesced, sorted batch with one statement. It is the playback buffer's
// flush function.
func (s *Store) Flush(ctx context.Context, batch []buffer.Entry[Key, Position]) error {
	members := make([]int64, len(batch))
	medias := make([]int64, len(batch))
	positions := make([]int32, len(batch))
	times := make([]time.Time, len(batch))
	for i, e := range batch {
		members[i], medias[i] = e.Key.Member, e.Key.Media
		positions[i], times[i] = e.Value.PositionMS, e.Value.EventTime
	}
	if err := s.writeMarked(ctx, medias, flushSQL, members, medias, positions, times); err != nil {
		return flushError(len(batch), err)
	}
	return nil
}

// keptSQL is the condition a report of member (a column or parameter) for media, made at
// eventTime, must meet to be stored: the member is not erased (the erasure fence, package
// erasure), their history is not paused (history_paused: a report accepted just before the
// pause and flushed after it is dropped too), and the item was not forgotten at or after the
// report was made (playback_forgotten: a buffered report older than the forget cannot bring
// the row back; a newer one, the member watching again, can). Each is an index probe on a
// primary key.
func keptSQL(member, media, eventTime string) string {
	return erasure.AntiJoin(member) + `
	  AND NOT EXISTS (SELECT 1 FROM history_paused h WHERE h.member_id = ` + member + `)
	  AND NOT EXISTS (SELECT 1 FROM playback_forgotten f WHERE f.member_id = ` + member + ` AND f.media_id = ` + media + `
	                  AND ` + eventTime + ` <= f.forgotten_at)`
}

// writeMarked runs an upsert (flushSQL or upsertOneSQL) with its positions' args ($1–$4) and
// the store's ($5–$9), and marks medias for the audience rollups, in one round trip and one
// implicit transaction: the positions and the marks of their media (audience_dirty,
// migration 00019) commit together. The erasure fence comes first, as a statement of its own:
// the upsert's snapshot is taken after it, so it sees every erasure that held the lock.
func (s *Store) writeMarked(ctx context.Context, medias []int64, upsert string, args ...any) error {
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(upsert, append(args, time.Now(), s.completion.Ratio, s.completion.TailMS(), s.watchedRanges, s.watchedWithin)...)
	b.Queue(markAudienceSQL, medias)
	return s.pool.SendBatch(ctx, &b).Close()
}

// markAudienceSQL marks the media of a batch as having new positions for the audience
// rollups. A media already marked is not written again, but its mark is locked until the
// flush commits (DO UPDATE … WHERE false locks the row it does not update): a rollup skips a
// locked mark (SKIP LOCKED), so it never takes a mark whose flush it cannot see yet. With DO
// NOTHING a rollup could delete the mark between the flush's statements and its commit and
// read a snapshot without them: that media's last positions were never rolled up. Marks are
// locked in media order, so concurrent flushes cannot deadlock on them.
const markAudienceSQL = `INSERT INTO audience_dirty (media_id) SELECT DISTINCT unnest($1::bigint[]) ORDER BY 1
ON CONFLICT (media_id) DO UPDATE SET media_id = excluded.media_id WHERE false`

// flushError tells the buffer whether a failed flush was the batch's fault: a database error
// whose SQLSTATE says the data was refused (apperr's one classification: class 22, data
// exception; class 23, integrity constraint, such as a media row deleted while its position
// was buffered; 54000) is, and the buffer splits the batch to find the rows at fault. Every
// other error (connection refused or reset, timeout, shutdown, out of connections) is not, and
// the buffer keeps the batch and retries it.
func flushError(rows int, err error) error {
	err = fmt.Errorf("flush %d playback rows: %w", rows, err)
	if apperr.FromDatabase(err) {
		return buffer.Rejected(err)
	}
	return err
}

// upsertOneSQL is the one-row form of flushSQL: the synchronous baseline writes with it, one
// statement per request, as the seed did before write-behind.
var upsertOneSQL = `
WITH reported AS (
	SELECT $1::bigint AS member_id, m.id AS media_id, $3::int AS position_ms, $4::timestamptz AS event_time,
	       coalesce(` + finishedSQL("$3::int", "m") + `, false) AS finished,
	       CASE WHEN $8::boolean AND m.duration_ms > 0 THEN least(99, $3::bigint * 100 / m.duration_ms)::smallint END AS watched_bucket,
	       m.duration_ms
	FROM media m WHERE m.id = $2::bigint AND m.status <> 'DELETED' AND ` + keptSQL("$1::bigint", "$2::bigint", "$4::timestamptz") + `
),
written AS (
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished, finished_at, watched, watched_bucket)
SELECT t.member_id, t.media_id, t.position_ms, t.event_time, $5::timestamptz,
       CASE WHEN t.finished THEN t.event_time END, t.finished, CASE WHEN t.finished THEN t.event_time END, ` + firstWatchedSQL + `, t.watched_bucket
FROM reported t
` + upsertConflictSQL + `
),` + completedSQL + keepLastFinishedSQL

// UpsertOne writes one position on the request path (the synchronous baseline).
func (s *Store) UpsertOne(ctx context.Context, key Key, pos Position) error {
	if err := s.writeMarked(ctx, []int64{key.Media}, upsertOneSQL, key.Member, key.Media, pos.PositionMS, pos.EventTime); err != nil {
		return fmt.Errorf("write playback row: %w", err)
	}
	return nil
}

// Stored is a playback row as read back.
type Stored struct {
	Position
	Hidden bool
	// WatchedAt is when the member first reached the completion point; nil if never.
	WatchedAt *time.Time
}

// getSQL reads one row by its key.
const getSQL = `SELECT position_ms, event_time, hidden, watched_at FROM playback WHERE member_id = $1 AND media_id = $2`

// Get returns the stored row for key, and false when there is none.
func (s *Store) Get(ctx context.Context, key Key) (Stored, bool, error) {
	var st Stored
	err := s.pool.QueryRow(ctx, getSQL, key.Member, key.Media).Scan(&st.PositionMS, &st.EventTime, &st.Hidden, &st.WatchedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, false, nil
	}
	if err != nil {
		return Stored{}, false, fmt.Errorf("read playback row: %w", err)
	}
	return st, true, nil
}

// openSQL creates a row at position 0 unless it exists, records the collection, and reads the row.
const openSQL = `
WITH ins AS (
	INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, collection, watched_bucket)
	VALUES ($1, $2, 0, $3, $3, nullif($4, ''), 0)
	ON CONFLICT (member_id, media_id) DO UPDATE SET collection = excluded.collection
	WHERE excluded.collection IS NOT NULL AND p.collection IS DISTINCT FROM excluded.collection
	RETURNING position_ms, event_time, hidden, watched_at)
SELECT position_ms, event_time, hidden, watched_at FROM ins
UNION ALL
SELECT position_ms, event_time, hidden, watched_at FROM playback WHERE member_id = $1 AND media_id = $2
LIMIT 1`

// Open creates the row for key at position 0 if it does not exist, and returns the stored
// row, in one round trip (the erasure fence, refuseWriteSQL and openSQL in one batch). (Both halves of the
// UNION read the same snapshot, so a row inserted here comes back through RETURNING; its
// watched_bucket 0 makes a first report that follows playback from the start mark what was
// played since the open.) A
// non-empty collection records where the media was opened from; it touches neither the
// position nor event_time, so it cannot reorder the continue-watching list or beat the guard.
//
// While the member's history is paused, nothing is stored and the answer is position 0 at at
// (the row's own when one exists from before the pause).
func (s *Store) Open(ctx context.Context, key Key, at time.Time, collection string) (Stored, error) {
	var st Stored
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(refuseWriteSQL, key.Member, key.Media, false)
	b.Queue(openSQL, key.Member, key.Media, at, collection).QueryRow(func(row pgx.Row) error {
		return row.Scan(&st.PositionMS, &st.EventTime, &st.Hidden, &st.WatchedAt)
	})
	erased, paused, err := refusal(s.pool.SendBatch(ctx, &b).Close())
	switch {
	case err != nil:
		return Stored{}, fmt.Errorf("open playback row: %w", err)
	case erased:
		return Stored{}, errErased
	case paused:
		stored, found, err := s.Get(ctx, key)
		if err != nil || found {
			return stored, err
		}
		return Stored{Position: Position{EventTime: at}}, nil
	}
	return st, nil
}

// refuseWriteSQL raises (refusal) when the open or the hide must not write: the member erased,
// or their history paused ($3 false: even a row that exists stays as it is; true: a row that
// exists may be changed). It follows the fence and precedes the write in one batch.
const refuseWriteSQL = `SELECT playhead_refuse_write($1, $2, $3)`

// refusal sorts out an error of a batch that ran refuseWriteSQL: erased (the token must be
// refused) or paused (nothing to write), else the error itself.
func refusal(err error) (erased, paused bool, _ error) {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch pg.Code {
		case "PHERA":
			return true, false, nil
		case "PHPAU":
			return false, true, nil
		}
	}
	return false, false, err
}

// errErased is the answer to a write of an erased member that reached the database before
// this node learnt of the erasure (its auth middleware refuses their tokens after).
var errErased = apperr.Errorf(apperr.Unauthenticated, "this member is erased; sign in as another member")

// InCollection reports whether media is one of collection's items now.
func (s *Store) InCollection(ctx context.Context, collection string, mediaID int64) (bool, error) {
	var in bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM collection_items WHERE collection = $1 AND media_id = $2)`,
		collection, mediaID).Scan(&in)
	if err != nil {
		return false, fmt.Errorf("check collection: %w", err)
	}
	return in, nil
}

// hideSQL hides a row, or writes it hidden when it does not exist, unless a newer report is stored.
const hideSQL = `
INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, hidden)
VALUES ($1, $2, $3, $4, $4, true)
ON CONFLICT (member_id, media_id) DO UPDATE
SET hidden = true, event_time = excluded.event_time, updated_at = excluded.updated_at
WHERE p.event_time < excluded.event_time`

// Hide removes key from the continue-watching list. It bumps event_time to at, so a position
// reported before the hide and flushed after it cannot bring the row back. pos is written
// when the row does not exist yet (its report may still be in a buffer), unless the member's
// history is paused: then only a row from before the pause is hidden.
func (s *Store) Hide(ctx context.Context, key Key, pos Position, at time.Time) error {
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(refuseWriteSQL, key.Member, key.Media, true)
	b.Queue(hideSQL, key.Member, key.Media, pos.PositionMS, at)
	erased, _, err := refusal(s.pool.SendBatch(ctx, &b).Close())
	if erased {
		return errErased
	}
	if err != nil {
		return fmt.Errorf("hide playback row: %w", err)
	}
	return nil
}

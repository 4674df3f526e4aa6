// Package audience is what the positions say, for a media's owner and the admins: per media,
// views, viewers, watch time, completion and the retention curve (the share of viewers who
// watched each 1 % of the video); per collection, for each lesson in order, the viewers who
// started and finished it and the drop to the next. It reads the watched ranges the playback
// flush keeps with each row (migration 00018) and rolls them up in a periodic job of the
// queue core (KindRollup), one media at a time and only media with new positions (marked by
// the flush in audience_dirty); a request reads the precomputed rows.
package audience

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// KindRollup is the periodic job kind that rolls the audience up.
const KindRollup = "audience"

// Buckets is how many parts of a video the watched ranges and the retention curve have.
const Buckets = 100

// rollupBatch is how many media one step of a rollup takes.
const rollupBatch = 200

// takeSQL takes up to $1 marks, in a transaction of its own that lasts as long as the DELETE:
// a flush marking one of them waits for it (its insert meets the mark being deleted), so the
// wait is short, and the reading that follows holds no mark. A mark a flush in progress holds
// (markAudienceSQL locks it until the flush commits) is skipped: its media waits for the next
// run, so no rollup reads a snapshot without a flush whose mark it took.
const takeSQL = `
DELETE FROM audience_dirty
WHERE media_id IN (SELECT media_id FROM audience_dirty ORDER BY media_id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING media_id`

// rollupSQL rewrites the media_audience rows of the media $1 from their playback rows, in one
// statement, and counts the rows written. Viewers are the members who played a part (a
// watched bucket) or finished it; views every member with a row (an open included). A media
// deleted since it was marked is skipped.
const rollupSQL = `
WITH taken AS (
    SELECT DISTINCT unnest($1::bigint[]) AS media_id
),
seen AS (
    SELECT p.media_id, p.watched, p.watched_at,
           (p.watched_at IS NOT NULL OR coalesce(bit_count(p.watched), 0) > 0) AS viewer
    FROM playback p WHERE p.media_id = ANY($1::bigint[])
),
curves AS (
    SELECT media_id, array_agg(n ORDER BY i) AS retention
    FROM (
        SELECT s.media_id, i, count(*) FILTER (WHERE get_bit(s.watched, i) = 1) AS n
        FROM seen s CROSS JOIN generate_series(0, 99) AS i
        WHERE s.watched IS NOT NULL
        GROUP BY s.media_id, i
    ) b
    GROUP BY media_id
),
totals AS (
    SELECT t.media_id, count(s.media_id) AS views, count(*) FILTER (WHERE s.viewer) AS viewers,
           count(*) FILTER (WHERE s.watched_at IS NOT NULL) AS finished, coalesce(sum(bit_count(s.watched)), 0) AS watched_buckets
    FROM taken t LEFT JOIN seen s ON s.media_id = t.media_id
    GROUP BY t.media_id
)
INSERT INTO media_audience AS a (media_id, views, viewers, finished, watched_buckets, retention, computed_at)
SELECT o.media_id, o.views, o.viewers, o.finished, o.watched_buckets,
       coalesce(c.retention, array_fill(0::bigint, ARRAY[100])), statement_timestamp()
FROM totals o
JOIN media m ON m.id = o.media_id
LEFT JOIN curves c ON c.media_id = o.media_id
ORDER BY o.media_id
ON CONFLICT (media_id) DO UPDATE
SET views = excluded.views, viewers = excluded.viewers, finished = excluded.finished,
    watched_buckets = excluded.watched_buckets, retention = excluded.retention, computed_at = excluded.computed_at`

// remarkSQL puts back the marks of media a failed rollup step had taken.
const remarkSQL = `INSERT INTO audience_dirty (media_id) SELECT DISTINCT unnest($1::bigint[]) ORDER BY 1 ON CONFLICT DO NOTHING`

// maxRollupBatches bounds one run: 400 000 media. The next period goes on with the rest.
const maxRollupBatches = 2000

// Rollup rolls up every media marked as having new positions and reports how many it
// rewrote. Each step takes a batch of marks (a short transaction), then rewrites their rows
// (one statement); a step whose rewrite fails puts its marks back (if that fails too, those
// media wait for their next position). Running it twice is harmless: a row is always
// recomputed from the playback rows as they are. It reads every row of each media it takes,
// about 16–20 µs per row measured (issue 35's review): a media with a million viewers costs
// some 20 s of one database core per run that finds it marked.
func Rollup(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var total int64
	for range maxRollupBatches {
		rows, err := pool.Query(ctx, takeSQL, rollupBatch)
		if err != nil {
			return total, fmt.Errorf("audience rollup: take marks: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return total, fmt.Errorf("audience rollup: take marks: %w", err)
		}
		if len(ids) == 0 {
			break
		}
		tag, err := pool.Exec(ctx, rollupSQL, ids)
		if err != nil {
			// Not ctx alone: a cancelled run must still give its marks back.
			putBack, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			_, rerr := pool.Exec(putBack, remarkSQL, ids)
			cancel()
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("put %d marks back: %w", len(ids), rerr))
			}
			return total, fmt.Errorf("audience rollup: %w", err)
		}
		total += tag.RowsAffected()
		if len(ids) < rollupBatch {
			break
		}
	}
	return total, nil
}

// Kind is the rollup's job kind, run at every run time of schedule on one worker of the
// cluster. pool is nil on a node that runs no jobs (the kind's hooks alone).
func Kind(schedule jobqueue.Schedule, pool *pgxpool.Pool) jobqueue.Kind {
	k := jobqueue.Kind{Name: KindRollup, Periodic: &jobqueue.Periodic{Schedule: schedule, MaxAttempts: 3}}
	if pool != nil {
		k.Run = func(ctx context.Context, _ jobqueue.Job) (jobqueue.Result, error) {
			_, err := Rollup(ctx, pool)
			return jobqueue.Result{}, err
		}
	}
	return k
}

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
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// KindRollup is the periodic job kind that rolls the audience up.
const KindRollup = "audience"

// Buckets is how many parts of a video the watched ranges and the retention curve have.
const Buckets = 100

// rollupBatch is how many media one transaction of a rollup takes: a flush marking one of
// them waits for that transaction (its insert meets the mark being deleted), so it is kept
// short; the flush is behind the request, so a PUT never waits.
const rollupBatch = 200

// rollupSQL takes up to $1 marked media and rewrites their media_audience rows from their
// playback rows, in one statement, and counts the marks taken and the rows written. Viewers are the members who played a part (a watched
// bucket) or finished it; views every member with a row (an open included). A media deleted
// since it was marked is skipped (its marks go too).
const rollupSQL = `
WITH taken AS (
    DELETE FROM audience_dirty
    WHERE media_id IN (SELECT media_id FROM audience_dirty ORDER BY media_id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING media_id
),
seen AS (
    SELECT p.media_id, p.watched, p.watched_at,
           (p.watched_at IS NOT NULL OR coalesce(bit_count(p.watched), 0) > 0) AS viewer
    FROM playback p JOIN taken t ON t.media_id = p.media_id
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
),
written AS (
INSERT INTO media_audience AS a (media_id, views, viewers, finished, watched_buckets, retention, computed_at)
SELECT o.media_id, o.views, o.viewers, o.finished, o.watched_buckets,
       coalesce(c.retention, array_fill(0::bigint, ARRAY[100])), statement_timestamp()
FROM totals o
JOIN media m ON m.id = o.media_id
LEFT JOIN curves c ON c.media_id = o.media_id
ORDER BY o.media_id
ON CONFLICT (media_id) DO UPDATE
SET views = excluded.views, viewers = excluded.viewers, finished = excluded.finished,
    watched_buckets = excluded.watched_buckets, retention = excluded.retention, computed_at = excluded.computed_at
RETURNING 1
)
SELECT (SELECT count(*) FROM taken), (SELECT count(*) FROM written)`

// maxRollupBatches bounds one run: 400 000 media. The next period goes on with the rest.
const maxRollupBatches = 2000

// Rollup rolls up every media marked as having new positions and reports how many it
// rewrote. Each batch is one statement (one transaction), so a rollup stopped halfway keeps what it did, and
// the marks of a batch that failed stay for the next run. Running it twice is harmless: a row
// is always recomputed from the playback rows as they are.
func Rollup(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var total int64
	for range maxRollupBatches {
		var taken, written int64
		if err := pool.QueryRow(ctx, rollupSQL, rollupBatch).Scan(&taken, &written); err != nil {
			return total, fmt.Errorf("audience rollup: %w", err)
		}
		total += written
		if taken < rollupBatch {
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

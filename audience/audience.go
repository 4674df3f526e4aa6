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

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
)

// KindRollup is the periodic job kind that rolls the audience up.
const KindRollup = "audience"

// Buckets is how many parts of a video the watched ranges and the retention curve have.
const Buckets = 100

// rollupBatch is how many media one step of a rollup takes: a flush marking one of them
// waits for the step's transaction (its insert meets the mark being deleted), so a step is
// kept to the reading of a few media; the flush is behind the request, so a PUT never waits.
const rollupBatch = 20

// takeSQL takes up to $1 marks. A mark a flush in progress holds (markAudienceSQL locks it
// until the flush commits) is skipped, and so is one another rollup has taken and not yet
// committed: its media waits for the next step or run. The marks taken stay locked, by their
// deletion, until the step commits, so no flush of those media and no other rollup can come
// between this step's reading and its write; a step that fails rolls its marks back.
const takeSQL = `
DELETE FROM audience_dirty
WHERE media_id IN (SELECT media_id FROM audience_dirty ORDER BY media_id LIMIT $1 FOR UPDATE SKIP LOCKED)
RETURNING media_id`

// rollupSQL rewrites the media_audience rows of the media $1 from their playback rows. It
// reads playback by media ids alone (no coordinator table in the statement: Citus can run it
// across shards). Viewers are the members who played a part (a watched bucket) or finished
// it; views every member with a row (an open included). A media deleted since it was marked
// is skipped.
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

// maxRollupBatches bounds one run: 40 000 media. The next period goes on with the rest.
const maxRollupBatches = 2000

// Rollup rolls up every media marked as having new positions and reports how many it
// rewrote. Each step takes a batch of marks and rewrites their rows in one transaction
// (takeSQL, rollupSQL), so a step that fails or is cut off keeps its marks, and two rollups
// never write the same media out of order. Running it twice is harmless: a row is always
// recomputed from the playback rows as they are. It reads every row of each media it takes,
// about 16–20 µs per row measured (issue 35's review): a media with a million viewers costs
// some 20 s of one database core per run that finds it marked, and its flushes wait for that
// step.
func Rollup(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var total int64
	for range maxRollupBatches {
		var taken int
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			rows, err := tx.Query(ctx, takeSQL, rollupBatch)
			if err != nil {
				return err
			}
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if taken = len(ids); err != nil || taken == 0 {
				return err
			}
			tag, err := tx.Exec(ctx, rollupSQL, ids)
			total += tag.RowsAffected()
			return err
		})
		if err != nil {
			return total, fmt.Errorf("audience rollup: %w", err)
		}
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

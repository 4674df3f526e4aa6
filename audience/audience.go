// Package audience is what the positions say, for a media's owner and the admins: per media,
// views, viewers, watch time, completion and the retention curve (the share of viewers who
// watched each 1 % of the video); per collection, for each lesson in order, the viewers who
// started and finished it and the drop to the next. It reads the watched ranges the playback
// flush keeps with each row (migration 00018) and rolls them up in a periodic job of the
// queue core (KindRollup), one media at a time and only media with new positions (marked by
// the flush in audience_dirty); a request reads the precomputed rows.
//
// # What the figures tell about one viewer
//
// The owner may control many of the other viewers: accounts of his own, whose watching he
// knows. With 4 of them and one other member, exact counts are that member's watched ranges
// bucket for bucket, whatever the threshold of MinViewers says; dropping the buckets watched
// by fewer than MinViewers does not help (his accounts watch every bucket: each count is 4 or
// 5, and the 5s are the member's). So the figures are released this way:
//
//   - Views and viewers are exact. They tell that one more member opened or played the media,
//     and when (to the rollup period), never who.
//   - Finished and the 100 retention counts get Gaussian noise, drawn (from a generator
//     seeded by crypto/rand) when they are released and stored with them: σ = curveNoise (10)
//     on each count, finishedNoise (3) on finished; the watch time is the sum of the noisy
//     counts (σ = 100 buckets: the length of the video once). One viewer moves each count by at most 1 (any two things he may have
//     watched are at most √100 = 10 apart) and finished by at most 1, so a release is μ-GDP
//     (Gaussian differential privacy) with μ = √((10/10)² + (1/3)²) ≈ 1.05 for what one viewer
//     watched and whether he finished: telling any two such histories apart from a release is
//     no easier than telling N(0, 1) from N(1.05, 1), at most 70 % right for histories as far
//     apart as "all of it" and "none of it", about 52 % for one bucket. Views and viewers are
//     outside this: they are the counts.
//   - A new release happens only when the viewers have grown by max(MinViewers, an eighth)
//     since the last one (releaseGrowth). Reading again, a rollup forced by a new position,
//     the owner's accounts changing what they watched, or the other members watching more,
//     give no new figures: no fresh noise to average, no exact difference to take.
//   - The curve is shown only from MinCurveViewers (100) viewers at its release: below, its
//     noise is larger than what it measures, and the owner needs 99 accounts for a first one.
//   - computed_at moves only when a figure the owner reads changes, so it does not tell when
//     a member who already watched played again.
//
// The cost: at 100 viewers a point of the curve is off by 10 percentage points (one standard
// deviation; the mean of 10 neighbouring points by 3), the completion rate by 3 and the watch
// time by one length of the video (2 % of the total when viewers watch half of it); at 1000
// viewers by 1 point, 0.3 points and the same length (0.2 %). The figures beyond the counts
// lag: they leave out the newest viewers, up to max(MinViewers, an eighth), and what the
// others watched since the last release.
//
// Not protected: that a member played the media (the counts), and the sum over releases.
// Releases compose (μ √R after R of them) and an owner whose accounts are all the other
// viewers can add accounts for more of them, at a growing price: from a first curve at 100
// viewers, 9 releases (μ 3) take 250 accounts, where the likeliest range is still no better a
// guess of a member's buckets than a constant; 25 (μ 5) take 1 630, where it beats one by a
// tenth of the buckets. The releases below 100 viewers (16 by 97 accounts) tell whether he
// finished about 75 % right and his watch time to a quarter of the video. A large real
// audience hides one member's changes between releases among the others', but not formally.
package audience

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/quality"
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

// curveNoise and finishedNoise are the standard deviations of the noise a release adds to each
// retention count and to finished (the package doc: ≈ 1.05-GDP per release for one viewer).
// finished gets less, so that the completion rate stays within 3 points at 100 viewers; the
// curve's is what one viewer's 100 buckets need for a release to tell about them no more than
// one standard deviation.
const (
	curveNoise    = 10.0
	finishedNoise = 3.0
)

// releaseGrowth sets the step after which the viewers release new figures: released_viewers +
// max(MinViewers, released_viewers / releaseGrowth). Every new release is another noisy
// reading of the same members, so releases come only as the audience grows, and sparser as it
// grows (an owner's accounts pay for each), while a media with hundreds of viewers still sees
// its newest eighth within one step.
const releaseGrowth = 8

// noisePerMedia is how many noise values a media's release takes: one per retention bucket,
// then one for finished.
const noisePerMedia = Buckets + 1

// rollupSQL rewrites the media_audience rows of the media $1 from their playback rows. It
// reads playback by media ids alone (no coordinator table in the statement: Citus can run it
// across shards). Viewers are the members who played a part (a watched bucket) or finished
// it; views every member with a row (an open included). A media deleted since it was marked
// is skipped.
//
// Views and viewers are written every time. The other figures are released (fresh) when the
// viewers have reached released_viewers + max($3, released_viewers / $4) ($3 for the first
// release); otherwise the row keeps those of its last release. Whether to release depends on
// the viewers alone, which the owner reads anyway: a release at any other moment (when
// someone finished, say) would tell him that it happened. A release adds $2's noise to the
// true counts: for the i-th media of $1 (from 0), $2[101i + 1 … 101i + 100] to the buckets'
// counts and $2[101i + 101] to finished. Each count is rounded into 0 … viewers; the watched
// buckets are the sum of the noisy counts before that, rounded into 0 … 100 viewers, so the
// watch time is no more exact than the curve. computed_at moves only when something the owner
// reads changes, or a member playing again would show in it.
const rollupSQL = `
WITH taken AS (
    SELECT t.media_id, t.j::int AS j FROM unnest($1::bigint[]) WITH ORDINALITY AS t(media_id, j)
),
seen AS (
    SELECT p.media_id, p.watched, p.watched_at,
           (p.watched_at IS NOT NULL OR coalesce(bit_count(p.watched), 0) > 0) AS viewer
    FROM playback p WHERE p.media_id = ANY($1::bigint[])
),
counts AS (
    SELECT s.media_id, i, count(*) FILTER (WHERE get_bit(s.watched, i) = 1) AS n
    FROM seen s CROSS JOIN generate_series(0, 99) AS i
    WHERE s.watched IS NOT NULL
    GROUP BY s.media_id, i
),
totals AS (
    SELECT t.media_id, t.j, count(s.media_id) AS views, count(*) FILTER (WHERE s.viewer) AS viewers,
           count(*) FILTER (WHERE s.watched_at IS NOT NULL) AS finished
    FROM taken t LEFT JOIN seen s ON s.media_id = t.media_id
    GROUP BY t.media_id, t.j
),
noisy AS (
    SELECT o.media_id, o.views, o.viewers,
           o.finished + ($2::float8[])[o.j * 101] AS finished,
           sum(coalesce(c.n, 0) + ($2::float8[])[(o.j - 1) * 101 + b.i + 1]) AS watched_buckets,
           array_agg(greatest(0, least(o.viewers, round(coalesce(c.n, 0) + ($2::float8[])[(o.j - 1) * 101 + b.i + 1])))::bigint
                     ORDER BY b.i) AS retention
    FROM totals o CROSS JOIN generate_series(0, 99) AS b(i)
    LEFT JOIN counts c ON c.media_id = o.media_id AND c.i = b.i
    GROUP BY o.media_id, o.views, o.viewers, o.finished, o.j
),
decided AS (
    SELECT n.*, a.media_id IS NULL AS first,
           n.viewers >= coalesce(a.released_viewers, 0) + greatest($3, coalesce(a.released_viewers, 0) / $4) AS release,
           a.views AS old_views, a.viewers AS old_viewers, a.released_viewers AS old_released, a.finished AS old_finished,
           a.watched_buckets AS old_watched_buckets, a.retention AS old_retention, a.computed_at AS old_computed_at
    FROM noisy n LEFT JOIN media_audience a ON a.media_id = n.media_id
)
INSERT INTO media_audience AS a (media_id, views, viewers, released_viewers, finished, watched_buckets, retention, computed_at)
SELECT d.media_id, d.views, d.viewers,
       CASE WHEN d.release THEN d.viewers ELSE coalesce(d.old_released, 0) END,
       CASE WHEN d.release THEN greatest(0, least(d.viewers, round(d.finished)))::bigint ELSE coalesce(d.old_finished, 0) END,
       CASE WHEN d.release THEN greatest(0, least(100 * d.viewers, round(d.watched_buckets)))::bigint ELSE coalesce(d.old_watched_buckets, 0) END,
       CASE WHEN d.release THEN d.retention ELSE coalesce(d.old_retention, array_fill(0::bigint, ARRAY[100])) END,
       CASE WHEN d.release OR d.first OR d.views <> d.old_views OR d.viewers <> d.old_viewers
            THEN statement_timestamp() ELSE d.old_computed_at END
FROM decided d
JOIN media m ON m.id = d.media_id
ORDER BY d.media_id
ON CONFLICT (media_id) DO UPDATE
SET views = excluded.views, viewers = excluded.viewers, released_viewers = excluded.released_viewers,
    finished = excluded.finished, watched_buckets = excluded.watched_buckets, retention = excluded.retention,
    computed_at = excluded.computed_at`

// qualitySQL writes the playback-quality figures of the media $1 into their media_audience rows
// (rollupSQL has just written them) from their media_quality counters (package quality):
// sessions, startup time p50 and p95 (the smallest startup bucket at or past that share of the
// sessions that started; a bucket is rounded up to two significant digits), the rebuffering
// ratio (time rebuffering / time played), the rebuffering events, the error rate (sessions
// with a fatal error / sessions, at most 1: a player may send errors without sessions) and
// each rendition's share of the time played: the $2 most played, the rest as of an unknown
// height (0), since players may say any height and a media's counters keep every one. A media whose
// reports never carried quality keeps nulls. computed_at moves when one of them changes.
const qualitySQL = `
WITH q AS (
    SELECT media_id, metric, bucket, value FROM media_quality WHERE media_id = ANY($1::bigint[])
),
sums AS (
    SELECT media_id,
           coalesce(sum(value) FILTER (WHERE metric = 'sessions'), 0) AS sessions,
           coalesce(sum(value) FILTER (WHERE metric = 'errors'), 0) AS errors,
           coalesce(sum(value) FILTER (WHERE metric = 'rebuffers'), 0) AS rebuffers,
           coalesce(sum(value) FILTER (WHERE metric = 'rebuffer_ms'), 0) AS rebuffer_ms,
           coalesce(sum(value) FILTER (WHERE metric = 'played_ms'), 0) AS played_ms
    FROM q GROUP BY media_id
),
startup AS (
    SELECT media_id, bucket,
           sum(value) OVER (PARTITION BY media_id ORDER BY bucket) AS upto,
           sum(value) OVER (PARTITION BY media_id) AS total
    FROM q WHERE metric = 'startup'
),
pct AS (
    SELECT media_id, min(bucket) FILTER (WHERE upto >= 0.5 * total) AS p50,
           min(bucket) FILTER (WHERE upto >= 0.95 * total) AS p95
    FROM startup GROUP BY media_id
),
shares AS (
    SELECT r.media_id, jsonb_object_agg(r.height::text, round(r.value::numeric / r.total, 4) ORDER BY r.height) AS renditions
    FROM (SELECT media_id, CASE WHEN rank <= $2 THEN bucket ELSE 0 END AS height, sum(value) AS value, max(total) AS total
          FROM (SELECT media_id, bucket, value, sum(value) OVER (PARTITION BY media_id) AS total,
                       row_number() OVER (PARTITION BY media_id ORDER BY value DESC, bucket) AS rank
                FROM q WHERE metric = 'played_ms') ranked
          GROUP BY 1, 2) r
    WHERE r.total > 0
    GROUP BY r.media_id
),
figures AS (
    SELECT s.media_id, s.sessions, p.p50, p.p95,
           s.rebuffer_ms::float8 / nullif(s.played_ms, 0) AS rebuffer_ratio, s.rebuffers,
           least(s.errors, s.sessions)::float8 / nullif(s.sessions, 0) AS error_rate, sh.renditions
    FROM sums s LEFT JOIN pct p ON p.media_id = s.media_id LEFT JOIN shares sh ON sh.media_id = s.media_id
)
UPDATE media_audience a
SET quality_sessions = f.sessions, startup_p50_ms = f.p50, startup_p95_ms = f.p95, rebuffer_ratio = f.rebuffer_ratio,
    rebuffers = f.rebuffers, error_rate = f.error_rate, renditions = f.renditions,
    computed_at = CASE WHEN (a.quality_sessions, a.startup_p50_ms, a.startup_p95_ms, a.rebuffer_ratio, a.rebuffers, a.error_rate, a.renditions)
                            IS DISTINCT FROM (f.sessions, f.p50, f.p95, f.rebuffer_ratio, f.rebuffers, f.error_rate, f.renditions)
                       THEN statement_timestamp() ELSE a.computed_at END
FROM figures f
WHERE a.media_id = f.media_id`

// maxRollupBatches bounds one run: 40 000 media. The next period goes on with the rest.
const maxRollupBatches = 2000

// Rollup rolls up every media marked as having new positions and reports how many it
// rewrote. Each step takes a batch of marks and rewrites their rows in one transaction
// (takeSQL, rollupSQL), so a step that fails or is cut off keeps its marks, and two rollups
// never write the same media out of order. Running it twice is harmless: the counts are
// recomputed from the playback rows as they are, and the other figures change only when the
// audience has grown by a step (rollupSQL). It reads every row of each media it takes,
// about 16–20 µs per row measured: a media with a million viewers costs
// some 20 s of one database core per run that finds it marked, and its flushes wait for that
// step.
//
// The noise is drawn from a ChaCha8 generator seeded from crypto/rand for each run: an owner
// who could predict it could subtract it.
func Rollup(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var seed [32]byte
	crand.Read(seed[:]) // never fails: it crashes the program instead
	r := rand.New(rand.NewChaCha8(seed))
	return rollup(ctx, pool, func(noise []float64) {
		for i := range noise {
			noise[i] = r.NormFloat64()
		}
	})
}

// rollup is Rollup with the standard normal noise drawn by fill (the tests' exact rollup
// draws none).
func rollup(ctx context.Context, pool *pgxpool.Pool, fill func([]float64)) (int64, error) {
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
			noise := make([]float64, noisePerMedia*len(ids))
			fill(noise)
			for i := range noise {
				if i%noisePerMedia < Buckets {
					noise[i] *= curveNoise
				} else {
					noise[i] *= finishedNoise
				}
			}
			tag, err := tx.Exec(ctx, rollupSQL, ids, noise, MinViewers, releaseGrowth)
			total += tag.RowsAffected()
			if err != nil {
				return err
			}
			_, err = tx.Exec(ctx, qualitySQL, ids, quality.MaxHeights)
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

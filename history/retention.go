// Package history expires the viewing history: the playback rows a member has not watched for
// longer than PLAYHEAD_HISTORY_RETENTION, removed by a periodic job of the queue core
// (KindRetention), a batch at a time, with what depends on them.
package history

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/jobqueue"
)

// KindRetention is the periodic job kind that removes the expired history.
const KindRetention = "history_retention"

// Batch is how many playback rows one transaction of Expire removes: a flush that meets one
// of them waits for that transaction only, never for the whole pass.
const Batch = 5000

// Schedule is when the retention runs: every hour, on the hour. Rows are found by the hour of
// their last report (listed_at), so running more often would find nothing new.
var Schedule, _ = jobqueue.Every(time.Hour)

// ExpireSQL removes up to $2 playback rows whose last report's hour (listed_at) is before $1,
// oldest first, found through playback_listed_idx (migration 00028) and never by a sequential
// scan; with them, the collection progress that names them (playback_last_finished: the
// continue-watching list would drop such a row anyway, its playback row gone) and a mark in
// audience_dirty for each of their media, so that the next rollup counts without them. A row
// a flush holds is skipped (SKIP LOCKED): its member is watching it now, and the flush makes
// it recent again. FOR UPDATE also reads a row a flush just committed again, and leaves it
// when its listed_at moved past the cutoff. It returns how many playback rows it removed.
const ExpireSQL = `
WITH doomed AS (
	SELECT member_id, media_id FROM playback
	WHERE listed_at < $1
	ORDER BY listed_at
	LIMIT $2
	FOR UPDATE SKIP LOCKED
), removed AS (
	DELETE FROM playback p USING doomed d
	WHERE p.member_id = d.member_id AND p.media_id = d.media_id
	RETURNING p.member_id, p.media_id
), progress AS (
	DELETE FROM playback_last_finished l USING removed r
	WHERE l.member_id = r.member_id AND l.media_id = r.media_id
), dirty AS (
	INSERT INTO audience_dirty (media_id)
	SELECT DISTINCT media_id FROM removed
	ON CONFLICT DO NOTHING
)
SELECT count(*) FROM removed`

// Expire removes every playback row whose last report's hour is before cutoff, batch rows per
// transaction (ExpireSQL), and returns how many it removed. Each batch counts on removed
// (nil: none) as it commits, so a pass that fails part way counts what it did.
func Expire(ctx context.Context, pool *pgxpool.Pool, cutoff time.Time, batch int, removed prometheus.Counter) (int64, error) {
	var total int64
	for {
		var n int64
		if err := pool.QueryRow(ctx, ExpireSQL, cutoff, batch).Scan(&n); err != nil {
			return total, fmt.Errorf("history retention: %w", err)
		}
		total += n
		if removed != nil {
			removed.Add(float64(n))
		}
		if n < int64(batch) {
			return total, nil
		}
	}
}

// Metrics are the retention's counters.
type Metrics struct {
	removed prometheus.Counter
}

// NewMetrics registers the retention's counters with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{removed: prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "playhead", Subsystem: "history", Name: "expired_rows_total",
		Help: "Playback rows removed by the history retention (PLAYHEAD_HISTORY_RETENTION).",
	})}
	reg.MustRegister(m.removed)
	return m
}

// Kind is the retention's job kind: each run removes the rows not watched for longer than
// keep before its run time. With keep 0 (the retention off) the kind is not periodic and is
// never scheduled. pool and metrics are nil on a node that runs no jobs (the kind's hooks
// alone).
func Kind(keep time.Duration, pool *pgxpool.Pool, metrics *Metrics) jobqueue.Kind {
	k := jobqueue.Kind{Name: KindRetention}
	if keep > 0 {
		k.Periodic = &jobqueue.Periodic{Schedule: Schedule, MaxAttempts: 3}
	}
	if pool != nil {
		k.Run = func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error) {
			if keep <= 0 { // a run left from when the retention was on: off now
				return jobqueue.Result{}, nil
			}
			var removed prometheus.Counter
			if metrics != nil {
				removed = metrics.removed
			}
			// Rows are found by the hour of their last report, so a cutoff inside an hour (a
			// retention that is not whole hours: 90m) would take that hour's rows reported
			// after it, within the retention; down to the hour, a row goes up to an hour
			// late, never early.
			cutoff := jobqueue.RunTime(j).Add(-keep).Truncate(time.Hour)
			_, err := Expire(ctx, pool, cutoff, Batch, removed)
			return jobqueue.Result{}, err
		}
	}
	return k
}

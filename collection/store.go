package collection

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/media"
)

// Store reads collections with a member's progress.
type Store struct {
	pool *pgxpool.Pool
	// completion holds the resume thresholds a position is read with (playhead_progress).
	completion media.Completion
}

// NewStore returns a Store on pool that reads positions with the default resume thresholds
// (WithCompletion changes them).
func NewStore(pool *pgxpool.Pool) *Store {
	return &Store{pool: pool, completion: media.DefaultCompletion}
}

// WithCompletion makes s read positions with c's thresholds (the server's settings) and
// returns s.
func (s *Store) WithCompletion(c media.Completion) *Store {
	s.completion = c
	return s
}

// resumeSQL is the member's resume point in an item not stored as finished: the position when
// playhead_progress (at the thresholds from $from on, media.Completion.Args) says in progress,
// else 0. It also says finished for a row written before the credits were marked (or the
// completion point moved) that is past them now: the finish is the flush's to store, at the
// row's next report, and until then the row stays in progress at its position, as in the
// continue-watching list, not reset to not started.
func resumeSQL(from int) string {
	return fmt.Sprintf(`CASE WHEN playhead_progress(p.position_ms, m.duration_ms, m.credits_start_ms, $%d, $%d, $%d, $%d, $%d) >= 1
	THEN p.position_ms ELSE 0 END`, from, from+1, from+2, from+3, from+4)
}

// progressSQL reads a collection's items in order with the member's rows: for each place the
// newest imported row whose media is READY and public (what collection_items holds), written
// out over import_rows so the media row is read once per item; the member's rows come from
// playback's primary key. A position that is no resume point (playhead_progress, migration
// 00031) reads as 0: not started.
var progressSQL = `
SELECT DISTINCT ON (r.chapter, r.position)
       r.chapter, r.position, m.id, m.title, coalesce(m.duration_ms, 0), coalesce(m.hls_key, ''), coalesce(m.thumbnail_key, ''),
       CASE WHEN p.finished THEN p.position_ms ELSE ` + resumeSQL(3) + ` END, p.watched_at
FROM import_rows r
JOIN media m ON m.id = r.media_id
LEFT JOIN playback p ON p.member_id = $2 AND p.media_id = r.media_id
WHERE r.collection = $1 AND m.status = 'READY' AND m.visibility = 'PUBLIC'
ORDER BY r.chapter, r.position, r.id DESC`

// Progress returns collection's items, in order, with member's state of each, and the totals.
// A collection nobody imported is an empty one.
func (s *Store) Progress(ctx context.Context, collection string, member int64) (Progress, error) {
	rows, err := s.pool.Query(ctx, progressSQL, append([]any{collection, member}, s.completion.Args()...)...)
	if err != nil {
		return Progress{}, fmt.Errorf("collection progress: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		err := row.Scan(&it.Chapter, &it.Order, &it.MediaID, &it.Title, &it.DurationMS, &it.HLSKey, &it.ThumbnailKey,
			&it.PositionMS, &it.WatchedAt)
		it.State = stateOf(it.PositionMS, it.WatchedAt)
		return it, err
	})
	if err != nil {
		return Progress{}, fmt.Errorf("collection progress: %w", err)
	}
	if items == nil {
		items = []Item{}
	}
	return progressOf(collection, items), nil
}

func stateOf(positionMS int32, watchedAt *time.Time) State {
	switch {
	case watchedAt != nil:
		return Watched
	case positionMS > 0:
		return InProgress
	}
	return NotStarted
}

// startedSQL lists the collections member has started (a resume point or a watched mark on
// one of their items: a position below the resume minimum counts as 0), each summed over all its items, most recently watched first. The
// member's rows find the collections (primary-key prefix, then import_rows_media_idx); each
// collection's items are read once through the view (import_rows_placement_idx).
var startedSQL = `
WITH started AS (
	SELECT DISTINCT r.collection
	FROM playback p
	JOIN import_rows r ON r.media_id = p.media_id
	WHERE p.member_id = $1 AND (p.position_ms > 0 OR p.watched_at IS NOT NULL)
)
SELECT ci.collection, count(*), count(p.watched_at), sum(coalesce(m.duration_ms, 0))::bigint,
       sum(CASE WHEN p.watched_at IS NULL THEN greatest(coalesce(m.duration_ms, 0) - coalesce(` + resumeSQL(2) + `, 0), 0) ELSE 0 END)::bigint,
       max(p.event_time) FILTER (WHERE ` + resumeSQL(2) + ` > 0 OR p.watched_at IS NOT NULL) AS last_watched,
       (array_agg(ci.media_id ORDER BY ci.chapter, ci.position) FILTER (WHERE p.watched_at IS NULL))[1],
       (array_agg(m.title ORDER BY ci.chapter, ci.position) FILTER (WHERE p.watched_at IS NULL))[1],
       (array_agg(ci.chapter ORDER BY ci.chapter, ci.position) FILTER (WHERE p.watched_at IS NULL))[1],
       (array_agg(ci.position ORDER BY ci.chapter, ci.position) FILTER (WHERE p.watched_at IS NULL))[1],
       (array_agg(coalesce(` + resumeSQL(2) + `, 0) ORDER BY ci.chapter, ci.position) FILTER (WHERE p.watched_at IS NULL))[1]
FROM started s
CROSS JOIN LATERAL (SELECT c.collection, c.chapter, c.position, c.media_id FROM collection_items c WHERE c.collection = s.collection) ci
JOIN media m ON m.id = ci.media_id
LEFT JOIN playback p ON p.member_id = $1 AND p.media_id = ci.media_id
GROUP BY ci.collection
HAVING count(*) FILTER (WHERE ` + resumeSQL(2) + ` > 0 OR p.watched_at IS NOT NULL) > 0
ORDER BY last_watched DESC, ci.collection`

// Started returns the collections member has started, most recently watched first.
func (s *Store) Started(ctx context.Context, member int64) ([]Summary, error) {
	rows, err := s.pool.Query(ctx, startedSQL, append([]any{member}, s.completion.Args()...)...)
	if err != nil {
		return nil, fmt.Errorf("started collections: %w", err)
	}
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Summary, error) {
		var sum Summary
		var resumeID *int64
		var resumeTitle *string
		var resumeChapter, resumeOrder, resumePosition *int32
		err := row.Scan(&sum.Collection, &sum.Total, &sum.Watched, &sum.DurationMS, &sum.LeftMS, &sum.LastWatchedAt,
			&resumeID, &resumeTitle, &resumeChapter, &resumeOrder, &resumePosition)
		if err == nil && resumeID != nil {
			sum.Resume = &Resume{MediaID: *resumeID, Title: *resumeTitle, Chapter: int(*resumeChapter), Order: int(*resumeOrder),
				PositionMS: *resumePosition}
		}
		return sum, err
	})
	if err != nil {
		return nil, fmt.Errorf("started collections: %w", err)
	}
	if list == nil {
		list = []Summary{}
	}
	return list, nil
}

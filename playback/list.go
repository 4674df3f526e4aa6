package playback

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Item is one entry of the continue-watching list: a media in progress, or the next media of
// a collection in place of the one the member just finished (UpNext set, position 0).
type Item struct {
	MediaID    int64     `json:"media_id"`
	Title      string    `json:"title"`
	PositionMS int32     `json:"position_ms"`
	DurationMS int64     `json:"duration_ms,omitempty"`
	EventTime  time.Time `json:"event_time"`
	// WatchedAt is set on a media the member finished before and is watching again.
	WatchedAt *time.Time `json:"watched_at,omitempty"`
	// UpNext is set when this item stands in for a finished media of a collection.
	UpNext *UpNext `json:"up_next,omitempty"`

	// from is the playback row this item comes from: the finished media for an up-next item.
	// Pages are ordered, and their cursor made, by it.
	from Cursor
}

// UpNext says where an up-next item comes from.
type UpNext struct {
	Collection   string `json:"collection"`
	AfterMediaID int64  `json:"after_media_id"`
	AfterTitle   string `json:"after_title"`
}

// Cursor is where a continue-watching page ends: the last row's event_time and media id.
type Cursor struct {
	EventTime time.Time
	MediaID   int64
}

// listSQL reads one page of the continue-watching list in one statement, walking
// playback_continue_idx newest first and stopping at the page's end. A row whose position is
// before the completion point is listed as it is. A finished row is listed only as its
// collection's up-next item, computed in a lateral subquery that runs for finished rows only:
//   - its place: the collection it was opened from if it is still placed there, else among the
//     collections placing it the one where the member watched another item most recently;
//   - the next item after that place (chapter, then order) the member has not watched;
//   - shown only when the member has no row for that item (a row in progress is listed by
//     itself; a hidden one was dismissed), and only for the collection's newest finished
//     row, so finishing lessons 2 and 3 lists lesson 4 once;
//   - nothing at the end of a collection, or for a media in no collection.
//
// Every join to playback is on the calling member ($1), the rule that keeps it valid under
// Citus with playback sharded by member.
const listSQL = `
SELECT s.media_id, s.event_time, s.title, s.position_ms, s.duration_ms, s.watched_at,
       n.media_id, n.title, n.duration_ms, n.collection
FROM (
	SELECT p.media_id, p.event_time, p.position_ms, p.watched_at, p.collection,
	       m.title, coalesce(m.duration_ms, 0) AS duration_ms,
	       coalesce(p.position_ms >= playhead_completion_point(m.duration_ms, $5, $6), false) AS finished
	FROM playback p
	JOIN media m ON m.id = p.media_id
	WHERE p.member_id = $1 AND NOT p.hidden
	  AND ($2::timestamptz IS NULL OR (p.event_time, p.media_id) < ($2, $3))
	  AND m.status = 'READY' AND (m.visibility = 'PUBLIC' OR m.owner_id = $1)
) s
LEFT JOIN LATERAL (
	SELECT nx.media_id, nm.title, coalesce(nm.duration_ms, 0) AS duration_ms, f.collection
	FROM (
		SELECT r.collection, r.chapter, r.position
		FROM import_rows r
		WHERE r.media_id = s.media_id
		  AND EXISTS (SELECT 1 FROM collection_items w
		              WHERE w.collection = r.collection AND w.chapter = r.chapter AND w.position = r.position AND w.row_id = r.id)
		ORDER BY r.collection IS NOT DISTINCT FROM s.collection DESC,
		         CASE WHEN EXISTS (SELECT 1 FROM import_rows o WHERE o.media_id = s.media_id AND o.collection <> r.collection)
		              THEN (SELECT max(u.event_time) FROM import_rows ur
		                    JOIN playback u ON u.member_id = $1 AND u.media_id = ur.media_id
		                    WHERE ur.collection = r.collection AND ur.media_id <> s.media_id) END DESC NULLS LAST,
		         r.collection
		LIMIT 1
	) f
	CROSS JOIN LATERAL (
		SELECT ci.media_id FROM collection_items ci
		WHERE ci.collection = f.collection AND (ci.chapter, ci.position) > (f.chapter, f.position)
		  AND NOT EXISTS (SELECT 1 FROM playback w WHERE w.member_id = $1 AND w.media_id = ci.media_id AND w.watched_at IS NOT NULL)
		ORDER BY ci.chapter, ci.position
		LIMIT 1
	) nx
	JOIN media nm ON nm.id = nx.media_id
	WHERE s.finished
	  AND NOT EXISTS (SELECT 1 FROM playback o WHERE o.member_id = $1 AND o.media_id = nx.media_id)
	  AND NOT EXISTS (
		SELECT 1 FROM playback q
		JOIN media qm ON qm.id = q.media_id
		JOIN import_rows qr ON qr.media_id = q.media_id AND qr.collection = f.collection
		WHERE q.member_id = $1 AND NOT q.hidden
		  AND (q.event_time, q.media_id) > (s.event_time, s.media_id)
		  AND q.position_ms >= playhead_completion_point(qm.duration_ms, $5, $6))
) n ON true
WHERE NOT s.finished OR n.media_id IS NOT NULL
ORDER BY s.event_time DESC, s.media_id DESC
LIMIT $4`

// List returns up to limit items of member's continue-watching list older than after (nil:
// from the newest), newest first, and the cursor of the next page (nil on the last page).
func (s *Store) List(ctx context.Context, member int64, after *Cursor, limit int) ([]Item, *Cursor, error) {
	var afterTime *time.Time
	var afterID int64
	if after != nil {
		afterTime, afterID = &after.EventTime, after.MediaID
	}
	rows, err := s.pool.Query(ctx, listSQL, member, afterTime, afterID, limit+1, s.completion.Ratio, s.completion.TailMS())
	if err != nil {
		return nil, nil, fmt.Errorf("list playback: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		var nextID, nextDuration *int64
		var nextTitle, collection *string
		if err := row.Scan(&it.MediaID, &it.EventTime, &it.Title, &it.PositionMS, &it.DurationMS, &it.WatchedAt,
			&nextID, &nextTitle, &nextDuration, &collection); err != nil {
			return it, err
		}
		it.from = Cursor{EventTime: it.EventTime, MediaID: it.MediaID}
		if nextID != nil {
			it.UpNext = &UpNext{Collection: *collection, AfterMediaID: it.MediaID, AfterTitle: it.Title}
			it.MediaID, it.Title, it.DurationMS, it.PositionMS, it.WatchedAt = *nextID, *nextTitle, *nextDuration, 0, nil
		}
		return it, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list playback: %w", err)
	}
	if len(items) <= limit {
		return items, nil, nil
	}
	items = items[:limit]
	last := items[limit-1].from
	return items, &last, nil
}

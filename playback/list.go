package playback

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/media"
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
	// Status is the media's status (the list shows READY media only).
	Status media.Status `json:"status"`
	// ThumbnailURL is the media's thumbnail signed for the member (the handler signs
	// thumbnailKey); empty when it has none.
	ThumbnailURL string `json:"thumbnail_url,omitempty"`

	thumbnailKey string

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

// listSQL reads one page of the continue-watching list in one statement. It reads the
// member's rows in two runs of playback_continue_idx, whose key puts finished after member:
//   - in progress: rows not finished with a resume point (playhead_progress not 0 at the
//     store's thresholds, $5–$9: past the resume minimum of a media long enough; a row written
//     before the credits were marked or the completion point moved, and past them now, stays
//     until its next report stores the finish), newest first, at most a page of them;
//   - up next: the member's rows of playback_last_finished, the newest finished item of each
//     collection as the flush recorded it (one row per collection, not one per finished
//     lesson). A row goes on while its playback row is still that finished position (not
//     rewatched since, not hidden) and its media still follows that collection: the one it was
//     opened from if it is still placed there, else among the collections placing it the one
//     where the member watched another item most recently. For it the next item after its
//     place (chapter, then order) that the member has not watched is shown, only when the
//     member has no row for that item (a row in progress is listed by itself; a hidden one
//     was dismissed). So finishing lessons 2 and 3 lists lesson 4 once, the end of a
//     collection and a media in no collection list nothing, and the work is a few index probes
//     per collection the member finished something in, whatever the number of lessons. When
//     the newest finished item of a collection was rewatched or hidden, that collection shows
//     no up-next (an older finished item's next is usually that very item, listed by itself).
//
// The rows in progress are read in playback_continue_idx's order, by listed_at (the hour of
// event_time, migration 00014), and sorted by event_time within an hour (an incremental sort
// of that hour's few rows): ordered by listed_at first, they are still ordered by event_time,
// since listed_at grows with it, and the cursor's hour bounds the index scan of a later page.
//
// A place is current when its import row's media is READY and public and no newer row at the
// same place has such media: what collection_items holds, written out as index probes on
// import_rows_placement_idx (the view sorts the whole collection for each lookup). Pages are
// ordered, and cut by the cursor, by the row an item comes from: the finished row for an
// up-next item. The newest finished row of a collection is chosen by the flush, before the
// cursor applies, so a later page never shows a second up-next for a collection.
//
// Each row carries the thumbnail key and status of the media it shows (the next media for an
// up-next item), read from the media row the statement joins anyway.
//
// Every join to playback is on the calling member ($1), the rule that keeps it valid under
// Citus with playback sharded by member.
const listSQL = `
WITH finished AS (
	SELECT p.media_id, p.event_time, m.title, coalesce(m.duration_ms, 0) AS duration_ms,
	       f.collection, f.chapter, f.position
	FROM playback_last_finished l
	JOIN playback p ON p.member_id = $1 AND p.media_id = l.media_id AND p.event_time = l.event_time
	JOIN media m ON m.id = p.media_id
	CROSS JOIN LATERAL (
		SELECT r.collection, r.chapter, r.position
		FROM import_rows r
		WHERE r.media_id = p.media_id AND m.visibility = 'PUBLIC'
		  AND NOT EXISTS (SELECT 1 FROM import_rows r2 JOIN media m2 ON m2.id = r2.media_id
		                  WHERE r2.collection = r.collection AND r2.chapter = r.chapter AND r2.position = r.position
		                    AND r2.media_id IS NOT NULL AND r2.id > r.id AND m2.status = 'READY' AND m2.visibility = 'PUBLIC')
		ORDER BY r.collection IS NOT DISTINCT FROM p.collection DESC,
		         CASE WHEN EXISTS (SELECT 1 FROM import_rows o WHERE o.media_id = p.media_id AND o.collection <> r.collection)
		              THEN (SELECT max(u.event_time) FROM import_rows ur
		                    JOIN playback u ON u.member_id = $1 AND u.media_id = ur.media_id
		                    WHERE ur.collection = r.collection AND ur.media_id <> p.media_id) END DESC NULLS LAST,
		         r.collection
		LIMIT 1
	) f
	WHERE l.member_id = $1 AND f.collection = l.collection AND p.finished AND NOT p.hidden
	  AND m.status = 'READY' AND (m.visibility = 'PUBLIC' OR m.owner_id = $1)
),
up_next AS (
	SELECT fs.media_id, fs.event_time, fs.title, 0 AS position_ms, fs.duration_ms, NULL::timestamptz AS watched_at,
	       nx.media_id AS next_id, nm.title AS next_title, coalesce(nm.duration_ms, 0) AS next_duration_ms, fs.collection,
	       coalesce(nm.thumbnail_key, '') AS thumbnail_key, nm.status
	FROM finished fs
	CROSS JOIN LATERAL (
		SELECT r.media_id
		FROM import_rows r
		JOIN media m ON m.id = r.media_id
		WHERE r.collection = fs.collection AND (r.chapter, r.position) > (fs.chapter, fs.position) AND r.media_id IS NOT NULL
		  AND m.status = 'READY' AND m.visibility = 'PUBLIC'
		  AND NOT EXISTS (SELECT 1 FROM import_rows r2 JOIN media m2 ON m2.id = r2.media_id
		                  WHERE r2.collection = r.collection AND r2.chapter = r.chapter AND r2.position = r.position
		                    AND r2.media_id IS NOT NULL AND r2.id > r.id AND m2.status = 'READY' AND m2.visibility = 'PUBLIC')
		  AND NOT EXISTS (SELECT 1 FROM playback w WHERE w.member_id = $1 AND w.media_id = r.media_id AND w.watched_at IS NOT NULL)
		ORDER BY r.chapter, r.position, r.id DESC
		LIMIT 1
	) nx
	JOIN media nm ON nm.id = nx.media_id
	WHERE ($2::timestamptz IS NULL OR (fs.event_time, fs.media_id) < ($2, $3))
	  AND NOT EXISTS (SELECT 1 FROM playback o WHERE o.member_id = $1 AND o.media_id = nx.media_id)
),
in_progress AS (
	SELECT p.media_id, p.event_time, m.title, p.position_ms, coalesce(m.duration_ms, 0) AS duration_ms, p.watched_at,
	       NULL::bigint AS next_id, NULL::text AS next_title, NULL::bigint AS next_duration_ms, NULL::text AS collection,
	       coalesce(m.thumbnail_key, '') AS thumbnail_key, m.status
	FROM playback p
	JOIN media m ON m.id = p.media_id
	WHERE p.member_id = $1 AND NOT p.finished AND NOT p.hidden
	  AND playhead_progress(p.position_ms, m.duration_ms, m.credits_start_ms, $5, $6, $7, $8, $9) <> 0
	  AND ($2::timestamptz IS NULL OR (p.listed_at <= playhead_list_bucket($2) AND (p.event_time, p.media_id) < ($2, $3)))
	  AND m.status = 'READY' AND (m.visibility = 'PUBLIC' OR m.owner_id = $1)
	ORDER BY p.listed_at DESC, p.event_time DESC, p.media_id DESC
	LIMIT $4
)
SELECT media_id, event_time, title, position_ms, duration_ms, watched_at, next_id, next_title, next_duration_ms, collection,
       thumbnail_key, status
FROM (SELECT * FROM in_progress UNION ALL SELECT * FROM up_next) l
ORDER BY event_time DESC, media_id DESC
LIMIT $4`

// List returns up to limit items of member's continue-watching list older than after (nil:
// from the newest), newest first, and the cursor of the next page (nil on the last page).
func (s *Store) List(ctx context.Context, member int64, after *Cursor, limit int) ([]Item, *Cursor, error) {
	var afterTime *time.Time
	var afterID int64
	if after != nil {
		afterTime, afterID = &after.EventTime, after.MediaID
	}
	rows, err := s.lists.Query(ctx, listSQL, append([]any{member, afterTime, afterID, limit + 1}, s.completion.Args()...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("list playback: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var it Item
		var nextID, nextDuration *int64
		var nextTitle, collection *string
		if err := row.Scan(&it.MediaID, &it.EventTime, &it.Title, &it.PositionMS, &it.DurationMS, &it.WatchedAt,
			&nextID, &nextTitle, &nextDuration, &collection, &it.thumbnailKey, &it.Status); err != nil {
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

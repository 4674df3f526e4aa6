package playback

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/erasure"
)

// markWatchedSQL marks the media $2 watched by member $1 at $3, as a report at the end would:
// the position at the end (the duration), finished, no resume point, the row shown again
// (a newer report un-hides it too), and the first watched mark kept. The event-time guard is
// the flush's: a mark does nothing to a row with a newer report, and a report made before the
// mark and flushed after it changes nothing (its position loses to the event time, its
// watched mark to marked_at). It records the media as its collections' last finished item
// (keepLastFinishedSQL's rule), so up next follows it, and a row that was not finished as a
// finish by hand (completedSQL's rule: playback_completions, how 'marked'). A media deleted
// since the handler's access check gets no row, as in the flush. Rows are inserted in media
// order, so concurrent marks lock them in one order.
const markWatchedSQL = `
WITH written AS (
	INSERT INTO playback AS p (member_id, media_id, position_ms, event_time, updated_at, watched_at, finished, finished_at, marked_at)
	SELECT $1, m.id, least(coalesce(m.duration_ms, 0), 2147483647)::int, $3, $3, $3, true, $3, $3
	FROM media m WHERE m.id = ANY($2::bigint[]) AND m.status <> 'DELETED'
	ORDER BY m.id
	ON CONFLICT (member_id, media_id) DO UPDATE
	SET position_ms = excluded.position_ms, event_time = excluded.event_time, updated_at = excluded.updated_at,
	    watched_at = coalesce(p.watched_at, excluded.watched_at), finished = true, hidden = false,
	    finished_at = CASE WHEN p.finished THEN p.finished_at ELSE excluded.finished_at END,
	    marked_at = excluded.marked_at
	WHERE p.event_time < excluded.event_time
	RETURNING p.member_id, p.media_id, p.event_time, p.position_ms, p.finished_at
), completed AS (
	INSERT INTO playback_completions (member_id, media_id, finished_at, position_ms, duration_ms, how)
	SELECT w.member_id, w.media_id, w.finished_at, w.position_ms, m.duration_ms, 'marked'
	FROM written w JOIN media m ON m.id = w.media_id
	WHERE w.finished_at = $3
	ORDER BY w.media_id
	ON CONFLICT (member_id, media_id, finished_at) DO NOTHING
)
INSERT INTO playback_last_finished AS l (member_id, collection, media_id, event_time)
SELECT DISTINCT ON (w.member_id, r.collection) w.member_id, r.collection, w.media_id, w.event_time
FROM written w
JOIN import_rows r ON r.media_id = w.media_id
ORDER BY w.member_id, r.collection, w.event_time DESC, w.media_id DESC
ON CONFLICT (member_id, collection) DO UPDATE
SET media_id   = excluded.media_id,
    event_time = excluded.event_time
WHERE l.event_time < excluded.event_time
   OR (l.event_time = excluded.event_time AND l.media_id < excluded.media_id)`

// markUnwatchedSQL clears what watching left of the media $2 for member $1 at $3: the watched
// mark, the finish and the resume point (the position back to 0). The watched ranges stay:
// they record what was played, for the audience curve. Guarded as markWatchedSQL is.
const markUnwatchedSQL = `
UPDATE playback p
SET position_ms = 0, event_time = $3, updated_at = $3, watched_at = NULL, finished = false, finished_at = NULL, marked_at = $3
FROM (SELECT unnest($2::bigint[]) AS media_id ORDER BY 1) k
WHERE p.member_id = $1 AND p.media_id = k.media_id AND p.event_time < $3`

// Mark marks medias watched (watched true) or unwatched by member, as of at, in one
// transaction with the erasure fence and the audience rollups' marks. It refuses an erased
// member and, while their history is paused, stores nothing and says so (409).
func (s *Store) Mark(ctx context.Context, member int64, medias []int64, watched bool, at time.Time) error {
	var b pgx.Batch
	erasure.Fence(&b)
	b.Queue(refuseWriteSQL, member, int64(0), false)
	stmt := markUnwatchedSQL
	if watched {
		stmt = markWatchedSQL
	}
	b.Queue(stmt, member, medias, at)
	b.Queue(markAudienceSQL, medias)
	erased, paused, err := refusal(s.pool.SendBatch(ctx, &b).Close())
	switch {
	case erased:
		return errErased
	case paused:
		return apperr.Errorf(apperr.Conflict, "your viewing history is paused; resume it to mark media watched or unwatched")
	case err != nil:
		return fmt.Errorf("mark playback rows: %w", err)
	}
	return nil
}

// collectionItemsSQL lists the media of a collection's current places (collection_items:
// READY and public).
const collectionItemsSQL = `SELECT media_id FROM collection_items WHERE collection = $1 ORDER BY media_id`

// CollectionItems returns the media ids of collection's items now, in id order.
func (s *Store) CollectionItems(ctx context.Context, name string) ([]int64, error) {
	rows, err := s.pool.Query(ctx, collectionItemsSQL, name)
	if err != nil {
		return nil, fmt.Errorf("collection items: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("collection items: %w", err)
	}
	return ids, nil
}

// marksRefused is the 429 of a mark past the member's rate.
const marksRefused = "too many marks watched or unwatched; wait for Retry-After"

// markMedia serves PUT (watched) and DELETE (unwatched) /v1/playback/{mediaID}/watched: the
// member marks a media they may play, at the server's receive time. A mark takes a token of
// the member's report limit: it writes straight to the database, and marking watched after
// unwatched is a new finish, announced (completion events, xAPI) each time, so an unlimited
// toggle would be an unlimited stream of writes and events.
func (h *Handler) markMedia(watched bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := h.allow(c, auth.From(c).MemberID, marksRefused); err != nil {
			return err
		}
		key, _, err := h.playableKey(c)
		if err != nil {
			return err
		}
		if err := h.Store.Mark(c.UserContext(), key.Member, []int64{key.Media}, watched, now()); err != nil {
			return err
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
}

// markCollection serves PUT (watched) and DELETE (unwatched) /v1/collections/{collection}/watched:
// every current item of the course, in one transaction, for one token of the member's report
// limit as markMedia. A collection with no item is 404.
func (h *Handler) markCollection(watched bool) fiber.Handler {
	return func(c *fiber.Ctx) error {
		if err := h.allow(c, auth.From(c).MemberID, marksRefused); err != nil {
			return err
		}
		name, err := collection.NameParam(c)
		if err != nil {
			return err
		}
		ids, err := h.Store.CollectionItems(c.UserContext(), name)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return apperr.Errorf(apperr.NotFound, "no collection %q", name)
		}
		if err := h.Store.Mark(c.UserContext(), auth.From(c).MemberID, ids, watched, now()); err != nil {
			return err
		}
		return c.SendStatus(fiber.StatusNoContent)
	}
}

package media

import (
	"context"
	"fmt"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// Owned is one of a member's uploads as GET /v1/media?owner=me lists it.
type Owned struct {
	ID         int64      `json:"id"`
	Title      string     `json:"title"`
	Status     Status     `json:"status"`
	Visibility Visibility `json:"visibility"`
	CreatedAt  time.Time  `json:"created_at"`
	// DurationMS is 0 (omitted) while the duration is not known.
	DurationMS int64 `json:"duration_ms,omitempty"`
	// ThumbnailURL is set once the media is READY and has a thumbnail.
	ThumbnailURL string `json:"thumbnail_url,omitempty"`

	thumbnailKey string
}

const ownedColumns = `SELECT id, title, status, visibility, created_at, coalesce(duration_ms, 0), coalesce(thumbnail_key, '')
	FROM media
	WHERE owner_id = $1 AND status <> 'DELETED'`

const (
	ownedFirstPageSQL = ownedColumns + ` ORDER BY created_at DESC, id DESC LIMIT $2`
	ownedNextPageSQL  = ownedColumns + ` AND (created_at, id) < ($3, $4) ORDER BY created_at DESC, id DESC LIMIT $2`
)

// ListOwned returns up to limit of owner's media created before after (nil: from the newest),
// newest first, and the cursor of the next page (nil on the last page). It reads
// media_owner_created_idx.
func (s *Store) ListOwned(ctx context.Context, owner int64, after *httpserver.PageCursor, limit int) ([]Owned, *httpserver.PageCursor, error) {
	// Two statements rather than "$2 IS NULL OR (created_at, id) < ($2, $3)": with the OR the
	// planner cannot make the row comparison an index condition, and a later page would read
	// (and filter out) every row of the pages before it.
	query, args := ownedFirstPageSQL, []any{owner, limit + 1}
	if after != nil {
		query, args = ownedNextPageSQL, []any{owner, limit + 1, after.Time, after.ID}
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return nil, nil, fmt.Errorf("list owned media: %w", err)
	}
	items, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Owned, error) {
		var o Owned
		err := row.Scan(&o.ID, &o.Title, &o.Status, &o.Visibility, &o.CreatedAt, &o.DurationMS, &o.thumbnailKey)
		return o, err
	})
	if err != nil {
		return nil, nil, fmt.Errorf("list owned media: %w", err)
	}
	if len(items) <= limit {
		return items, nil, nil
	}
	items = items[:limit]
	last := items[limit-1]
	return items, &httpserver.PageCursor{Time: last.CreatedAt, ID: last.ID}, nil
}

type ownedResponse struct {
	Items      []Owned `json:"items"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// list serves GET /v1/media?owner=me: the calling member's uploads, newest first, paged like
// GET /v1/playback. owner is required and only "me" is accepted: the member id comes from the
// token, so no request can list another member's media.
func (h *Handler) list(c *fiber.Ctx) error {
	if owner := c.Query("owner"); owner != "me" {
		return apperr.Errorf(apperr.Invalid, `owner is required and must be "me"`)
	}
	limit, err := httpserver.QueryLimit(c)
	if err != nil {
		return err
	}
	after, err := httpserver.QueryCursor(c)
	if err != nil {
		return err
	}
	member := auth.From(c).MemberID
	items, next, err := h.Store.ListOwned(c.UserContext(), member, after, limit)
	if err != nil {
		return err
	}
	resp := ownedResponse{Items: items}
	if resp.Items == nil {
		resp.Items = []Owned{}
	}
	for i := range resp.Items {
		it := &resp.Items[i]
		if it.Status == StatusReady && it.thumbnailKey != "" {
			if it.ThumbnailURL, err = h.Links.File(c.UserContext(), member, it.thumbnailKey, 0); err != nil {
				return err
			}
		}
	}
	if next != nil {
		resp.NextCursor = httpserver.EncodeCursor(*next)
	}
	// The answer holds links made for this member that expire: no cache may keep it.
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(resp)
}

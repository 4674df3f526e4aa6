package playback

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/buffer"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/quality"
	"github.com/playhead/playhead/ratelimit"
)

// Mode is how PUT writes a position.
type Mode string

// The write modes.
const (
	// ModeWriteBehind validates through the cache, buffers, and answers at once.
	ModeWriteBehind Mode = "writebehind"
	// ModeSync validates with a query and writes with a statement on the request path: the
	// seed's design before write-behind, kept only as a benchmark baseline.
	ModeSync Mode = "sync"
)

// Valid reports whether m is a known mode.
func (m Mode) Valid() bool { return m == ModeWriteBehind || m == ModeSync }

// AccessChecker decides whether a member may play a media item (cache.Cache, or
// cache.Direct for the synchronous baseline).
type AccessChecker interface {
	Playable(ctx context.Context, member, mediaID int64) (media.Access, error)
}

// Handler serves /v1/playback.
type Handler struct {
	Store  *Store
	Access AccessChecker
	Buffer *buffer.Buffer[Key, Position]
	Mode   Mode
	// Limit bounds each member's position reports (sustained rate and burst). Optional.
	Limit *ratelimit.Limiter
	// RateLimited counts reports refused by Limit. Optional.
	RateLimited prometheus.Counter
	// ForgetsUnsettled counts forgets answered before every writer older than their tombstone
	// had ended (Store.Forget gave up after ForgetWait). Optional.
	ForgetsUnsettled prometheus.Counter
	// Links signs the list items' thumbnail URLs for the member asking.
	Links *media.Links
	// Quality adds up the playback quality reports carry. Optional: without it, their quality
	// is validated and not kept.
	Quality *quality.Aggregator
}

// Register adds the playback routes (/playback…, and the marks of a whole collection) to
// router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	g := router.Group("/playback")
	httpserver.Get(g, "/", h.list)
	g.Post("/:mediaID", h.open)
	g.Put("/:mediaID", httpserver.RequireJSON, h.put)
	httpserver.Get(g, "/:mediaID", h.get)
	g.Delete("/:mediaID", h.hide)
	g.Put("/:mediaID/watched", h.markMedia(true))
	g.Delete("/:mediaID/watched", h.markMedia(false))
	router.Put("/collections/:collection/watched", h.markCollection(true))
	router.Delete("/collections/:collection/watched", h.markCollection(false))
	httpserver.Get(router, "/me/settings", h.settings)
	router.Put("/me/settings", httpserver.RequireJSON, h.saveSettings)
}

// now is the server receive time at PostgreSQL's precision.
func now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

type positionResponse struct {
	MediaID    int64     `json:"media_id"`
	PositionMS int32     `json:"position_ms"`
	EventTime  time.Time `json:"event_time"`
	// Finished says the position is at or past the completion point: a player starts over.
	Finished bool `json:"finished"`
	// WatchedAt is when the member first finished the media; a rewatch keeps it.
	WatchedAt *time.Time `json:"watched_at,omitempty"`
}

// response describes pos of a media of access's duration and credits with its stored watched
// mark: finished by the resume rule (media.Completion.State, the credits included).
func (h *Handler) response(key Key, pos Position, access media.Access, watchedAt *time.Time) positionResponse {
	return positionResponse{MediaID: key.Media, PositionMS: pos.PositionMS, EventTime: pos.EventTime,
		Finished:  h.Store.completion.State(int64(pos.PositionMS), access.DurationMS, access.CreditsStartMS) == media.Finished,
		WatchedAt: watchedAt}
}

// allow takes one of member's tokens from Limit (none: no limit), or answers 429 with
// Retry-After saying why (refused: what was refused, for the message).
func (h *Handler) allow(c *fiber.Ctx, member int64, refused string) error {
	if h.Limit == nil {
		return nil
	}
	if ok, wait := h.Limit.Allow(member); !ok {
		if h.RateLimited != nil {
			h.RateLimited.Inc()
		}
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(ratelimit.RetryAfterSeconds(wait)))
		return apperr.Errorf(apperr.TooManyRequests, "%s", refused)
	}
	return nil
}

func (h *Handler) put(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	if err := h.allow(c, member, "too many position reports; a player reports every 5 s"); err != nil {
		return err
	}
	mediaID, err := httpserver.ParamID(c, "mediaID")
	if err != nil {
		return err
	}
	raw, q, err := ParseReport(c.Body())
	if err != nil {
		return err
	}
	access, err := h.Access.Playable(c.UserContext(), member, mediaID)
	if err != nil {
		return err
	}
	pos, err := CheckRange(raw, access.DurationMS)
	if err != nil {
		return err
	}
	key, value := Key{Member: member, Media: mediaID}, Position{PositionMS: pos, EventTime: now()}
	if h.Mode == ModeSync {
		if err := h.Store.UpsertOne(c.UserContext(), key, value); err != nil {
			return err
		}
		h.countQuality(mediaID, q)
		return c.SendStatus(fiber.StatusNoContent)
	}
	// A drop (buffer full) still answers 204: it is counted and logged, and the player
	// reports again in 5 s. Only a closing buffer refuses, so the client retries elsewhere.
	if _, err := h.Buffer.Offer(key, value); errors.Is(err, buffer.ErrClosed) {
		return apperr.Errorf(apperr.Unavailable, "shutting down")
	}
	h.countQuality(mediaID, q)
	return c.SendStatus(fiber.StatusNoContent)
}

// countQuality adds a report's quality once the report is answered 204: a refused report
// (a failed check, a 503 while the node stops or the database is down) is sent again by its
// player, quality included, and would otherwise be counted twice. The quality is per media,
// not per member, so it has no row of its own to guard.
func (h *Handler) countQuality(mediaID int64, q quality.Report) {
	if h.Quality != nil {
		h.Quality.Add(mediaID, q)
	}
}

// open serves POST /v1/playback/{mediaID}[?collection=name]: the player opened the media,
// from that collection if it says so (it decides what comes next when the media is placed in
// several).
func (h *Handler) open(c *fiber.Ctx) error {
	key, access, err := h.playableKey(c)
	if err != nil {
		return err
	}
	var from string
	if c.Context().QueryArgs().Has("collection") {
		from = c.Query("collection")
		if err := collection.CheckName("collection", from); err != nil {
			return err
		}
		in, err := h.Store.InCollection(c.UserContext(), from, key.Media)
		if err != nil {
			return err
		}
		if !in {
			return apperr.Errorf(apperr.Unprocessable, "media %d is not in that collection", key.Media)
		}
	}
	st, err := h.Store.Open(c.UserContext(), key, now(), from)
	if err != nil {
		return err
	}
	// A position that is no resume point (below the minimum, or in media too short to keep
	// one) plays from the start.
	pos := h.newest(key, st.Position)
	if h.Store.completion.State(int64(pos.PositionMS), access.DurationMS, access.CreditsStartMS) == media.NotStarted {
		pos.PositionMS = 0
	}
	return c.JSON(h.response(key, pos, access, st.WatchedAt))
}

func (h *Handler) get(c *fiber.Ctx) error {
	key, access, err := h.playableKey(c)
	if err != nil {
		return err
	}
	st, found, err := h.Store.Get(c.UserContext(), key)
	if err != nil {
		return err
	}
	pending, isPending := h.pending(key)
	if !found && !isPending {
		return apperr.Errorf(apperr.NotFound, "no position for media %d", key.Media)
	}
	pos := st.Position
	if isPending && (!found || Newer(pending, pos)) {
		pos = pending
	}
	return c.JSON(h.response(key, pos, access, st.WatchedAt))
}

// hide serves DELETE /v1/playback/{mediaID}: the item leaves the continue-watching list, or
// with ?forget=true is deleted for real (forget).
func (h *Handler) hide(c *fiber.Ctx) error {
	forget, err := forgetParam(c)
	if err != nil {
		return err
	}
	if forget {
		return h.forget(c)
	}
	key, _, err := h.playableKey(c)
	if err != nil {
		return err
	}
	pending, _ := h.pending(key)
	if err := h.Store.Hide(c.UserContext(), key, pending, now()); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

type listResponse struct {
	Items      []Item `json:"items"`
	NextCursor string `json:"next_cursor,omitempty"`
}

// MaxListLimit bounds one page of the continue-watching list.
const MaxListLimit = httpserver.MaxPageLimit

func (h *Handler) list(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	limit, err := httpserver.QueryLimit(c)
	if err != nil {
		return err
	}
	page, err := httpserver.QueryCursor(c)
	if err != nil {
		return err
	}
	var after *Cursor
	if page != nil {
		after = &Cursor{EventTime: page.Time, MediaID: page.ID}
	}
	items, next, err := h.Store.List(c.UserContext(), member, after, limit)
	if err != nil {
		return err
	}
	resp := listResponse{Items: items}
	if resp.Items == nil {
		resp.Items = []Item{}
	}
	for i := range resp.Items {
		it := &resp.Items[i]
		// Signing is CPU only: the list stays one statement, and the page one request.
		if it.Status == media.StatusReady && it.thumbnailKey != "" {
			if it.ThumbnailURL, err = h.Links.File(c.UserContext(), member, it.thumbnailKey, 0); err != nil {
				return err
			}
		}
	}
	if next != nil {
		resp.NextCursor = EncodeCursor(*next)
	}
	// The answer holds links made for this member that expire: no cache may keep it.
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(resp)
}

// playableKey reads the media id and checks the member may play it.
func (h *Handler) playableKey(c *fiber.Ctx) (Key, media.Access, error) {
	member := auth.From(c).MemberID
	mediaID, err := httpserver.ParamID(c, "mediaID")
	if err != nil {
		return Key{}, media.Access{}, err
	}
	access, err := h.Access.Playable(c.UserContext(), member, mediaID)
	if err != nil {
		return Key{}, media.Access{}, err
	}
	return Key{Member: member, Media: mediaID}, access, nil
}

// pending returns this node's unflushed position for key: reads see their own writes.
func (h *Handler) pending(key Key) (Position, bool) {
	if h.Buffer == nil {
		return Position{}, false
	}
	return h.Buffer.Pending(key)
}

func (h *Handler) newest(key Key, stored Position) Position {
	if p, ok := h.pending(key); ok && Newer(p, stored) {
		return p
	}
	return stored
}

// EncodeCursor makes an opaque page cursor (httpserver.EncodeCursor's form).
func EncodeCursor(c Cursor) string {
	return httpserver.EncodeCursor(httpserver.PageCursor{Time: c.EventTime, ID: c.MediaID})
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (Cursor, error) {
	c, err := httpserver.DecodeCursor(s)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{EventTime: c.Time, MediaID: c.ID}, nil
}

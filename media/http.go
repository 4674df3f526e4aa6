package media

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// AdminHandler serves /v1/admin/media.
type AdminHandler struct {
	Store *Store
}

// Register adds the admin media routes (/media…) to router, the /v1/admin group that
// requires the admin role.
func (h *AdminHandler) Register(router fiber.Router) {
	router.Post("/media", httpserver.RequireJSON, h.create)
	router.Patch("/media/:id", httpserver.RequireJSON, h.patch)
	httpserver.Get(router, "/media/:id", h.get)
}

// MaxTitleRunes bounds a media title.
const MaxTitleRunes = 500

type createRequest struct {
	Title      string     `json:"title"`
	DurationMS int64      `json:"duration_ms"`
	Visibility Visibility `json:"visibility"`
	Status     Status     `json:"status"`
	// OwnerID defaults to the calling admin.
	OwnerID int64 `json:"owner_id"`
}

// create registers media that is already encoded elsewhere: READY unless told otherwise.
func (h *AdminHandler) create(c *fiber.Ctx) error {
	var req createRequest
	if err := httpserver.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	m := Media{
		OwnerID:    req.OwnerID,
		Title:      strings.TrimSpace(req.Title),
		Status:     req.Status,
		Visibility: req.Visibility,
		DurationMS: req.DurationMS,
	}
	if m.OwnerID == 0 {
		m.OwnerID = auth.From(c).MemberID
	}
	if m.Status == "" {
		m.Status = StatusReady
	}
	if m.Visibility == "" {
		m.Visibility = VisibilityPublic
	}
	if m.OwnerID <= 0 {
		return apperr.Errorf(apperr.Unprocessable, "owner_id must be a positive member id")
	}
	if err := errors.Join(checkTitle(m.Title), checkStatus(m.Status), checkVisibility(m.Visibility), checkDuration(m.DurationMS)); err != nil {
		return err
	}
	out, err := h.Store.Create(c.UserContext(), m)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(out)
}

func (h *AdminHandler) patch(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	var p Patch
	if err := httpserver.DecodeJSON(c.Body(), &p); err != nil {
		return err
	}
	if p.Title == nil && p.Status == nil && p.Visibility == nil && p.DurationMS == nil {
		return apperr.Errorf(apperr.Unprocessable, "nothing to change: give title, status, visibility or duration_ms")
	}
	if err := checkPatch(&p); err != nil {
		return err
	}
	out, err := h.Store.Update(c.UserContext(), id, p)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// checkPatch validates the fields p sets, with the title trimmed, as both PATCH routes take
// them.
func checkPatch(p *Patch) error {
	var errs []error
	if p.Title != nil {
		*p.Title = strings.TrimSpace(*p.Title)
		errs = append(errs, checkTitle(*p.Title))
	}
	if p.Status != nil {
		errs = append(errs, checkStatus(*p.Status))
	}
	if p.Visibility != nil {
		errs = append(errs, checkVisibility(*p.Visibility))
	}
	if p.DurationMS != nil {
		errs = append(errs, checkDuration(*p.DurationMS))
	}
	return errors.Join(errs...)
}

func (h *AdminHandler) get(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	m, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(m)
}

// The field checks return nil or an apperr.Unprocessable error. errors.Join of several keeps
// the first one's code, which is what the client sees.

func checkTitle(title string) error {
	switch {
	case title == "":
		return apperr.Errorf(apperr.Unprocessable, "title is required")
	case utf8.RuneCountInString(title) > MaxTitleRunes:
		return apperr.Errorf(apperr.Unprocessable, "title is longer than %d characters", MaxTitleRunes)
	}
	return httpserver.CheckText("title", title)
}

func checkStatus(s Status) error {
	if !s.Valid() {
		return apperr.Errorf(apperr.Unprocessable, "status must be UPLOADED, PROCESSING, READY or FAILED")
	}
	return nil
}

func checkVisibility(v Visibility) error {
	if !v.Valid() {
		return apperr.Errorf(apperr.Unprocessable, "visibility must be PUBLIC or PRIVATE")
	}
	return nil
}

// checkDuration accepts 0: the duration is unknown (stored as NULL).
func checkDuration(ms int64) error {
	if ms < 0 {
		return apperr.Errorf(apperr.Unprocessable, "duration_ms must not be negative")
	}
	return nil
}

// Handler serves the member's view of media: GET /v1/media/{id} and GET /v1/media?owner=me.
type Handler struct {
	Store *Store
	// Access answers who may see a media id from memory (the media cache), so that requests
	// for unknown or invisible ids never reach the database.
	Access AccessLookup
	// Links signs the URLs of the encoded files.
	Links *Links
	// Chapters lists a media item's chapters, shown with it. Nil: none are.
	Chapters ChapterLister
}

// AccessLookup reads a media item's access fields; found is false when there is no such media.
// Evict forgets what it holds for id, once the row has been seen to differ.
type AccessLookup interface {
	Access(ctx context.Context, id int64) (access Access, found bool, err error)
	Evict(id int64)
}

// Register adds the member media routes to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	httpserver.Get(router, "/media", h.list)
	httpserver.Get(router, "/media/:id", h.get)
	router.Patch("/media/:id", httpserver.RequireJSON, h.patch)
}

// OwnerPatch is what an owner may change of their media: its title and its visibility. Any
// other field is refused (422), as the admin route's status and duration_ms are.
type OwnerPatch struct {
	Title      *string     `json:"title"`
	Visibility *Visibility `json:"visibility"`
}

// patch serves PATCH /v1/media/{id}: the owner changes the title or the visibility of their
// media, with the admin route's checks and store write. Another member's media, like a missing
// or DELETED one, is not found.
func (h *Handler) patch(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	// The fields first: a well-formed body that names a field the owner may not change (the
	// admin route's status or duration_ms, or any other) is a 422 that names it, not a 400.
	var fields map[string]json.RawMessage
	if err := httpserver.DecodeJSON(c.Body(), &fields); err != nil {
		if apperr.CodeOf(err) == apperr.Unprocessable { // valid JSON, but no object
			return apperr.Errorf(apperr.Unprocessable, "the body must be a JSON object: give title or visibility")
		}
		return err
	}
	for name := range fields {
		if name != "title" && name != "visibility" {
			return apperr.Errorf(apperr.Unprocessable, "%.50q cannot be changed: give title or visibility", name)
		}
	}
	var op OwnerPatch
	if err := httpserver.DecodeJSON(c.Body(), &op); err != nil {
		return err
	}
	if op.Title == nil && op.Visibility == nil {
		return apperr.Errorf(apperr.Unprocessable, "nothing to change: give title or visibility")
	}
	p := Patch{Title: op.Title, Visibility: op.Visibility}
	if err := checkPatch(&p); err != nil {
		return err
	}
	out, err := h.Store.UpdateOwned(c.UserContext(), auth.From(c).MemberID, id, p)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// View is media as its viewer sees it: with playable URLs once READY. The URLs are signed for
// the viewer and expire (Links): they work without a token, in any player.
type View struct {
	Media
	HLSURL       string `json:"hls_url,omitempty"`
	ThumbnailURL string `json:"thumbnail_url,omitempty"`
	// StoryboardURL is the storyboard's WebVTT: for each stretch of the video, a tile of a
	// sprite JPEG ("…sprite_000.jpg?…#xywh=x,y,w,h"), the previews a player shows above its
	// seek bar. Absent for media encoded before storyboards.
	StoryboardURL string `json:"storyboard_url,omitempty"`
	// Chapters are the media's chapters by start, empty when it has none.
	Chapters []Chapter `json:"chapters"`
}

// get shows media the member owns (in any status) or public READY media; anything else is
// indistinguishable from missing.
func (h *Handler) get(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	member := auth.From(c).MemberID
	// The cache first: an unknown id costs one query per negative-cache window, not one per
	// request, and so does an id the member may not see.
	access, found, err := h.Access.Access(c.UserContext(), id)
	if err != nil {
		return err
	}
	if !found || (access.OwnerID != member && !access.PlayableBy(member)) {
		return apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	m, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	// The row is the truth: the cache may be a notification behind it, as for a media that
	// has just become READY. Then this node's entry goes: the playlist link this answer gives
	// is checked against the cache (ObjectsHandler), and a player that follows it at once
	// must not be refused by the older entry until the notification arrives.
	row := Access{OwnerID: m.OwnerID, DurationMS: m.DurationMS, Status: m.Status, Visibility: m.Visibility,
		Encoding: m.Status == StatusProcessing && m.Playable}
	if row != access {
		h.Access.Evict(id)
	}
	if m.OwnerID != member && !row.PlayableBy(member) {
		return apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	v := View{Media: m, Chapters: []Chapter{}}
	if h.Chapters != nil {
		if v.Chapters, err = h.Chapters.Chapters(c.UserContext(), id); err != nil {
			return err
		}
		if v.Chapters == nil {
			v.Chapters = []Chapter{}
		}
	}
	if m.Playable && m.HLSKey != "" {
		// While it encodes too: the assembled master lists the renditions done so far.
		v.HLSURL = h.Links.Playlist(member, m.HLSKey, time.Duration(m.DurationMS)*time.Millisecond)
	}
	if m.Status == StatusReady {
		if m.ThumbnailKey != "" {
			if v.ThumbnailURL, err = h.Links.File(c.UserContext(), member, m.ThumbnailKey, 0); err != nil {
				return err
			}
		}
		if m.StoryboardKey != "" {
			// Playhead's own link, like a playlist's: the file is rewritten with signed sprite
			// links for the member on every request.
			v.StoryboardURL = h.Links.Playlist(member, m.StoryboardKey, time.Duration(m.DurationMS)*time.Millisecond)
		}
	}
	// The answer holds links made for this member that expire: no cache may keep it.
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(v)
}

// Checker decides whether a member may play a media item (the media cache).
type Checker interface {
	Playable(ctx context.Context, member, mediaID int64) (Access, error)
}

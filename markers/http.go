package markers

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/captions"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// The limits on a media item's chapters.
const (
	// MaxChapters bounds the chapters of one media: a four-hour lecture in two-minute parts
	// has 120.
	MaxChapters = 500
	// MaxTitleRunes bounds a chapter's title (the migration's CHECK too).
	MaxTitleRunes = 200
)

// Handler serves PUT /v1/media/{id}/markers and PUT /v1/media/{id}/chapters, for the media's
// owner and admins (any media); anyone else gets 404, as if the media did not exist. Both are
// read back in GET /v1/media/{id}.
type Handler struct {
	Store *Store
	// Media reads the media row the markers are checked against (its duration).
	Media *media.Store
	// Access answers who may see a media id from memory (the media cache), so that a
	// stranger's request is refused before its body is read.
	Access media.AccessLookup
}

// Register adds the routes to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	router.Put("/media/:id/markers", httpserver.RequireJSON, h.putMarkers)
	router.Put("/media/:id/chapters", h.putChapters)
}

// target returns the media id of the request and the owner its writes are restricted to (0
// for an admin), or 404 for a media the member neither owns nor may administer.
func (h *Handler) target(c *fiber.Ctx) (media.Media, int64, error) {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return media.Media{}, 0, err
	}
	who := auth.From(c)
	access, found, err := h.Access.Access(c.UserContext(), id)
	if err != nil {
		return media.Media{}, 0, err
	}
	if !found || access.OwnerID != who.MemberID && !who.Admin {
		return media.Media{}, 0, apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	m, err := h.Media.Get(c.UserContext(), id)
	if err != nil {
		return media.Media{}, 0, err
	}
	owner := who.MemberID
	if who.Admin {
		owner = 0
	}
	if owner != 0 && m.OwnerID != owner {
		return media.Media{}, 0, apperr.Errorf(apperr.NotFound, "media %d not found", id)
	}
	return m, owner, nil
}

// putMarkers replaces the media's intro and credits: {"intro": {"start_ms", "end_ms"} or
// null, "credits": the same}. A field left out is null, as in any replacement.
func (h *Handler) putMarkers(c *fiber.Ctx) error {
	m, owner, err := h.target(c)
	if err != nil {
		return err
	}
	var body *Markers
	if err := httpserver.DecodeJSON(c.Body(), &body); err != nil {
		return err
	}
	if body == nil { // null: no object, not a request to remove both
		return apperr.Errorf(apperr.Unprocessable, "the body must be a JSON object: give intro and credits")
	}
	req := *body
	// A span is checked against the duration; one set while the duration is unknown could
	// exceed the duration the encode's probe then finds, whose write the CHECK would refuse.
	if m.DurationMS <= 0 && (req.Intro != nil || req.Credits != nil) {
		return apperr.Errorf(apperr.Conflict, "the duration of media %d is not known yet: mark its intro and credits once it is", m.ID)
	}
	if err := errors.Join(checkSpan("intro", req.Intro, m.DurationMS), checkSpan("credits", req.Credits, m.DurationMS),
		checkCreditsStart(req.Credits)); err != nil {
		return err
	}
	out, err := h.Store.SetMarkers(c.UserContext(), m.ID, owner, req)
	if err != nil {
		return err
	}
	return c.JSON(out)
}

// checkSpan refuses a span that is negative, ends at or before its start, or ends past the
// media's duration when it is known (durationMS > 0).
func checkSpan(name string, s *media.Span, durationMS int64) error {
	switch {
	case s == nil:
		return nil
	case s.StartMS < 0:
		return apperr.Errorf(apperr.Unprocessable, "%s.start_ms must not be negative", name)
	case s.EndMS <= s.StartMS:
		return apperr.Errorf(apperr.Unprocessable, "%s.end_ms must be after %s.start_ms", name, name)
	case durationMS > 0 && s.EndMS > durationMS:
		return apperr.Errorf(apperr.Unprocessable, "%s.end_ms is past the end of the media (%d ms)", name, durationMS)
	}
	return nil
}

// checkCreditsStart refuses credits from the very start. The resume rule reads a credits
// start of 0 as no credits (playhead_progress, media.Completion.State: 0 is also what a media
// without credits reads as), so such credits would be stored and shown but finish nothing;
// and a media that is credits throughout has no point to resume from.
func checkCreditsStart(s *media.Span) error {
	if s != nil && s.StartMS == 0 {
		return apperr.Errorf(apperr.Unprocessable, "credits.start_ms must be after the start of the media")
	}
	return nil
}

type chaptersResponse struct {
	Items []media.Chapter `json:"items"`
}

// putChapters replaces the media's chapters, given as a JSON array of {"start_ms", "title"}
// (application/json) or as a WebVTT chapters file (text/vtt: each cue's start and text). An
// empty list removes them.
func (h *Handler) putChapters(c *fiber.Ctx) error {
	mediaType, _, err := httpserver.ContentType(c, fiber.MIMEApplicationJSON, "text/vtt")
	if err != nil {
		return err
	}
	m, owner, err := h.target(c)
	if err != nil {
		return err
	}
	var chapters []media.Chapter
	if mediaType == "text/vtt" {
		chapters, err = fromWebVTT(c.Body(), m.DurationMS)
	} else {
		err = httpserver.DecodeJSON(c.Body(), &chapters)
		if err == nil && chapters == nil {
			err = apperr.Errorf(apperr.Unprocessable, "the body must be a JSON array of {\"start_ms\", \"title\"}")
		}
	}
	if err != nil {
		return err
	}
	if chapters, err = checkChapters(chapters, m.DurationMS); err != nil {
		return err
	}
	if err := h.Store.SetChapters(c.UserContext(), m.ID, owner, chapters); err != nil {
		return err
	}
	return c.JSON(chaptersResponse{Items: chapters})
}

// fromWebVTT reads a WebVTT chapters file with the captions' parser (markup, settings and
// control characters dropped): each cue is a chapter that starts at the cue's start, titled
// by its text, its lines joined by spaces.
func fromWebVTT(body []byte, durationMS int64) ([]media.Chapter, error) {
	if !bytes.HasPrefix(bytes.TrimPrefix(body, []byte("\uFEFF")), []byte("WEBVTT")) {
		return nil, apperr.Errorf(apperr.Unprocessable, "a text/vtt body must be a WebVTT file, starting with WEBVTT")
	}
	duration := time.Duration(math.MaxInt64) // unknown: any start is within it
	if durationMS > 0 {
		duration = time.Duration(durationMS) * time.Millisecond
	}
	cues, err := captions.Parse(body, duration)
	if err != nil {
		return nil, err
	}
	chapters := make([]media.Chapter, len(cues))
	for i, cue := range cues {
		chapters[i] = media.Chapter{StartMS: cue.Start.Milliseconds(), Title: strings.ReplaceAll(cue.Text, "\n", " ")}
	}
	return chapters, nil
}

// checkChapters returns chapters sorted by start with their titles trimmed, or a 422 for a
// start that is negative, past the duration when it is known, or given twice, and for a title
// that is empty, longer than MaxTitleRunes, or not one line of text (control characters, and
// U+2028 and U+2029, which JavaScript and some players read as line ends).
func checkChapters(chapters []media.Chapter, durationMS int64) ([]media.Chapter, error) {
	if len(chapters) > MaxChapters {
		return nil, apperr.Errorf(apperr.Unprocessable, "%d chapters: at most %d", len(chapters), MaxChapters)
	}
	for i := range chapters {
		c := &chapters[i]
		c.Title = strings.TrimSpace(c.Title)
		field := fmt.Sprintf("chapter %d", i+1)
		switch {
		case c.StartMS < 0:
			return nil, apperr.Errorf(apperr.Unprocessable, "%s: start_ms must not be negative", field)
		case durationMS > 0 && c.StartMS >= durationMS:
			return nil, apperr.Errorf(apperr.Unprocessable, "%s: start_ms is past the end of the media (%d ms)", field, durationMS)
		case c.Title == "":
			return nil, apperr.Errorf(apperr.Unprocessable, "%s: title is required", field)
		case utf8.RuneCountInString(c.Title) > MaxTitleRunes:
			return nil, apperr.Errorf(apperr.Unprocessable, "%s: title is longer than %d characters", field, MaxTitleRunes)
		case strings.ContainsAny(c.Title, "\u2028\u2029"):
			return nil, apperr.Errorf(apperr.Unprocessable, "%s: title must be one line (no U+2028 or U+2029)", field)
		}
		if err := httpserver.CheckText(field+": title", c.Title); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(chapters, func(a, b media.Chapter) int { return cmp.Compare(a.StartMS, b.StartMS) })
	for i := 1; i < len(chapters); i++ {
		if chapters[i].StartMS == chapters[i-1].StartMS {
			return nil, apperr.Errorf(apperr.Unprocessable, "two chapters start at %d ms", chapters[i].StartMS)
		}
	}
	return chapters, nil
}

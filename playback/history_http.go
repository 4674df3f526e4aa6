package playback

import (
	"log/slog"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// forgetParam reads DELETE /v1/playback/{mediaID}'s forget: "true" or "false" (the default).
func forgetParam(c *fiber.Ctx) (bool, error) {
	args := c.Context().QueryArgs()
	if !args.Has("forget") {
		return false, nil
	}
	switch string(args.Peek("forget")) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, apperr.Errorf(apperr.Invalid, "forget must be true or false")
}

// forget deletes the caller's row of the media for real. It needs no access to the media: a
// member may forget an item they can no longer play, and the statement touches only their own
// row (204 whether there was one or not). The key leaves this node's buffer too; a report of
// it buffered on another node is older than the tombstone and is dropped by the flush. The
// answer comes once the flushes in flight have ended and the row is deleted again (Store.Forget);
// when one outlasts ForgetWait, the answer comes without it, counted in ForgetsUnsettled and
// logged, and the forgotten_prune sweep deletes what it writes.
func (h *Handler) forget(c *fiber.Ctx) error {
	mediaID, err := httpserver.ParamID(c, "mediaID")
	if err != nil {
		return err
	}
	key := Key{Member: auth.From(c).MemberID, Media: mediaID}
	if h.Buffer != nil {
		h.Buffer.Drop(func(k Key) bool { return k == key })
	}
	settled, err := h.Store.Forget(c.UserContext(), key, now())
	if err != nil {
		return err
	}
	if !settled {
		if h.ForgetsUnsettled != nil {
			h.ForgetsUnsettled.Inc()
		}
		slog.WarnContext(c.UserContext(), "forget: a writer older than the tombstone outlasted the wait; the forgotten_prune sweep deletes what it writes",
			"member", key.Member, "media", key.Media, "wait", h.Store.forgetWait)
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// settings serves GET /v1/me/settings.
func (h *Handler) settings(c *fiber.Ctx) error {
	st, err := h.Store.Settings(c.UserContext(), auth.From(c).MemberID)
	if err != nil {
		return err
	}
	return c.JSON(st)
}

// settingsBody is PUT /v1/me/settings' body: every field is required.
type settingsBody struct {
	HistoryPaused *bool `json:"history_paused"`
}

// saveSettings serves PUT /v1/me/settings and answers the settings stored.
func (h *Handler) saveSettings(c *fiber.Ctx) error {
	var body settingsBody
	if err := httpserver.DecodeJSON(c.Body(), &body); err != nil {
		return err
	}
	if body.HistoryPaused == nil {
		return apperr.Errorf(apperr.Unprocessable, "history_paused is required")
	}
	st := Settings{HistoryPaused: *body.HistoryPaused}
	if err := h.Store.SaveSettings(c.UserContext(), auth.From(c).MemberID, st); err != nil {
		return err
	}
	return c.JSON(st)
}

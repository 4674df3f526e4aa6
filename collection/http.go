package collection

import (
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// Handler serves GET /v1/collections/{collection} and GET /v1/me/collections. Both read the
// calling member's progress only: the member id comes from the token, never from the request.
type Handler struct {
	Store *Store
	// Links signs the URLs of the encoded files for the member asking.
	Links *media.Links
}

// Register adds the collection routes to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	httpserver.Get(router, "/collections/:collection", h.get)
	httpserver.Get(router, "/me/collections", h.started)
}

// NameParam is the route's :collection parameter, unescaped (Fiber leaves path parameters
// escaped; collection names are often Korean, "레벨1") and checked by CheckName.
func NameParam(c *fiber.Ctx) (string, error) {
	name, err := url.PathUnescape(c.Params("collection"))
	if err != nil {
		name = ""
	}
	return name, CheckName("collection", name)
}

func (h *Handler) get(c *fiber.Ctx) error {
	name, err := NameParam(c)
	if err != nil {
		return err
	}
	member := auth.From(c).MemberID
	p, err := h.Store.Progress(c.UserContext(), name, member)
	if err != nil {
		return err
	}
	for i := range p.Items {
		it := &p.Items[i]
		it.HLSURL = h.Links.Playlist(member, it.HLSKey, time.Duration(it.DurationMS)*time.Millisecond)
		if it.ThumbnailKey != "" {
			if it.ThumbnailURL, err = h.Links.File(c.UserContext(), member, it.ThumbnailKey, 0); err != nil {
				return err
			}
		}
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(p)
}

type startedResponse struct {
	Collections []Summary `json:"collections"`
}

func (h *Handler) started(c *fiber.Ctx) error {
	list, err := h.Store.Started(c.UserContext(), auth.From(c).MemberID)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(startedResponse{Collections: list})
}

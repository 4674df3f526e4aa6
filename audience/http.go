package audience

import (
	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/collection"
	"github.com/playhead/playhead/httpserver"
)

// Handler serves GET /v1/media/{id}/audience and GET /v1/collections/{collection}/audience,
// for the media's owner and the admins (anyone else: 404, as if it did not exist).
type Handler struct {
	Store *Store
}

// Register adds the audience routes to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	httpserver.Get(router, "/media/:id/audience", h.media)
	httpserver.Get(router, "/collections/:collection/audience", h.collection)
}

func (h *Handler) media(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	a, err := h.Store.Media(c.UserContext(), id, auth.From(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(a)
}

func (h *Handler) collection(c *fiber.Ctx) error {
	name, err := collection.NameParam(c)
	if err != nil {
		return err
	}
	a, err := h.Store.Collection(c.UserContext(), name, auth.From(c))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	return c.JSON(a)
}

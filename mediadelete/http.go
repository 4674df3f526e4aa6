package mediadelete

import (
	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// Handler serves DELETE /v1/media/{id} (the owner) and DELETE /v1/admin/media/{id}.
type Handler struct {
	// Pool runs each deletion's transaction (Delete).
	Pool *pgxpool.Pool
}

// Register adds the owner's route to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	router.Delete("/media/:id", h.deleteOwned)
}

// RegisterAdmin adds the administrator's route to router, the /v1/admin group that requires
// the admin role.
func (h *Handler) RegisterAdmin(router fiber.Router) {
	router.Delete("/media/:id", h.deleteAny)
}

// Accepted is the answer to a deletion: the media is gone for every read, and its deletion job
// removes the rest.
type Accepted struct {
	ID     int64        `json:"id"`
	Status media.Status `json:"status"`
}

// deleteOwned deletes the caller's media; another member's is not found, like a missing one.
func (h *Handler) deleteOwned(c *fiber.Ctx) error {
	return h.delete(c, auth.From(c).MemberID)
}

func (h *Handler) deleteAny(c *fiber.Ctx) error { return h.delete(c, 0) }

func (h *Handler) delete(c *fiber.Ctx, owner int64) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	ctx := c.UserContext()
	if err := pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error { return deleteMedia(ctx, tx, id, owner) }); err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(Accepted{ID: id, Status: media.StatusDeleted})
}

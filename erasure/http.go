package erasure

import (
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// Handler serves DELETE /v1/me (a member erasing themselves) and DELETE
// /v1/admin/members/{id} (an administrator erasing anyone).
type Handler struct {
	Pool *pgxpool.Pool
	// FreshFor is how recent the token of DELETE /v1/me must be (its iat):
	// PLAYHEAD_ERASURE_FRESH_TOKEN. A token a player has held for hours, perhaps on a shared
	// device, cannot erase the account.
	FreshFor time.Duration
	// Erased is this node's Set: it learns of the erasure at once, so the caller's next
	// request here is refused without waiting for the notification. Optional.
	Erased *Set
}

// Register adds DELETE /me to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	router.Delete("/me", h.eraseSelf)
}

// RegisterAdmin adds DELETE /members/{id} to router, the /v1/admin group that requires the
// admin role.
func (h *Handler) RegisterAdmin(router fiber.Router) {
	router.Delete("/members/:id", h.eraseAny)
}

// Accepted is the answer to an erasure (202): the member is erased from the answer on (every
// token of theirs answers 401, no write of theirs is stored), and the job that deletes their
// data is queued. Erasing an erased member again is accepted the same way: the first job does
// the work.
type Accepted struct {
	MemberID int64 `json:"member_id"`
}

func (h *Handler) eraseSelf(c *fiber.Ctx) error {
	caller := auth.From(c)
	// An iat ahead of the clock by more than FreshFor counts as stale too: the age check alone
	// would let such a token erase the account for as long as it is ahead.
	if age := time.Since(caller.IssuedAt); caller.IssuedAt.IsZero() || age > h.FreshFor || age < -h.FreshFor {
		return apperr.Errorf(apperr.Unauthenticated, "erasing your account needs a token issued in the last %s: sign in again", h.FreshFor)
	}
	return h.erase(c, caller.MemberID)
}

// eraseAny erases the member named in the path, whether or not Playhead has seen them: an id
// is retired for good either way.
func (h *Handler) eraseAny(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	return h.erase(c, id)
}

func (h *Handler) erase(c *fiber.Ctx, member int64) error {
	if _, err := Erase(c.UserContext(), h.Pool, member, MaxAttempts); err != nil {
		return err
	}
	if h.Erased != nil {
		h.Erased.add([]int64{member})
	}
	return c.Status(fiber.StatusAccepted).JSON(Accepted{MemberID: member})
}

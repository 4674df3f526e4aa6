package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/egress"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// maxURLBytes bounds a webhook URL.
const maxURLBytes = 2048

// resolveTimeout bounds the DNS lookup of a URL's host at registration.
const resolveTimeout = 5 * time.Second

// AdminHandler serves /v1/admin/webhooks.
type AdminHandler struct {
	Store *Store
	// AllowPrivate lets endpoints be on loopback and private addresses (tests only;
	// PLAYHEAD_WEBHOOK_ALLOW_PRIVATE).
	AllowPrivate bool
}

// Register adds the webhook routes to router, the /v1/admin group that requires the admin
// role.
func (h *AdminHandler) Register(router fiber.Router) {
	router.Post("/webhooks", httpserver.RequireJSON, h.create)
	httpserver.Get(router, "/webhooks", h.list)
	httpserver.Get(router, "/webhooks/:id", h.get)
	router.Delete("/webhooks/:id", h.delete)
	httpserver.Get(router, "/webhooks/:id/deliveries", h.deliveries)
}

type createRequest struct {
	URL string `json:"url"`
	// Events is nil when absent: every event type. A null is refused rather than read as
	// absent (encoding/json cannot tell them apart in a slice): the document and the clients
	// generated from it have no null here, so a server that took one would accept what no
	// client can be told it may send.
	Events nullable[[]string] `json:"events"`
}

// nullable is a JSON field that records whether it was null.
type nullable[T any] struct {
	Value T
	Null  bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (n *nullable[T]) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		n.Null = true
		return nil
	}
	return json.Unmarshal(b, &n.Value)
}

// create registers an endpoint and answers it with its secret, the only time it is shown.
func (h *AdminHandler) create(c *fiber.Ctx) error {
	var req createRequest
	if err := httpserver.DecodeJSON(c.Body(), &req); err != nil {
		return err
	}
	events := req.Events.Value
	switch {
	case req.Events.Null:
		return apperr.Errorf(apperr.Invalid, "events must be a list of event types (%v), or left out for all; null is not one", media.EventTypes)
	case events == nil:
		events = media.EventTypes
	case len(events) == 0:
		return apperr.Errorf(apperr.Invalid, "events must name at least one event type (%v), or be left out for all", media.EventTypes)
	case !validEvents(events):
		return apperr.Errorf(apperr.Invalid, "events must be event types among %v", media.EventTypes)
	}
	events = slices.Compact(slices.Sorted(slices.Values(events)))
	if err := h.checkURL(c.UserContext(), req.URL); err != nil {
		return err
	}
	e, err := h.Store.Create(c.UserContext(), req.URL, events, auth.From(c).MemberID)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusCreated).JSON(e)
}

// checkURL refuses a URL that webhooks cannot or must not reach: not http(s), with
// credentials, or whose host resolves to an address that is not public (unless AllowPrivate).
// The sender checks the address again when it connects, since DNS can change in between.
func (h *AdminHandler) checkURL(ctx context.Context, raw string) error {
	if raw == "" {
		return apperr.Errorf(apperr.Invalid, "url is required")
	}
	if len(raw) > maxURLBytes {
		return apperr.Errorf(apperr.Invalid, "url is longer than %d bytes", maxURLBytes)
	}
	if !httpserver.ValidText(raw) || strings.ContainsFunc(raw, unicode.IsSpace) {
		return apperr.Errorf(apperr.Invalid, "url must be UTF-8 text without spaces or control characters (percent-encode them)")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return apperr.Errorf(apperr.Invalid, "url is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return apperr.Errorf(apperr.Invalid, "url must be an http or https URL")
	case u.User != nil:
		return apperr.Errorf(apperr.Invalid, "url must not carry credentials: the signature authenticates the sender")
	case u.Hostname() == "":
		return apperr.Errorf(apperr.Invalid, "url has no host")
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return apperr.Errorf(apperr.Invalid, "url has an invalid port %q", port)
		}
	}
	allow := egress.Public
	if h.AllowPrivate {
		allow = func(netip.Addr) bool { return true }
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	err = egress.CheckHost(ctx, u.Hostname(), allow)
	switch {
	case errors.Is(err, egress.ErrForbiddenAddress):
		return apperr.Errorf(apperr.Invalid, "url must reach a public address: %v (loopback, private and other non-global addresses are refused)", err)
	case err != nil:
		return apperr.Errorf(apperr.Invalid, "url's host does not resolve: %v", err)
	}
	return nil
}

func (h *AdminHandler) list(c *fiber.Ctx) error {
	endpoints, err := h.Store.List(c.UserContext())
	if err != nil {
		return err
	}
	if endpoints == nil {
		endpoints = []Endpoint{}
	}
	return c.JSON(fiber.Map{"webhooks": endpoints})
}

func (h *AdminHandler) get(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	e, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(e)
}

func (h *AdminHandler) delete(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.Store.Delete(c.UserContext(), id); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

func (h *AdminHandler) deliveries(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	limit, err := httpserver.QueryLimitUpTo(c, 100, 1000)
	if err != nil {
		return err
	}
	out, err := h.Store.Deliveries(c.UserContext(), id, limit)
	if err != nil {
		return err
	}
	if out == nil {
		out = []Delivery{}
	}
	return c.JSON(fiber.Map{"deliveries": out})
}

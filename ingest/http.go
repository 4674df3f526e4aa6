package ingest

import (
	"io"
	"net/url"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
)

// AdminHandler serves /v1/admin/imports.
type AdminHandler struct {
	Store *Store
}

// RegisterUpload adds POST /v1/admin/imports to router behind middleware (authentication and
// the admin role). Its body may be up to MaxFileBytes, so it must be registered before any
// group middleware that caps bodies lower.
func (h *AdminHandler) RegisterUpload(router fiber.Router, middleware ...fiber.Handler) {
	router.Post("/v1/admin/imports", append(middleware, httpserver.LimitBody(MaxFileBytes+64<<10), h.create)...)
}

// Register adds GET /imports/{id} to router, the /v1/admin group.
func (h *AdminHandler) Register(router fiber.Router) {
	router.Get("/imports/:id", h.get)
}

type createResponse struct {
	ID       int64       `json:"id"`
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Rows     []RowStatus `json:"rows"`
}

func (h *AdminHandler) create(c *fiber.Ctx) error {
	fh, err := c.FormFile("file")
	if err != nil {
		return apperr.Errorf(apperr.Invalid, "expected a multipart/form-data body with a file field (.xlsx or .csv)")
	}
	if err := httpserver.CheckText("filename", fh.Filename); err != nil {
		return err
	}
	if fh.Size > MaxFileBytes {
		return apperr.Errorf(apperr.TooLarge, "file is %d bytes, the limit is %d", fh.Size, MaxFileBytes)
	}
	f, err := fh.Open()
	if err != nil {
		return err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return err
	}
	if len(data) > MaxFileBytes {
		return apperr.Errorf(apperr.TooLarge, "file is over the limit of %d bytes", MaxFileBytes)
	}
	rows, err := Parse(fh.Filename, data)
	if err != nil {
		return err
	}
	id, err := h.Store.Create(c.UserContext(), auth.From(c).MemberID, fh.Filename, rows)
	if err != nil {
		return err
	}
	imp, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(createResponse{ID: id, Accepted: imp.Accepted, Rejected: imp.Rejected, Rows: imp.Rows})
}

func (h *AdminHandler) get(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	imp, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.JSON(imp)
}

// CollectionHandler serves GET /v1/collections/{collection}.
type CollectionHandler struct {
	Store *Store
	// Links signs the URLs of the encoded files for the member asking.
	Links *media.Links
}

// Register adds the collection route to router, the authenticated /v1 group.
func (h *CollectionHandler) Register(router fiber.Router) {
	router.Get("/collections/:collection", h.get)
}

func (h *CollectionHandler) get(c *fiber.Ctx) error {
	// Fiber leaves path parameters escaped; collection names are often Korean ("레벨1").
	name, err := url.PathUnescape(c.Params("collection"))
	if err != nil || name == "" || !httpserver.ValidText(name) {
		return apperr.Errorf(apperr.Invalid, "collection must be a URL-escaped name in UTF-8 without control characters")
	}
	items, err := h.Store.Collection(c.UserContext(), name)
	if err != nil {
		return err
	}
	member := auth.From(c).MemberID
	for i := range items {
		items[i].HLSURL = h.Links.Playlist(member, items[i].HLSKey, time.Duration(items[i].DurationMS)*time.Millisecond)
		if items[i].ThumbnailKey != "" {
			if items[i].ThumbnailURL, err = h.Links.File(c.UserContext(), member, items[i].ThumbnailKey, 0); err != nil {
				return err
			}
		}
	}
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	if items == nil {
		items = []Placed{}
	}
	return c.JSON(fiber.Map{"collection": name, "items": items})
}

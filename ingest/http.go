package ingest

import (
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// AdminHandler serves /v1/admin/imports.
type AdminHandler struct {
	Store *Store
	// Sheets fetches the spreadsheet of a Google Sheets link posted as {"sheet_url": …}.
	Sheets SheetLinks
}

// RegisterUpload adds POST /v1/admin/imports to router behind middleware (authentication and
// the admin role). Its body may be up to MaxFileBytes, so it must be registered before any
// group middleware that caps bodies lower.
func (h *AdminHandler) RegisterUpload(router fiber.Router, middleware ...fiber.Handler) {
	router.Post("/v1/admin/imports", append(middleware, httpserver.LimitBody(MaxFileBytes+64<<10), h.create)...)
}

// Register adds GET /imports/{id} to router, the /v1/admin group.
func (h *AdminHandler) Register(router fiber.Router) {
	httpserver.Get(router, "/imports/:id", h.get)
}

type createResponse struct {
	ID       int64       `json:"id,omitempty"`
	DryRun   bool        `json:"dry_run,omitempty"`
	Sheet    string      `json:"sheet,omitempty"`
	Accepted int         `json:"accepted"`
	Rejected int         `json:"rejected"`
	Rows     []RowStatus `json:"rows"`
}

// create imports a sheet, uploaded as a multipart file or linked as {"sheet_url": …}; with
// ?dry_run=true it parses and checks it the same way and answers 200 with what the import
// would do, writing nothing.
func (h *AdminHandler) create(c *fiber.Ctx) error {
	dryRun, err := queryBool(c, "dry_run")
	if err != nil {
		return err
	}
	mediaType, _, err := httpserver.ContentType(c, fiber.MIMEMultipartForm, fiber.MIMEApplicationJSON)
	if err != nil {
		return err
	}
	var filename string
	var data []byte
	if mediaType == fiber.MIMEApplicationJSON {
		filename, data, err = h.linkedSheet(c)
	} else {
		filename, data, err = uploadedFile(c)
	}
	if err != nil {
		return err
	}
	sheet, err := Parse(filename, data)
	if err != nil {
		return err
	}
	if dryRun {
		return c.JSON(preview(sheet))
	}
	id, err := h.Store.Create(c.UserContext(), auth.From(c).MemberID, filename, sheet)
	if err != nil {
		return err
	}
	imp, err := h.Store.Get(c.UserContext(), id)
	if err != nil {
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(createResponse{ID: id, Sheet: imp.Sheet, Accepted: imp.Accepted, Rejected: imp.Rejected, Rows: imp.Rows})
}

// queryBool reads an optional true/false query parameter.
func queryBool(c *fiber.Ctx, name string) (bool, error) {
	switch v := c.Query(name); v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	default:
		return false, apperr.Errorf(apperr.Invalid, "%s must be true or false, got %q", name, v)
	}
}

// linkedSheet fetches the spreadsheet of the body's sheet_url.
func (h *AdminHandler) linkedSheet(c *fiber.Ctx) (string, []byte, error) {
	var body struct {
		SheetURL string `json:"sheet_url"`
	}
	// The route takes file-sized bodies; a link needs a few hundred bytes.
	if len(c.Body()) > 8<<10 {
		return "", nil, apperr.Errorf(apperr.TooLarge, "a JSON body of a sheet_url is at most 8 KiB")
	}
	if err := httpserver.DecodeJSON(c.Body(), &body); err != nil {
		return "", nil, err
	}
	if len(body.SheetURL) > 2048 {
		return "", nil, apperr.Errorf(apperr.Invalid, "sheet_url is longer than 2048 characters")
	}
	return h.Sheets.Fetch(c.UserContext(), body.SheetURL)
}

// uploadedFile returns the name and bytes of the multipart body's file field.
func uploadedFile(c *fiber.Ctx) (string, []byte, error) {
	fh, err := c.FormFile("file")
	if err != nil {
		return "", nil, apperr.Errorf(apperr.Invalid, "expected a multipart/form-data body with a file field (.xlsx or .csv)")
	}
	if err := httpserver.CheckText("filename", fh.Filename); err != nil {
		return "", nil, err
	}
	if fh.Size > MaxFileBytes {
		return "", nil, apperr.Errorf(apperr.TooLarge, "file is %d bytes, the limit is %d", fh.Size, MaxFileBytes)
	}
	f, err := fh.Open()
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return "", nil, err
	}
	if len(data) > MaxFileBytes {
		return "", nil, apperr.Errorf(apperr.TooLarge, "file is over the limit of %d bytes", MaxFileBytes)
	}
	return fh.Filename, data, nil
}

// preview is what importing sheet would do: each row ACCEPTED (it would get a media item and
// an ingest job) or REJECTED with its reason.
func preview(sheet Sheet) createResponse {
	out := createResponse{DryRun: true, Sheet: sheet.Name, Rows: make([]RowStatus, 0, len(sheet.Rows))}
	for _, r := range sheet.Rows {
		rs := RowStatus{Row: r.Number, Collection: r.Collection, VideoURL: r.VideoURL, Label: r.Label, State: StateAccepted}
		if r.Reject != "" {
			rs.State, rs.Reason = StateRejected, r.Reject
			out.Rejected++
		} else {
			rs.Chapter, rs.Order = &r.Chapter, &r.Order
			out.Accepted++
		}
		out.Rows = append(out.Rows, rs)
	}
	return out
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

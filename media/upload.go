package media

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"path/filepath"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/storage"
)

// UploadHandler serves POST /v1/media: a multipart upload streamed straight into storage. It
// counts against Limits from the body's first byte, so the route must be one of the app's
// first-byte routes (UploadRoute in httpserver.Config.FirstByteRoutes).
type UploadHandler struct {
	Pool  *pgxpool.Pool
	Store storage.Store
	// MaxBytes bounds one upload's body.
	MaxBytes int64
	// Limits are the node's upload limits, shared with the resumable uploads' PATCHes. Nil:
	// limits of this handler's own, with their defaults.
	Limits *UploadLimits
	// Commit ends the upload: its encode job's kind and attempts.
	Commit Committer
}

// UploadRoute is POST /v1/media, a first-byte route of the public app.
var UploadRoute = httpserver.Route{Method: fiber.MethodPost, Path: "/v1/media"}

// Register adds UploadRoute to router, the app, behind the given middleware
// (authentication). It must come before any middleware that reads bodies into memory.
func (h *UploadHandler) Register(router fiber.Router, middleware ...fiber.Handler) {
	if h.Limits == nil {
		h.Limits = &UploadLimits{}
	}
	h.Limits.withDefaults()
	router.Add(UploadRoute.Method, UploadRoute.Path, append(middleware, h.upload)...)
}

type uploadResponse struct {
	ID     int64  `json:"id"`
	Status Status `json:"status"`
	Title  string `json:"title"`
}

// upload reads the multipart body as a stream: the file part is copied to storage in small
// chunks and never sits in memory, so the heap stays flat for a 2 GiB upload. The media row
// and its encode job are inserted in one transaction after the file is stored.
func (h *UploadHandler) upload(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	if cl := c.Request().Header.ContentLength(); cl > 0 && int64(cl) > h.MaxBytes {
		return apperr.Errorf(apperr.TooLarge, "upload is %d bytes, the limit is %d", cl, h.MaxBytes)
	}
	_, params, err := httpserver.ContentType(c, fiber.MIMEMultipartForm)
	if err != nil {
		return err
	}
	if params["boundary"] == "" {
		return apperr.Errorf(apperr.Invalid, "expected a multipart/form-data body with a file field")
	}
	release, err := h.Limits.Acquire(c, member, "")
	if err != nil {
		return err
	}
	defer release()
	limited := &limitedReader{r: h.Limits.Body(c, httpserver.BodyStream(c)), left: h.MaxBytes}

	ctx := c.UserContext()
	var form uploadForm
	err = h.readForm(ctx, multipart.NewReader(limited, params["boundary"]), &form)
	if form.sourceKey != "" && err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
	}
	if errors.Is(err, errTooLarge) {
		return apperr.Errorf(apperr.TooLarge, "upload is over the limit of %d bytes", h.MaxBytes)
	}
	if cut := h.Limits.uploadCutError(err); cut != nil {
		return cut
	}
	if err != nil {
		return err
	}

	var id int64
	err = pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		id, err = h.Commit.Commit(ctx, tx, Upload{Owner: member, Details: form.details, SourceKey: form.sourceKey})
		return err
	})
	if err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(uploadResponse{ID: id, Status: StatusProcessing, Title: form.details.Title})
}

// uploadForm is what readForm found in the body: the fields as sent, then the details made of
// them.
type uploadForm struct {
	title, fileName, visibility string
	details                     UploadDetails
	sourceKey                   string
	size                        int64
}

// maxFieldBytes bounds the text fields of an upload form.
const maxFieldBytes = 2048

func (h *UploadHandler) readForm(ctx context.Context, mr *multipart.Reader, form *uploadForm) error {
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if bodyLimitHit(err) {
				return err
			}
			return apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
		}
		switch part.FormName() {
		case "file":
			if form.sourceKey != "" {
				return apperr.Errorf(apperr.Invalid, "one file per upload")
			}
			form.fileName = part.FileName()
			form.sourceKey = "uploads/" + randomID() + "/source"
			src := &recordingReader{r: part}
			n, err := h.Store.Put(ctx, form.sourceKey, src)
			switch {
			case bodyLimitHit(src.err):
				return src.err
			case src.err != nil:
				// The client's body broke off or is not valid multipart: its fault, not ours.
				return apperr.Errorf(apperr.Invalid, "reading the uploaded file: %v", src.err)
			case err != nil:
				return fmt.Errorf("store upload: %w", err)
			}
			form.size = n
		case "title", "visibility":
			raw, err := io.ReadAll(io.LimitReader(part, maxFieldBytes+1))
			if bodyLimitHit(err) {
				return err
			}
			if err != nil {
				return apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
			}
			if len(raw) > maxFieldBytes {
				return apperr.Errorf(apperr.Unprocessable, "%s is too long", part.FormName())
			}
			if part.FormName() == "title" {
				form.title = string(raw)
			} else {
				form.visibility = string(raw)
			}
		default:
			return apperr.Errorf(apperr.Invalid, "unknown form field %q (expected file, title, visibility)", part.FormName())
		}
	}
	switch {
	case form.sourceKey == "":
		return apperr.Errorf(apperr.Unprocessable, "file is required")
	case form.size == 0:
		return apperr.Errorf(apperr.Unprocessable, "file is empty")
	}
	var err error
	form.details, err = ParseUploadDetails(form.title, form.fileName, form.visibility)
	return err
}

var errTooLarge = errors.New("upload over the size limit")

// bodyLimitHit reports whether err is one of the upload's own limits (size, silence, total
// time), which upload turns into 413 or 408, rather than a malformed body.
func bodyLimitHit(err error) bool {
	return errors.Is(err, errTooLarge) || errors.Is(err, ErrUploadStalled) || errors.Is(err, ErrUploadTooSlow)
}

// limitedReader fails with errTooLarge once more than left bytes were read, instead of
// silently truncating like io.LimitReader.
type limitedReader struct {
	r    io.Reader
	left int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, errTooLarge
	}
	return n, err
}

// recordingReader remembers the first read error other than io.EOF, so a failed Put can be
// told apart: the client's body failed, or storage did.
type recordingReader struct {
	r   io.Reader
	err error
}

func (r *recordingReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && r.err == nil {
		r.err = err
	}
	return n, err
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

package encodejobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

// UploadHandler serves POST /v1/media: a multipart upload streamed straight into storage.
type UploadHandler struct {
	Pool  *pgxpool.Pool
	Store storage.Store
	// MaxBytes bounds one upload's body.
	MaxBytes int64
	// Timeout is how long one upload may take to arrive (the server's read timeout is far
	// shorter, to keep slow clients off every other route).
	Timeout time.Duration
	// MaxAttempts is the encode job's attempt limit.
	MaxAttempts int
}

// Register adds POST /v1/media to router behind the given middleware (authentication). It
// must come before any middleware that reads bodies into memory.
func (h *UploadHandler) Register(router fiber.Router, middleware ...fiber.Handler) {
	router.Post("/v1/media", append(middleware, h.upload)...)
}

type uploadResponse struct {
	ID     int64        `json:"id"`
	Status media.Status `json:"status"`
}

// upload reads the multipart body as a stream: the file part is copied to storage in small
// chunks and never sits in memory, so the heap stays flat for a 2 GiB upload. The media row
// and its encode job are inserted in one transaction after the file is stored.
func (h *UploadHandler) upload(c *fiber.Ctx) error {
	member := auth.From(c).MemberID
	if cl := c.Request().Header.ContentLength(); cl > 0 && int64(cl) > h.MaxBytes {
		return apperr.Errorf(apperr.TooLarge, "upload is %d bytes, the limit is %d", cl, h.MaxBytes)
	}
	mediaType, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || mediaType != fiber.MIMEMultipartForm || params["boundary"] == "" {
		return apperr.Errorf(apperr.Invalid, "expected a multipart/form-data body with a file field")
	}
	if conn := c.Context().Conn(); conn != nil && h.Timeout > 0 {
		_ = conn.SetReadDeadline(time.Now().Add(h.Timeout))
	}
	var body io.Reader = c.Context().RequestBodyStream()
	if body == nil {
		body = bytes.NewReader(c.Body())
	}
	limited := &limitedReader{r: body, left: h.MaxBytes}

	ctx := c.UserContext()
	form := uploadForm{visibility: media.VisibilityPrivate}
	err = h.readForm(ctx, multipart.NewReader(limited, params["boundary"]), &form)
	if form.sourceKey != "" && err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
	}
	if errors.Is(err, errTooLarge) {
		return apperr.Errorf(apperr.TooLarge, "upload is over the limit of %d bytes", h.MaxBytes)
	}
	if err != nil {
		return err
	}

	id, err := h.createMedia(ctx, member, form)
	if err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(uploadResponse{ID: id, Status: media.StatusProcessing})
}

type uploadForm struct {
	title      string
	visibility media.Visibility
	sourceKey  string
	size       int64
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
			if errors.Is(err, errTooLarge) {
				return err
			}
			return apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
		}
		switch part.FormName() {
		case "file":
			if form.sourceKey != "" {
				return apperr.Errorf(apperr.Invalid, "one file per upload")
			}
			if form.title == "" {
				form.title = titleFromFileName(part.FileName())
			}
			form.sourceKey = "uploads/" + randomID() + "/source"
			src := &recordingReader{r: part}
			n, err := h.Store.Put(ctx, form.sourceKey, src)
			switch {
			case errors.Is(src.err, errTooLarge):
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
			if err != nil {
				return apperr.Errorf(apperr.Invalid, "malformed multipart body: %v", err)
			}
			if len(raw) > maxFieldBytes {
				return apperr.Errorf(apperr.Unprocessable, "%s is too long", part.FormName())
			}
			if part.FormName() == "title" {
				form.title = strings.TrimSpace(string(raw))
			} else {
				form.visibility = media.Visibility(strings.ToUpper(strings.TrimSpace(string(raw))))
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
	case !form.visibility.Valid():
		return apperr.Errorf(apperr.Unprocessable, "visibility must be PUBLIC or PRIVATE")
	case utf8.RuneCountInString(form.title) > media.MaxTitleRunes:
		return apperr.Errorf(apperr.Unprocessable, "title must be at most %d characters", media.MaxTitleRunes)
	}
	if err := httpserver.CheckText("title", form.title); err != nil {
		return err
	}
	if form.title == "" {
		form.title = "untitled"
	}
	return nil
}

// titleFromFileName makes a title of an uploaded file's name when the form gave none: the name
// without its extension, with what cannot be a title (invalid UTF-8, control characters)
// dropped, and at most MaxTitleRunes long. A file name is the client's to choose, so it never
// fails the upload.
func titleFromFileName(name string) string {
	name = strings.ToValidUTF8(strings.TrimSuffix(name, filepath.Ext(name)), "")
	name = strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, name))
	if runes := []rune(name); len(runes) > media.MaxTitleRunes {
		name = string(runes[:media.MaxTitleRunes])
	}
	return name
}

// createMedia inserts the media row and its encode job in one transaction: either both exist
// or neither does.
func (h *UploadHandler) createMedia(ctx context.Context, member int64, form uploadForm) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		if err := media.EnsureMember(ctx, tx, member); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
			INSERT INTO media (owner_id, title, status, visibility, source_key)
			VALUES ($1, $2, 'PROCESSING', $3, $4) RETURNING id`, member, form.title, form.visibility, form.sourceKey).Scan(&id)
		if err != nil {
			return err
		}
		if err := media.NotifyChanged(ctx, tx, id); err != nil { // evicts a cached "no such media"
			return err
		}
		_, err = Enqueue(ctx, tx, KindEncode, id, h.MaxAttempts)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("create uploaded media: %w", err)
	}
	return id, nil
}

var errTooLarge = errors.New("upload over the size limit")

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

// AdminHandler serves /v1/admin/jobs.
type AdminHandler struct {
	Queue *Queue
}

// Register adds the admin job routes to router, the /v1/admin group.
func (h *AdminHandler) Register(router fiber.Router) {
	router.Get("/jobs", h.list)
	router.Post("/jobs/:id/retry", h.retry)
}

func (h *AdminHandler) list(c *fiber.Ctx) error {
	status := Status(strings.ToUpper(c.Query("status")))
	switch status {
	case "", StatusPending, StatusProcessing, StatusCompleted, StatusDead:
	default:
		return apperr.Errorf(apperr.Invalid, "status must be PENDING, PROCESSING, COMPLETED or DEAD")
	}
	limit := 100
	if raw := c.Query("limit"); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 || n > 1000 {
			return apperr.Errorf(apperr.Invalid, "limit must be an integer from 1 to 1000")
		}
		limit = n
	}
	rows, err := h.Queue.List(c.UserContext(), status, limit)
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []Row{}
	}
	return c.JSON(fiber.Map{"jobs": rows})
}

func (h *AdminHandler) retry(c *fiber.Ctx) error {
	id, err := httpserver.ParamID(c, "id")
	if err != nil {
		return err
	}
	if err := h.Queue.RetryDead(c.UserContext(), id); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusAccepted)
}

package media

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/storage"
)

// UploadHandler serves POST /v1/media: a multipart upload streamed straight into storage.
//
// An upload holds a connection, a file descriptor and a storage write for as long as its client
// takes, so a member could once hold hundreds by trickling a byte every few seconds (finding 4
// of issue 11). Uploads are limited in number, per member and on the node, and an upload that
// sends nothing for IdleTimeout is cut. The limits apply when the handler runs, so the route
// must be one of the app's first-byte routes (UploadRoute in httpserver.Config.FirstByteRoutes):
// otherwise fasthttp reads 8 KiB of each body first, and uploads that trickle those are never
// counted (issue 30).
type UploadHandler struct {
	Pool  *pgxpool.Pool
	Store storage.Store
	// MaxBytes bounds one upload's body.
	MaxBytes int64
	// IdleTimeout cuts an upload whose client sends nothing for this long (408). A slow but
	// steady upload is never cut by it. Default 30 s.
	IdleTimeout time.Duration
	// Timeout is how long one whole upload may take to arrive (408 beyond). The server's read
	// timeout is far shorter, to keep slow clients off every other route. Default 1 h.
	Timeout time.Duration
	// MaxPerMember and MaxTotal bound the uploads in progress on this node, of one member and
	// of everyone; beyond them POST answers 429 with Retry-After. Defaults 2 and 32.
	MaxPerMember, MaxTotal int
	// JobKind is the kind of the job enqueued for each upload (encodejobs.KindEncode, wired by
	// cmd/api: the catalogue does not know how media is encoded).
	JobKind string
	// MaxAttempts is that job's attempt limit.
	MaxAttempts int

	slots uploadSlots
}

// UploadRoute is POST /v1/media, a first-byte route of the public app.
var UploadRoute = httpserver.Route{Method: fiber.MethodPost, Path: "/v1/media"}

// Register adds UploadRoute to router, the app, behind the given middleware
// (authentication), after filling in the defaults of zero fields. It must come before any
// middleware that reads bodies into memory.
func (h *UploadHandler) Register(router fiber.Router, middleware ...fiber.Handler) {
	h.IdleTimeout, h.Timeout = cmp.Or(h.IdleTimeout, 30*time.Second), cmp.Or(h.Timeout, time.Hour)
	h.MaxPerMember, h.MaxTotal = cmp.Or(h.MaxPerMember, 2), cmp.Or(h.MaxTotal, 32)
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
	release, ok := h.slots.acquire(member, h.MaxPerMember, h.MaxTotal)
	if !ok {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(int(uploadRetryAfter/time.Second)))
		return apperr.Errorf(apperr.TooManyRequests, "too many uploads in progress; try again when one has finished")
	}
	defer release()
	body := httpserver.BodyStream(c)
	if conn := c.Context().Conn(); conn != nil {
		body = &idleReader{r: body, conn: conn, idle: h.IdleTimeout, deadline: time.Now().Add(h.Timeout)}
	}
	limited := &limitedReader{r: body, left: h.MaxBytes}

	ctx := c.UserContext()
	form := uploadForm{visibility: VisibilityPrivate}
	err = h.readForm(ctx, multipart.NewReader(limited, params["boundary"]), &form)
	if form.sourceKey != "" && err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
	}
	switch {
	case errors.Is(err, errTooLarge):
		return apperr.Errorf(apperr.TooLarge, "upload is over the limit of %d bytes", h.MaxBytes)
	case errors.Is(err, errStalled):
		return apperr.Errorf(apperr.Timeout, "the upload sent nothing for %s", h.IdleTimeout)
	case errors.Is(err, errTooSlow):
		return apperr.Errorf(apperr.Timeout, "the upload took longer than %s", h.Timeout)
	case err != nil:
		return err
	}

	id, err := h.createMedia(ctx, member, form)
	if err != nil {
		_ = h.Store.DeletePrefix(context.WithoutCancel(ctx), filepath.Dir(form.sourceKey)+"/")
		return err
	}
	return c.Status(fiber.StatusAccepted).JSON(uploadResponse{ID: id, Status: StatusProcessing, Title: form.title})
}

type uploadForm struct {
	title      string
	visibility Visibility
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
			if form.title == "" {
				form.title = titleFromFileName(part.FileName())
			}
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
				form.title = strings.TrimSpace(string(raw))
			} else {
				form.visibility = Visibility(strings.ToUpper(strings.TrimSpace(string(raw))))
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
	case utf8.RuneCountInString(form.title) > MaxTitleRunes:
		return apperr.Errorf(apperr.Unprocessable, "title must be at most %d characters", MaxTitleRunes)
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
	if runes := []rune(name); len(runes) > MaxTitleRunes {
		name = string(runes[:MaxTitleRunes])
	}
	return name
}

// createMedia inserts the media row and its job in one transaction: either both exist
// or neither does.
func (h *UploadHandler) createMedia(ctx context.Context, member int64, form uploadForm) (int64, error) {
	var id int64
	err := pgx.BeginFunc(ctx, h.Pool, func(tx pgx.Tx) error {
		if err := EnsureMember(ctx, tx, member); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `
			INSERT INTO media (owner_id, title, status, visibility, source_key)
			VALUES ($1, $2, 'PROCESSING', $3, $4) RETURNING id`, member, form.title, form.visibility, form.sourceKey).Scan(&id)
		if err != nil {
			return err
		}
		if err := NotifyChanged(ctx, tx, id); err != nil { // evicts a cached "no such media"
			return err
		}
		_, err = jobqueue.Enqueue(ctx, tx, h.JobKind, id, h.MaxAttempts)
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

// uploadRetryAfter is the Retry-After of a refused upload: a guess, since how long the uploads
// in progress take is up to their clients; long enough not to invite a retry storm.
const uploadRetryAfter = 10 * time.Second

// uploadSlots counts the uploads in progress, per member and in total.
type uploadSlots struct {
	mu        sync.Mutex
	total     int
	perMember map[int64]int
}

// acquire takes a slot for member unless it already holds perMember or everyone holds total;
// release gives it back.
func (s *uploadSlots) acquire(member int64, perMember, total int) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.perMember == nil {
		s.perMember = map[int64]int{}
	}
	if s.total >= total || s.perMember[member] >= perMember {
		return nil, false
	}
	s.total++
	s.perMember[member]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total--
			if s.perMember[member]--; s.perMember[member] == 0 {
				delete(s.perMember, member)
			}
		})
	}, true
}

var (
	errStalled = errors.New("upload sent nothing for the idle timeout")
	errTooSlow = errors.New("upload took longer than its time limit")
)

// bodyLimitHit reports whether err is one of the upload's own limits (size, silence, total
// time), which upload turns into 413 or 408, rather than a malformed body.
func bodyLimitHit(err error) bool {
	return errors.Is(err, errTooLarge) || errors.Is(err, errStalled) || errors.Is(err, errTooSlow)
}

// idleReader reads the request body with a read deadline pushed forward before every read:
// a client that sends nothing for idle is cut (errStalled), one that keeps sending however
// slowly is not, up to the upload's absolute deadline (errTooSlow).
type idleReader struct {
	r        io.Reader
	conn     net.Conn
	idle     time.Duration
	deadline time.Time
}

func (r *idleReader) Read(p []byte) (int, error) {
	next, cause := time.Now().Add(r.idle), errStalled
	if r.deadline.Before(next) {
		next, cause = r.deadline, errTooSlow
	}
	if err := r.conn.SetReadDeadline(next); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		err = cause
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

// Package export is GET /v1/me/export: everything Playhead holds about the caller, as one JSON
// document, or their viewing activity as CSV (?format=csv). The answer is streamed: each list
// is read a page at a time by its key (keyset pagination), each page in a short read-only
// transaction, and written as it is read, so an export holds about one page in memory whatever
// the member's history, and holds neither a connection nor a snapshot while its client reads.
package export

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/apperr"
	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/httpserver"
)

// Route is the export's path under /v1.
const Route = "/me/export"

// MaxRunning is how many exports one node streams at once, one per member at most: each reads
// the database a page at a time for as long as its client takes, and a member asking again
// and again must not multiply that.
const MaxRunning = 4

// Timeout bounds one export, its client's reading included: a client that reads a byte at a
// time must not hold its place (MaxRunning) for ever.
const Timeout = 10 * time.Minute

// retryAfterSeconds is the Retry-After of an export refused because MaxRunning are running.
const retryAfterSeconds = 10

// Handler serves the export to the caller, of their own data only.
type Handler struct {
	pool         *pgxpool.Pool
	writeTimeout time.Duration
	logger       *slog.Logger

	mu      sync.Mutex
	running map[int64]bool // members with an export streaming; written under mu by requests and streams
}

// NewHandler returns a Handler reading pool; writeTimeout bounds each write to a client (as the
// server's own write timeout does for other answers).
func NewHandler(pool *pgxpool.Pool, writeTimeout time.Duration, logger *slog.Logger) *Handler {
	return &Handler{pool: pool, writeTimeout: writeTimeout, logger: logger, running: map[int64]bool{}}
}

// Register adds GET /v1/me/export to router, the authenticated /v1 group.
func (h *Handler) Register(router fiber.Router) {
	httpserver.Get(router, Route, h.export)
}

func (h *Handler) export(c *fiber.Ctx) error {
	format := c.Query("format", "json")
	if format != "json" && format != "csv" {
		return apperr.Errorf(apperr.Unprocessable, "format must be json or csv, got %q", httpserver.Excerpt(format))
	}
	member := auth.From(c).MemberID
	if err := h.acquire(member); err != nil {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retryAfterSeconds))
		return err
	}
	// The stream runs after this handler returns: its context is the request's (cancelled when
	// the node stops), bounded by Timeout.
	ctx, cancel := context.WithTimeout(c.UserContext(), Timeout)
	end := func() {
		cancel()
		h.release(member)
	}
	head, err := readHeader(ctx, h.pool, member)
	if err != nil {
		end()
		return err
	}
	filename := jsonFilename(member)
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	if format == "csv" {
		filename = csvFilename(member)
		c.Set(fiber.HeaderContentType, "text/csv; charset=utf-8")
	}
	c.Set(fiber.HeaderContentDisposition, `attachment; filename="`+filename+`"`)
	c.Set(fiber.HeaderCacheControl, "private, no-store")
	conn := c.Context().Conn()
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		defer end()
		flush := func() error {
			if err := conn.SetWriteDeadline(time.Now().Add(h.writeTimeout)); err != nil {
				return errors.Join(errClient, err)
			}
			if err := w.Flush(); err != nil {
				return errors.Join(errClient, err)
			}
			return nil
		}
		var err error
		if format == "csv" {
			err = writeCSV(ctx, h.pool, w, member, flush)
		} else {
			err = writeJSON(ctx, h.pool, w, head, flush)
		}
		if err != nil {
			h.abort(conn, member, err)
		}
	})
	return nil
}

// abort ends an export that failed part way. Its status and part of its body are sent: closing
// the connection before the chunked body's end is what tells the client that it is cut short
// (a cut CSV would otherwise read as a shorter history).
func (h *Handler) abort(conn net.Conn, member int64, err error) {
	_ = conn.Close()
	if !errors.Is(err, errClient) {
		h.logger.Error("export failed part way; the connection is closed", "member", member, "err", err)
	}
}

// errClient marks a failure to write to the client (gone, or too slow): not worth a log line.
var errClient = errors.New("writing the answer")

// acquire takes member's place among the running exports, or says why not (429).
func (h *Handler) acquire(member int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[member] {
		return apperr.Errorf(apperr.TooManyRequests, "an export of yours is already being sent; wait for it to end")
	}
	if len(h.running) >= MaxRunning {
		return apperr.Errorf(apperr.TooManyRequests, "too many exports are being sent; try again later")
	}
	h.running[member] = true
	return nil
}

func (h *Handler) release(member int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.running, member)
}

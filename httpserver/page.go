package httpserver

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/apperr"
)

// The page size of the paged lists (GET /v1/playback, GET /v1/media?owner=me).
const (
	DefaultPageLimit = 20
	MaxPageLimit     = 100
)

// PageCursor is where a page of a list ordered by (time DESC, id DESC) ends: the last row's
// time and id.
type PageCursor struct {
	Time time.Time
	ID   int64
}

// QueryLimit reads the limit query parameter of a paged list: DefaultPageLimit when absent,
// else an integer from 1 to MaxPageLimit.
func QueryLimit(c *fiber.Ctx) (int, error) {
	return QueryLimitUpTo(c, DefaultPageLimit, MaxPageLimit)
}

// QueryLimitUpTo reads the limit query parameter: def when absent, else an integer from 1 to
// most.
func QueryLimitUpTo(c *fiber.Ctx, def, most int) (int, error) {
	raw := c.Query("limit")
	if raw == "" {
		return def, nil
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > most {
		return 0, apperr.Errorf(apperr.Invalid, "limit must be an integer from 1 to %d", most)
	}
	return n, nil
}

// QueryCursor reads the cursor query parameter: nil when absent (the first page).
func QueryCursor(c *fiber.Ctx) (*PageCursor, error) {
	raw := c.Query("cursor")
	if raw == "" {
		return nil, nil
	}
	cur, err := DecodeCursor(raw)
	if err != nil {
		return nil, err
	}
	return &cur, nil
}

// EncodeCursor makes an opaque page cursor.
func EncodeCursor(c PageCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%d", c.Time.UnixMicro(), c.ID))
}

// DecodeCursor reads a cursor made by EncodeCursor.
func DecodeCursor(s string) (PageCursor, error) {
	bad := apperr.Errorf(apperr.Invalid, "cursor is not one this server issued")
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return PageCursor{}, bad
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	if !ok {
		return PageCursor{}, bad
	}
	us, err1 := strconv.ParseInt(micros, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if err1 != nil || err2 != nil || n <= 0 {
		return PageCursor{}, bad
	}
	return PageCursor{Time: time.UnixMicro(us).UTC(), ID: n}, nil
}

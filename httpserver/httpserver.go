// Package httpserver builds Playhead's public Fiber app and its metrics listener: the one
// error-to-status mapping, request metrics, health and readiness, and the helpers handlers use
// to read ids and JSON bodies.
package httpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/apperr"
)

// Config configures the public app.
type Config struct {
	// BodyLimit is the largest request body LimitBody lets a handler read into memory, in
	// bytes. Routes that stream (uploads) are registered before LimitBody and set their own.
	BodyLimit int
	// ReadTimeout, WriteTimeout and IdleTimeout bound slow clients.
	ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// Logger receives 5xx errors.
	Logger *slog.Logger
	// Metrics records every request. Optional.
	Metrics *Metrics
	// RequestContext is every request's context (c.UserContext()): cancelling it ends the
	// database calls of the requests still running, so a stop cannot wait on a database that
	// does not answer. Default context.Background().
	RequestContext context.Context
	// FirstByteRoutes are the routes whose handler must run as soon as a body starts to
	// arrive, not once fasthttp has read its first 8 KiB: uploads, whose limits on uploads in
	// progress must hold against a client that trickles its body from the first byte. Their
	// handlers read the body through BodyStream, and the connection is closed after each of
	// their requests with a body. Paths match as Fiber routes them (any letter case, trailing
	// slashes ignored); parameters are not supported, but a route may cover every path under
	// its own (Route.Under).
	FirstByteRoutes []Route
	// CORSOrigins are the other origins whose pages may call the app (CORS), in ParseOrigins'
	// form; none: no answer carries a CORS header.
	CORSOrigins []string
}

// New returns the public Fiber app with Playhead's error handler and request metrics.
//
// Request bodies are streamed (fasthttp's StreamRequestBody), so an upload never sits in the
// heap. That also means fasthttp does not refuse large bodies by itself: every route that
// reads a body must sit behind LimitBody or enforce its own limit. A connection is kept after
// a request with a body only when LimitBody read that body to its end; any other answer to it
// closes the connection, so that unread body bytes are never read as requests.
func New(cfg Config) *fiber.App {
	app := fiber.New(fiber.Config{
		BodyLimit:                    cfg.BodyLimit,
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
		ReadTimeout:                  cfg.ReadTimeout,
		WriteTimeout:                 cfg.WriteTimeout,
		IdleTimeout:                  cfg.IdleTimeout,
		DisableStartupMessage:        true,
		ErrorHandler:                 ErrorHandler(cfg.Logger),
	})
	// Around Fiber's handler rather than a middleware: Fiber answers some requests (an
	// unknown method) before any middleware runs.
	srv := app.Server()
	srv.ErrorHandler = withoutRequestEcho(srv.ErrorHandler)
	f := newFraming(srv.MaxRequestBodySize, cfg.FirstByteRoutes)
	srv.Handler = f.handler(srv.Handler)
	if len(f.firstByte) > 0 {
		srv.HeaderReceived = f.headerReceived
	}
	app.Use(noSniff)
	if ctx := cfg.RequestContext; ctx != nil {
		app.Use(func(c *fiber.Ctx) error {
			c.SetUserContext(ctx)
			return c.Next()
		})
	}
	if cfg.Metrics != nil {
		app.Use(cfg.Metrics.middleware)
	}
	if len(cfg.CORSOrigins) > 0 {
		app.Use(CORS(cfg.CORSOrigins))
	}
	return app
}

// withoutRequestEcho wraps fasthttp's handler of requests it cannot parse: fasthttp's error
// text ends with up to its whole read buffer (". Buffer size=…, contents: …"), the request's
// headers, a bearer token among them, and Fiber answers it as the 400's message. Behind a proxy
// that carries several clients on one connection those would be another client's. The text is
// cut there; the error still unwraps to fasthttp's, so Fiber's 408, 413 and 431 stay.
func withoutRequestEcho(next func(*fasthttp.RequestCtx, error)) func(*fasthttp.RequestCtx, error) {
	return func(ctx *fasthttp.RequestCtx, err error) {
		if before, _, cut := strings.Cut(err.Error(), ". Buffer size="); cut {
			err = &parseError{msg: before, err: err}
		}
		next(ctx, err)
	}
}

// parseError is a request parse error with its text cut before the echoed request.
type parseError struct {
	msg string
	err error
}

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return e.err }

// noSniff tells browsers to trust the Content-Type of every answer (JSON, files, errors)
// instead of guessing one from the bytes, so an answer can never be run as a script or page.
func noSniff(c *fiber.Ctx) error {
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	return c.Next()
}

// Status returns the HTTP status for an application error code.
func Status(code apperr.Code) int {
	switch code {
	case apperr.Invalid:
		return fiber.StatusBadRequest
	case apperr.Unauthenticated:
		return fiber.StatusUnauthorized
	case apperr.Forbidden:
		return fiber.StatusForbidden
	case apperr.NotFound:
		return fiber.StatusNotFound
	case apperr.Timeout:
		return fiber.StatusRequestTimeout
	case apperr.Conflict:
		return fiber.StatusConflict
	case apperr.TooLarge:
		return fiber.StatusRequestEntityTooLarge
	case apperr.UnsupportedMediaType:
		return fiber.StatusUnsupportedMediaType
	case apperr.RangeNotSatisfiable:
		return fiber.StatusRequestedRangeNotSatisfiable
	case apperr.Unprocessable:
		return fiber.StatusUnprocessableEntity
	case apperr.TooManyRequests:
		return fiber.StatusTooManyRequests
	case apperr.Unavailable:
		return fiber.StatusServiceUnavailable
	default:
		return fiber.StatusInternalServerError
	}
}

// ErrorHandler writes every error as JSON {"error": "..."} with the status of its code.
// Fiber's own errors (unknown route, body too large) keep their status. A 503 always carries
// Retry-After.
//
// 5xx answers are logged, and so are input errors that only the database caught (each one is a
// missing check at the edge). The log is sampled by method, route pattern and status — the
// first of a kind, then at most one per errorLogInterval with the number held back — and the
// path and error text are truncated, so a client cannot flood the log: a thousand failing
// requests with 3 KiB paths would otherwise make 3.6 MB of log lines.
func ErrorHandler(logger *slog.Logger) fiber.ErrorHandler {
	sampler := NewSampler(errorLogInterval)
	return func(c *fiber.Ctx, err error) error {
		status, message := describe(err)
		level := slog.LevelError
		if status < 500 {
			level = slog.LevelWarn
		}
		if logger != nil && (status >= 500 || apperr.FromDatabase(err)) {
			if ok, suppressed := sampler.Allow(c.Method() + " " + c.Route().Path + " " + strconv.Itoa(status)); ok {
				logger.Log(c.UserContext(), level, "request failed", "method", c.Method(), "route", c.Route().Path,
					"path", truncate(c.Path()), "status", status, "err", truncate(err.Error()), "suppressed", suppressed)
			}
		}
		// Also here: fasthttp's own errors (a request it cannot parse) reach this handler
		// without passing the middleware.
		c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
		if status == fiber.StatusServiceUnavailable && len(c.Response().Header.Peek(fiber.HeaderRetryAfter)) == 0 {
			c.Set(fiber.HeaderRetryAfter, strconv.Itoa(unavailableRetryAfterSeconds))
		}
		return c.Status(status).JSON(fiber.Map{"error": message})
	}
}

// unavailableRetryAfterSeconds is the Retry-After of a 503 whose handler did not set one (the
// database is away, or the node is stopping): a player's report interval.
const unavailableRetryAfterSeconds = 5

// errorLogInterval is how often one kind of failed request is logged at most.
const errorLogInterval = 10 * time.Second

// describe returns the status and client-safe message for err.
func describe(err error) (int, string) {
	if fe, ok := errors.AsType[*fiber.Error](err); ok {
		return fe.Code, fe.Message
	}
	return Status(apperr.CodeOf(err)), apperr.MessageOf(err)
}

// Get registers handlers for GET path on router, and not for HEAD as well, which fiber's
// Router.Get does. HEAD is answered only where api/openapi.yaml declares it: the health
// routes and the home page, which load balancers and uptime monitors probe with HEAD. Anywhere
// else Fiber finds no HEAD route and answers 405 with Allow. An implied HEAD is not harmless:
// it runs the GET's handler, and on /v1/events it answered 200 and opened an event stream.
func Get(router fiber.Router, path string, handlers ...fiber.Handler) {
	router.Add(fiber.MethodGet, path, handlers...)
}

// ParamID reads a positive integer path parameter.
func ParamID(c *fiber.Ctx, name string) (int64, error) {
	raw := c.Params(name)
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Errorf(apperr.Invalid, "%s must be a positive integer, got %q", name, raw)
	}
	return id, nil
}

// QueryID reads an optional positive integer query parameter: 0 when absent.
func QueryID(c *fiber.Ctx, name string) (int64, error) {
	raw := c.Query(name)
	if raw == "" {
		return 0, nil
	}
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return 0, apperr.Errorf(apperr.Invalid, "%s must be a positive integer, got %q", name, Excerpt(raw))
	}
	return id, nil
}

// Excerpt is the start of a client's value for an error message that quotes it: at most 40
// bytes, cut at a rune boundary, with "…" when cut.
func Excerpt(s string) string {
	if len(s) <= 40 {
		return s
	}
	cut := 40
	for cut > 0 && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// RequireJSON refuses with 415 a request whose Content-Type is not application/json
// (parameters such as charset=utf-8 are fine), before the handler reads its body. Every route
// that decodes a JSON body sits behind it: a form-encoded or text/plain body would otherwise be
// parsed as JSON all the same, and the document (api/openapi.yaml) allows only JSON.
func RequireJSON(c *fiber.Ctx) error {
	if _, _, err := ContentType(c, fiber.MIMEApplicationJSON); err != nil {
		return err
	}
	return c.Next()
}

// ContentType returns the request's media type (lower case) and its parameters when it is one
// of accepted, and otherwise an apperr.UnsupportedMediaType error (415) naming them. A request
// without a Content-Type is refused too: a body of no declared type is not read as one.
func ContentType(c *fiber.Ctx, accepted ...string) (string, map[string]string, error) {
	header := c.Get(fiber.HeaderContentType)
	mediaType, params, err := mime.ParseMediaType(header)
	if err == nil && slices.Contains(accepted, mediaType) {
		return mediaType, params, nil
	}
	got := "none"
	if header != "" {
		got = fmt.Sprintf("%.100q", header)
	}
	return "", nil, apperr.Errorf(apperr.UnsupportedMediaType, "Content-Type must be %s, got %s", strings.Join(accepted, " or "), got)
}

// DecodeJSON decodes a whole JSON object body into v, rejecting unknown fields and trailing
// data, so that a typo in a field name is an error rather than a silent default.
func DecodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			return apperr.Errorf(apperr.Unprocessable, "%s must be a %s", te.Field, te.Type)
		}
		return apperr.Errorf(apperr.Invalid, "malformed JSON body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return apperr.Errorf(apperr.Invalid, "malformed JSON body: trailing data")
	}
	return nil
}

// ValidText reports whether s can be stored as one line of text: valid UTF-8 without NUL
// (which PostgreSQL refuses) or other control characters (which have no place in a title or
// a name, and make logs and pages lie).
func ValidText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// CheckText returns an apperr.Unprocessable error naming field when s is not ValidText.
func CheckText(field, s string) error {
	if !ValidText(s) {
		return apperr.Errorf(apperr.Unprocessable, "%s must be UTF-8 text without control characters", field)
	}
	return nil
}

package httpserver

import (
	"errors"
	"io"
	"os"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/apperr"
)

// How request bodies are read, and when a connection may carry another request (issue 30).
//
// With StreamRequestBody, fasthttp reads at most the first 8 KiB of a body before it calls the
// handler and leaves the rest on the connection. When the handler answers without reading the
// rest (413 by Content-Length, 401, 404, 429, a handler that ignores its body), fasthttp keeps
// the connection and parses the unread bytes as the next requests: a request hidden in a
// refused body ran, and clients saw 400/431 answers to bytes they had sent as a body. So a
// connection is kept only when the body was read to its end by LimitBody, the one reader of
// in-memory bodies; after any other answer to a request with a body it is closed.

// bodyReadKey marks a request whose body LimitBody read to its end (a fasthttp user value).
type bodyReadKey struct{}

// framing decides, for each request, whether its connection may be kept afterwards.
type framing struct {
	// bodyLimit is the server's MaxRequestBodySize (Config.BodyLimit).
	bodyLimit int
}

func newFraming(bodyLimit int) *framing {
	if bodyLimit <= 0 {
		bodyLimit = fasthttp.DefaultMaxRequestBodySize
	}
	return &framing{bodyLimit: bodyLimit}
}

// handler wraps the app's fasthttp handler: after Fiber has answered (its error handler and
// its own early answers included), the connection is closed unless the request had no body or
// its body was read to its end.
func (f *framing) handler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		next(ctx)
		if !f.bodyRead(ctx) {
			ctx.Response.SetConnectionClose()
		}
	}
}

// bodyRead reports whether nothing of ctx's request body is left on the connection.
func (f *framing) bodyRead(ctx *fasthttp.RequestCtx) bool {
	h := &ctx.Request.Header
	switch cl := h.ContentLength(); {
	case cl == 0 || cl == -2: // -2: a GET or HEAD without Content-Length or chunking
		return true
	case ctx.UserValue(bodyReadKey{}) == nil:
		return false
	default:
		// Over the limit fasthttp applied, its pre-read (readBodyIdentity) reads whatever has
		// arrived into a pooled buffer, which can include the next request's bytes: those are
		// gone from the connection even when the body was read to its end.
		return cl <= f.bodyLimit
	}
}

// LimitBody reads the request body into memory for the handlers behind it, refusing bodies
// over limit bytes with 413: by Content-Length before reading a byte, and for chunked bodies
// while reading, so no handler behind it can be made to buffer more.
//
// It reads the body itself, exactly to its end, rather than leave it to fasthttp's Body(): on
// a read error (the read timeout) Body() hands the handler the error's text as the body and
// the connection carries on with the rest of the body as the next request. Here a body that
// stops or breaks off is an error (408 or 400) and the connection is closed.
func LimitBody(limit int) fiber.Handler {
	return func(c *fiber.Ctx) error {
		cl := c.Request().Header.ContentLength()
		if cl > limit {
			return apperr.Errorf(apperr.TooLarge, "body is %d bytes, the limit is %d", cl, limit)
		}
		if stream := c.Context().RequestBodyStream(); stream != nil && cl != 0 {
			b, err := readBody(stream, cl, limit)
			if err != nil {
				return err
			}
			c.Request().SetBodyRaw(b) // also releases the stream (ResetBody)
		}
		c.Locals(bodyReadKey{}, true)
		return c.Next()
	}
}

// readBody reads a body of Content-Length cl (-1: chunked, at most limit bytes) to its end.
func readBody(stream io.Reader, cl, limit int) ([]byte, error) {
	if cl < 0 { // chunked: read at most limit+1 bytes to find out
		b, err := io.ReadAll(io.LimitReader(stream, int64(limit)+1))
		if err != nil {
			return nil, bodyError(err)
		}
		if len(b) > limit {
			return nil, apperr.Errorf(apperr.TooLarge, "body is over the limit of %d bytes", limit)
		}
		return b, nil
	}
	b := make([]byte, cl)
	if _, err := io.ReadFull(stream, b); err != nil {
		return nil, bodyError(err)
	}
	return b, nil
}

// bodyError describes a failed body read to the client, without the connection's addresses
// that the error's text carries.
func bodyError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return apperr.Errorf(apperr.Timeout, "the body did not arrive within the read timeout")
	}
	return apperr.Errorf(apperr.Invalid, "the body ended early or its chunked encoding is malformed")
}

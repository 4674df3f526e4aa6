package httpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/playhead/playhead/apperr"
)

// How request bodies are read, and when a connection may carry another request.
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

// firstByteBodyLimit is the body limit fasthttp applies to a first-byte route.
//
// Before it calls the handler, fasthttp reads min(limit, Content-Length, 8 KiB) of the body
// (readBodyWithStreaming), within the server's read timeout: the upload limits, which the
// handler applies, would not hold against a client that trickles its first 8 KiB.
// For a body over the limit the pre-read is readBodyIdentity, which returns once more than the
// limit has arrived; with this limit the handler runs once a first-byte route's body has sent
// 2 bytes (1 is the smallest limit: 0 means "the server's" to HeaderReceived). The stream
// still delivers the whole body: the pre-read bytes, then the connection. But one read of the
// pre-read can take more than the body when a pipelined request follows it, so these routes
// read through BodyStream and their connection is closed afterwards (bodyRead).
const firstByteBodyLimit = 1

// Route is a route of the public app: a method and a path as registered, without parameters.
type Route struct {
	Method, Path string
	// Under makes the route every path below Path as well: PATCH /v1/uploads with Under
	// stands for the route PATCH /v1/uploads/:id, whose parameter is any one segment.
	Under bool
}

// framing decides, for each request, how much of its body fasthttp reads before the handler
// and whether its connection may be kept afterwards.
type framing struct {
	// bodyLimit is the server's MaxRequestBodySize (Config.BodyLimit).
	bodyLimit int
	// firstByte are the first-byte routes, their paths as Fiber routes them.
	firstByte []Route
}

func newFraming(bodyLimit int, firstByte []Route) *framing {
	if bodyLimit <= 0 {
		bodyLimit = fasthttp.DefaultMaxRequestBodySize
	}
	f := &framing{bodyLimit: bodyLimit}
	for _, r := range firstByte {
		if strings.ContainsAny(r.Path, ":*+?") {
			panic(fmt.Sprintf("httpserver: first-byte route %s %s has parameters; only plain paths are matched", r.Method, r.Path))
		}
		f.firstByte = append(f.firstByte, Route{Method: r.Method, Path: string(routingPath([]byte(r.Path))), Under: r.Under})
	}
	return f
}

// routingPath is path as Fiber's router compares it with the default configuration
// (CaseSensitive and StrictRouting off, Ctx.configDependentPaths): ASCII letters lowered,
// trailing slashes dropped. It lowers path in place.
func routingPath(path []byte) []byte {
	for i, c := range path {
		if 'A' <= c && c <= 'Z' {
			path[i] = c + 'a' - 'A'
		}
	}
	if len(path) > 1 {
		path = bytes.TrimRight(path, "/")
	}
	return path
}

// isFirstByte reports whether h is a request for a first-byte route. It parses the request
// target as Fiber does (fasthttp's URI, the path before any query or fragment, also from an
// absolute-form target), so that no spelling Fiber routes to the handler escapes the early
// start.
func (f *framing) isFirstByte(h *fasthttp.RequestHeader) bool {
	method := h.Method()
	candidate := false
	for _, r := range f.firstByte {
		candidate = candidate || string(method) == r.Method
	}
	if !candidate {
		return false
	}
	uri := fasthttp.AcquireURI()
	defer fasthttp.ReleaseURI(uri)
	if err := uri.Parse(h.Host(), h.RequestURI()); err != nil {
		return false // Fiber routes such a request by an empty path: nowhere
	}
	path := string(routingPath(append([]byte(nil), uri.PathOriginal()...)))
	for _, r := range f.firstByte {
		if string(method) == r.Method && (path == r.Path || r.Under && strings.HasPrefix(path, r.Path+"/")) {
			return true
		}
	}
	return false
}

// headerReceived is fasthttp's Server.HeaderReceived: the body limit of first-byte routes.
func (f *framing) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if f.isFirstByte(h) {
		return fasthttp.RequestConfig{MaxRequestBodySize: firstByteBodyLimit}
	}
	return fasthttp.RequestConfig{}
}

// limitFor is the body limit fasthttp applied to h's request.
func (f *framing) limitFor(h *fasthttp.RequestHeader) int {
	if f.isFirstByte(h) {
		return firstByteBodyLimit
	}
	return f.bodyLimit
}

// handler wraps the app's fasthttp handler: after Fiber has answered (its error handler and
// its own early answers included), the connection is closed unless the request had no body or
// its body was read to its end. A request whose framing a proxy could read another way
// (framingError) or whose body is compressed (codingError) is refused before Fiber sees it.
func (f *framing) handler(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	return func(ctx *fasthttp.RequestCtx) {
		if msg := framingError(&ctx.Request.Header); msg != "" {
			refuse(ctx, fiber.StatusBadRequest, msg)
			return
		}
		if msg := codingError(&ctx.Request.Header); msg != "" {
			// RFC 9110 15.5.16: a 415 for a content coding says which codings are accepted.
			ctx.Response.Header.Set(fiber.HeaderAcceptEncoding, "identity")
			refuse(ctx, fiber.StatusUnsupportedMediaType, msg)
			return
		}
		next(ctx)
		if !f.bodyRead(ctx) {
			ctx.Response.SetConnectionClose()
		}
	}
}

// refuse answers a request the framing layer turns away, as the error handler answers an
// application error ({"error": msg}), and closes the connection: the body is left unread.
func refuse(ctx *fasthttp.RequestCtx, status int, msg string) {
	ctx.Response.Header.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	ctx.Response.Header.SetContentType(fiber.MIMEApplicationJSON)
	ctx.Response.SetStatusCode(status)
	body, _ := json.Marshal(fiber.Map{"error": msg})
	ctx.Response.SetBody(body)
	ctx.Response.SetConnectionClose()
}

// codingError says why a request's Content-Encoding is refused, or returns "".
//
// No route takes a compressed body. Fiber's Ctx.Body() decodes gzip, deflate and br, in as
// many layers as the header names, into memory with no bound, before any handler's limit
// applies to what it returns: a body of a few hundred bytes would decode to gigabytes. So a
// request that names any coding but "identity" is refused here, on every route, before a
// byte of its body is read (PeekAll: fasthttp keeps every Content-Encoding line, and Fiber
// decodes by the last).
func codingError(h *fasthttp.RequestHeader) string {
	for _, v := range h.PeekAll(fiber.HeaderContentEncoding) {
		if !bytes.EqualFold(bytes.Trim(v, " \t"), []byte("identity")) {
			return "compressed request bodies are not accepted: send the body without Content-Encoding"
		}
	}
	return ""
}

// framingError says why the framing of a request is refused, or returns "".
//
// fasthttp takes the last of several Content-Length lines, and any Transfer-Encoding but
// "identity" for chunked, dropping a Content-Length beside it. RFC 9112 has the server refuse
// a request with differing lengths (6.3), one whose final coding is not chunked (6.3), and
// refuse, or close the connection after, one with both fields (6.1): a proxy in front that
// framed the same bytes another way (by the first length, by the Content-Length, or finding
// no chunked body) would pass on what this server then reads as the next request (request
// smuggling). So a request has at most one Content-Length line, and a chunked request exactly
// one Transfer-Encoding, "chunked", and no Content-Length. HTTP/1.0 has no Transfer-Encoding
// (RFC 9112 6.1: its framing is faulty): fasthttp reads such a body as chunked and, kept
// alive, reads on after it, where a proxy that frames HTTP/1.0 by Content-Length alone reads
// the chunks as the next request; so it is refused too. Only requests that carry either field
// are scanned: a GET without a body costs nothing.
func framingError(h *fasthttp.RequestHeader) string {
	if h.ContentLength() == -2 { // neither field: no body
		return ""
	}
	lengths, codings := 0, 0
	for raw := h.RawHeaders(); len(raw) > 0; {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		if len(line) == 0 || line[0]|0x20 != 'c' && line[0]|0x20 != 't' {
			continue // neither field: most lines of a player's request, skipped cheaply
		}
		name, value, ok := bytes.Cut(bytes.TrimRight(line, "\r"), []byte(":"))
		switch {
		case !ok:
		case bytes.EqualFold(name, []byte(fiber.HeaderContentLength)):
			lengths++
		case bytes.EqualFold(name, []byte(fiber.HeaderTransferEncoding)):
			codings++
			if !bytes.EqualFold(bytes.Trim(value, " \t"), []byte("chunked")) {
				return "Transfer-Encoding must be chunked, alone"
			}
		}
	}
	switch {
	case codings > 0 && !h.IsHTTP11():
		return "Transfer-Encoding is not defined for HTTP/1.0"
	case lengths > 0 && codings > 0:
		return "a request with both Transfer-Encoding and Content-Length has no single length"
	case lengths > 1:
		return "a request has one Content-Length"
	case codings > 1 || codings == 0 && h.ContentLength() == -1:
		return "Transfer-Encoding must be chunked, alone"
	}
	return ""
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
		return cl <= f.limitFor(h)
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
			if err := readBody(c.Request(), stream, cl, limit); err != nil {
				return err
			}
		}
		c.Locals(bodyReadKey{}, true)
		return c.Next()
	}
}

// smallBody is the size of the scratch buffers that small bodies are read through: a position
// report is about 20 bytes. Reading it into a new slice instead cost the PUT path an allocation
// and about 50 ns a request (BenchmarkPutOnAKeptAliveConnection).
const smallBody = 4 << 10

var scratch = sync.Pool{New: func() any { return new([smallBody]byte) }}

// readBody reads the body of req, of Content-Length cl (-1: chunked, at most limit bytes), from
// stream to its end and makes it req's body, which also releases the stream (ResetBody).
func readBody(req *fasthttp.Request, stream io.Reader, cl, limit int) error {
	switch {
	case cl < 0: // chunked: read at most limit+1 bytes to find out
		b, err := io.ReadAll(io.LimitReader(stream, int64(limit)+1))
		if err != nil {
			return bodyError(err)
		}
		if len(b) > limit {
			return apperr.Errorf(apperr.TooLarge, "body is over the limit of %d bytes", limit)
		}
		req.SetBodyRaw(b)
	case cl <= smallBody:
		buf := scratch.Get().(*[smallBody]byte)
		defer scratch.Put(buf)
		if _, err := io.ReadFull(stream, buf[:cl]); err != nil {
			return bodyError(err)
		}
		req.SetBody(buf[:cl]) // a copy into fasthttp's pooled body buffer
	default:
		b := make([]byte, cl)
		if _, err := io.ReadFull(stream, b); err != nil {
			return bodyError(err)
		}
		req.SetBodyRaw(b)
	}
	return nil
}

// bodyError describes a failed body read to the client, without the connection's addresses
// that the error's text carries.
func bodyError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return apperr.Errorf(apperr.Timeout, "the body did not arrive within the read timeout")
	}
	return apperr.Errorf(apperr.Invalid, "the body ended early or its chunked encoding is malformed")
}

// BodyStream returns the request body for a handler that reads it as a stream (an upload),
// never more than its Content-Length. The connection is closed after such a request.
//
// On a first-byte route fasthttp's pre-read may hold bytes past the body (the next pipelined
// request), and its stream hands them out as body and then panics on the following read
// (requestStream.Read slices its buffer by a negative length: fasthttp v1.51.0, streaming.go),
// which would end the process. Reading through this cap never asks it for more than the body.
func BodyStream(c *fiber.Ctx) io.Reader {
	stream := c.Context().RequestBodyStream()
	if stream == nil {
		return bytes.NewReader(c.Body())
	}
	if cl := c.Request().Header.ContentLength(); cl >= 0 {
		return io.LimitReader(stream, int64(cl))
	}
	return stream
}

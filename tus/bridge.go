package tus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/playhead/playhead/media"
)

// How tusd (a net/http handler) runs on the public server (Fiber on fasthttp).
//
// Fiber's own adaptor (middleware/adaptor, fasthttpadaptor) hands a net/http handler the body
// as ctx.PostBody(): fasthttp reads the whole body into memory first, 1 GiB for a 1 GiB PATCH.
// So Playhead builds the http.Request itself: its Body is the connection's body stream
// (httpserver.BodyStream, read by media.UploadBody with the upload limits' idle and total
// timeouts), and tusd's answer is written to a small recorder that becomes the Fiber answer
// when tusd returns. tusd's answers are headers and at most an error line, never a body (GET,
// the download, is off), so nothing large is ever held.
//
// tusd controls the connection through http.ResponseController: it pushes a read deadline
// forward after each read (PLAYHEAD_UPLOAD_IDLE_TIMEOUT does that here, so those are ignored)
// and sets one in the past to stop a body at once when another request asks for the lock;
// that one interrupts the UploadBody.

// request is what the store and the locker learn of the request tusd serves, and what they
// tell its answer. One goroutine serves a request: no locking.
type request struct {
	member int64
	// create is set for a creation: the metadata as read and the details made of it.
	create *creation
	// waitForLock: the request waits for the holder of the upload's lock to let go (HEAD,
	// DELETE) rather than being refused 423 (PATCH).
	waitForLock bool
	// drain ends the request's body once what has arrived is read (nil without a body): what
	// the locker does when another request asks for the lock.
	drain func()
	// received counts the bytes read of the request's body, below tusd's limit of the bytes
	// left of the upload (which reads one byte past the limit to see a longer body).
	received int64

	// Set by the store for the answer.
	location  string // the upload a creation made
	mediaID   int64
	offset    int64
	expiresAt time.Time
}

type creation struct {
	metadata map[string]string
	details  media.UploadDetails
}

type requestKey struct{}

func requestFrom(ctx context.Context) *request {
	st, _ := ctx.Value(requestKey{}).(*request)
	return st
}

// recorder is the http.ResponseWriter tusd answers into.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	// upload is the request's body, interrupted by a read deadline in the past; nil without a
	// body.
	upload *media.UploadBody
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(status int) {
	if w.status == 0 && status >= 200 {
		w.status = status
	}
}

// maxRecordedBody bounds what tusd may write: an error line.
const maxRecordedBody = 4 << 10

func (w *recorder) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	if w.body.Len()+len(b) > maxRecordedBody {
		return 0, fmt.Errorf("tus: an answer body over %d bytes", maxRecordedBody)
	}
	return w.body.Write(b)
}

// SetReadDeadline is http.ResponseController's: a deadline that has passed stops the body.
func (w *recorder) SetReadDeadline(t time.Time) error {
	if w.upload != nil && !t.After(time.Now()) {
		w.upload.Interrupt()
	}
	return nil
}

// SetWriteDeadline is http.ResponseController's; the server's write timeout applies instead.
func (w *recorder) SetWriteDeadline(time.Time) error { return nil }

// body is an upload's body as tusd's http.Request carries it: closing it (tusd does when it
// stops a body) interrupts it, and the upload limits' cuts are tusd errors with their status
// (408), not the 500 tusd gives an error it does not know.
type body struct {
	*media.UploadBody
	limits *media.UploadLimits
	st     *request
}

func (b body) Read(p []byte) (int, error) {
	n, err := b.UploadBody.Read(p)
	b.st.received += int64(n)
	switch {
	case errors.Is(err, media.ErrUploadStalled):
		err = handler.NewError("ERR_UPLOAD_STALLED", fmt.Sprintf("the upload sent nothing for %s", b.limits.IdleTimeout), http.StatusRequestTimeout)
	case errors.Is(err, media.ErrUploadTooSlow):
		err = handler.NewError("ERR_UPLOAD_TOO_SLOW", fmt.Sprintf("the request's body took longer than %s", b.limits.Timeout), http.StatusRequestTimeout)
	}
	return n, err
}

func (b body) Close() error {
	b.Interrupt()
	return nil
}

// serve runs tusd's handler h for c's request with st, path the upload id ("" for the
// creation), and upload the body (nil without one), and turns tusd's answer into c's.
func (h *Handler) serve(c *fiber.Ctx, st *request, path string, upload *media.UploadBody, serve http.Handler) error {
	ctx, cancel := context.WithCancel(context.WithValue(c.UserContext(), requestKey{}, st))
	defer cancel()
	req := &http.Request{
		Method:     c.Method(),
		URL:        &url.URL{Path: path},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{},
		Host:       string(c.Request().Host()),
		RequestURI: string(c.Request().RequestURI()),
		RemoteAddr: c.Context().RemoteAddr().String(),
		Body:       http.NoBody,
	}
	c.Request().Header.VisitAll(func(k, v []byte) { req.Header.Add(string(k), string(v)) })
	w := &recorder{header: http.Header{}, upload: upload}
	if upload != nil {
		st.drain = func() { upload.Drain(drainGrace) }
		req.Body = body{upload, h.cfg.Limits, st}
		req.ContentLength = int64(c.Request().Header.ContentLength()) // -1: chunked
	}
	serve.ServeHTTP(w, req.WithContext(ctx))
	return h.answer(c, w, st)
}

// answer makes tusd's answer c's: its headers, with a relative Location, Upload-Expires
// (the expiration extension, which tusd lacks) and Playhead-Media-Id; an error as JSON
// {"error": …} through the app's error handler.
func (h *Handler) answer(c *fiber.Ctx, w *recorder, st *request) error {
	for k, vs := range w.header {
		switch k {
		case fiber.HeaderContentLength, fiber.HeaderContentType:
			continue // fasthttp sets them for the answer it writes
		case fiber.HeaderLocation:
			// tusd makes it absolute from Host and the connection's scheme, which behind a proxy
			// that ends TLS is http://: the path alone is right wherever the client is.
			if u, err := url.Parse(vs[0]); err == nil {
				vs = []string{u.EscapedPath()}
			}
		case "Tus-Extension":
			vs = []string{vs[0] + ",expiration"}
		}
		for _, v := range vs {
			c.Response().Header.Add(k, v)
		}
	}
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	if status >= 400 && st.location != "" {
		// tusd drops the Location of a creation that failed with its first bytes; the client
		// needs it to go on with the upload or terminate it.
		c.Set(fiber.HeaderLocation, st.location)
	}
	if status >= 400 {
		message := tusdMessage(w.body.String())
		if status >= 500 {
			return fmt.Errorf("tus %s: %d %s", c.Method(), status, message) // logged; the client gets 500
		}
		if strings.HasPrefix(w.body.String(), "ERR_INVALID_CONTENT_TYPE") {
			// The tus spec asks for 415, as every other route answers a body of another type.
			status = http.StatusUnsupportedMediaType
		}
		return fiber.NewError(status, message)
	}
	if st.mediaID != 0 {
		c.Set(HeaderMediaID, strconv.FormatInt(st.mediaID, 10))
	} else if !st.expiresAt.IsZero() {
		c.Set("Upload-Expires", st.expiresAt.UTC().Format(http.TimeFormat))
	}
	c.Status(status)
	return nil
}

// HeaderMediaID names, in the answers about a finished upload (its HEAD, its last PATCH), the
// media it became.
const HeaderMediaID = "Playhead-Media-Id"

// tusdMessage is the message of a tusd error body ("ERR_CODE: message\n").
func tusdMessage(body string) string {
	body = strings.TrimSpace(body)
	if _, message, ok := strings.Cut(body, ": "); ok && strings.HasPrefix(body, "ERR_") {
		return message
	}
	if body == "" {
		return "the upload request was refused"
	}
	return body
}

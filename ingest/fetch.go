package ingest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"os"
	"time"

	"github.com/playhead/playhead/backoff"
	"github.com/playhead/playhead/egress"
)

// FetchConfig configures a Fetcher. Zero values take the defaults named on each field.
type FetchConfig struct {
	// AllowPrivate lets the fetcher reach loopback and private addresses (tests only).
	AllowPrivate bool
	// ConnectTimeout bounds TCP connect. Default 10 s.
	ConnectTimeout time.Duration
	// ResponseTimeout bounds the wait for the response's headers once the request is sent:
	// with ConnectTimeout, it is how long one attempt on an unreachable or silent server can
	// hold a download slot. Default 30 s.
	ResponseTimeout time.Duration
	// IdleTimeout cuts a response body that sends nothing for this long; a slow but steady
	// body is never cut. Default 5 min, as the seed's socket read timeout.
	IdleTimeout time.Duration
	// Timeout bounds one whole attempt, the fallback URL included: the idle timeout cannot
	// cut a body that sends a byte every few minutes, which would hold a download slot for
	// good. A timed-out attempt is retried later like a connection error. Default 1 h.
	Timeout time.Duration
	// MaxBytes bounds one download. Default 5 GiB.
	MaxBytes int64
	// Metrics receives download figures. Optional.
	Metrics *Metrics

	// allow replaces Public as the address policy; tests use it to let one loopback address
	// through and refuse another.
	allow func(netip.Addr) bool
}

// Fetcher downloads files over HTTP(S) into local files, streaming.
type Fetcher struct {
	cfg    FetchConfig
	client *http.Client
}

// maxRedirects bounds a redirect chain; each hop is checked like the first request.
const maxRedirects = 5

// NewFetcher returns a Fetcher. Every connection it opens is checked after DNS resolution, so
// neither a hostname that resolves to a private address nor a redirect to one gets through.
func NewFetcher(cfg FetchConfig) *Fetcher {
	cfg.ConnectTimeout = cmp.Or(cfg.ConnectTimeout, 10*time.Second)
	cfg.ResponseTimeout = cmp.Or(cfg.ResponseTimeout, 30*time.Second)
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, 5*time.Minute)
	cfg.Timeout = cmp.Or(cfg.Timeout, time.Hour)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, 5<<30)
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout}
	if !cfg.AllowPrivate {
		allow := cfg.allow
		if allow == nil {
			allow = egress.Public
		}
		dialer.Control = egress.Control(allow)
	}
	transport := &http.Transport{
		Proxy: nil, // never an environment proxy: the address check must see the real peer
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			conn, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return &idleConn{Conn: conn, idle: cfg.IdleTimeout}, nil
		},
		TLSHandshakeTimeout:    cfg.ConnectTimeout,
		ResponseHeaderTimeout:  cfg.ResponseTimeout,
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	client := &http.Client{
		Transport: transport,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return permanent(fmt.Errorf("more than %d redirects", maxRedirects))
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return permanent(fmt.Errorf("redirect to a %s URL", req.URL.Scheme))
			}
			return nil
		},
	}
	return &Fetcher{cfg: cfg, client: client}
}

// idleConn pushes its read deadline forward on every read: a connection that delivers
// nothing for idle is cut, one that keeps delivering however slowly is not.
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c *idleConn) Read(p []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.idle)); err != nil {
		return 0, err
	}
	return c.Conn.Read(p)
}

type permanentError struct{ err error }

func (p permanentError) Error() string { return p.err.Error() }
func (p permanentError) Unwrap() error { return p.err }

func permanent(err error) error { return permanentError{err} }

// IsPermanent reports whether a fetch error will not go away by retrying (a 404, a forbidden
// address, a file over the limit, an HTML page where a video should be).
func IsPermanent(err error) bool {
	_, ok := errors.AsType[permanentError](err)
	return ok || errors.Is(err, egress.ErrForbiddenAddress)
}

// errAttemptTimeout ends an attempt that took longer than FetchConfig.Timeout.
var errAttemptTimeout = errors.New("the download took longer than its time limit")

// errHTMLPage means the server answered a web page instead of the file: Google Drive's
// "cannot scan this file for viruses" confirm page.
var errHTMLPage = errors.New("got an HTML page instead of the file")

// Fetch downloads primary into dst (truncating it first) and returns the bytes written. An
// HTML page instead of the file switches to fallback once. Fetch makes one attempt and never
// waits to retry: a retryable failure (429, 5xx, a connection error or timeout) is returned at
// once, with the server's Retry-After if it sent one (RetryAfter), for the job queue to retry
// later without holding a download slot meanwhile; IsPermanent tells the failures retrying
// cannot help.
func (f *Fetcher) Fetch(ctx context.Context, primary, fallback string, dst *os.File) (int64, error) {
	start := time.Now()
	attempt, cancel := context.WithTimeoutCause(ctx, f.cfg.Timeout, errAttemptTimeout)
	defer cancel()
	n, err := f.fetch(attempt, primary, fallback, dst)
	f.cfg.Metrics.download(err, n, time.Since(start))
	return n, err
}

func (f *Fetcher) fetch(ctx context.Context, primary, fallback string, dst *os.File) (int64, error) {
	n, retryAfter, err := f.once(ctx, primary, dst)
	if errors.Is(err, errHTMLPage) && fallback != "" && fallback != primary {
		n, retryAfter, err = f.once(ctx, fallback, dst) // the other download URL, at once: not a retry
	}
	switch {
	case err == nil:
		return n, nil
	case errors.Is(err, errHTMLPage):
		return 0, permanent(err)
	case IsPermanent(err):
		return 0, err
	case errors.Is(context.Cause(ctx), errAttemptTimeout):
		err = fmt.Errorf("%w (%s): %w", errAttemptTimeout, f.cfg.Timeout, err)
	case ctx.Err() != nil: // the job was cancelled
		return 0, err
	}
	f.cfg.Metrics.retry()
	return 0, retryableError{err: err, after: retryAfter}
}

// retryableError is a failure worth another attempt later, after at least after when the
// server said so.
type retryableError struct {
	err   error
	after time.Duration
}

func (r retryableError) Error() string { return r.err.Error() }
func (r retryableError) Unwrap() error { return r.err }

// RetryAfter returns how long the server asked to wait before the next attempt (its
// Retry-After), or 0.
func RetryAfter(err error) time.Duration {
	if r, ok := errors.AsType[retryableError](err); ok {
		return r.after
	}
	return 0
}

// once makes one request. It returns the server's Retry-After for a retryable status.
func (f *Fetcher) once(ctx context.Context, target string, dst *os.File) (int64, time.Duration, error) {
	if err := dst.Truncate(0); err != nil {
		return 0, 0, err
	}
	if _, err := dst.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return 0, 0, permanent(err)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return 0, 0, permanent(fmt.Errorf("%s URLs are not fetched", req.URL.Scheme))
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return 0, 0, err // connection errors are retryable; IsPermanent sees through url.Error
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return 0, backoff.ParseRetryAfter(resp.Header.Get("Retry-After")), fmt.Errorf("HTTP %d from %s", resp.StatusCode, req.URL.Host)
	case resp.StatusCode != http.StatusOK:
		return 0, 0, permanent(fmt.Errorf("HTTP %d from %s", resp.StatusCode, req.URL.Host))
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt == "text/html" {
		return 0, 0, errHTMLPage
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		return 0, 0, permanent(fmt.Errorf("file is %d bytes, the limit is %d", resp.ContentLength, f.cfg.MaxBytes))
	}
	// Stream to the file in small buffers: the heap does not grow with the file.
	n, err := io.Copy(dst, io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return n, 0, fmt.Errorf("download from %s: %w", req.URL.Host, err)
	}
	if n > f.cfg.MaxBytes {
		return n, 0, permanent(fmt.Errorf("file is over the limit of %d bytes", f.cfg.MaxBytes))
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, 0, fmt.Errorf("download from %s: got %d of %d bytes", req.URL.Host, n, resp.ContentLength)
	}
	return n, 0, nil
}

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
	"syscall"
	"time"

	"github.com/playhead/playhead/backoff"
)

// ErrForbiddenAddress is a fetch refused because the address is not public (loopback,
// private, link-local, multicast, unspecified): the server must not be a proxy into its own
// network.
var ErrForbiddenAddress = errors.New("address not allowed")

// FetchConfig configures a Fetcher. Zero values take the defaults named on each field.
type FetchConfig struct {
	// AllowPrivate lets the fetcher reach loopback and private addresses (tests only).
	AllowPrivate bool
	// ConnectTimeout bounds TCP connect. Default 10 s.
	ConnectTimeout time.Duration
	// IdleTimeout cuts a response that sends nothing for this long; a slow but steady body
	// is never cut. Default 5 min, as the seed's socket read timeout.
	IdleTimeout time.Duration
	// MaxBytes bounds one download. Default 5 GiB.
	MaxBytes int64
	// Attempts is how many times one fetch tries a retryable failure (429, 5xx, connection
	// errors) before giving up to the job queue's own retry. Default 5.
	Attempts int
	// RetryBase and RetryCap shape the full-jitter backoff; Retry-After (seconds) overrides
	// it, capped. Defaults 1 s and 30 s.
	RetryBase, RetryCap time.Duration
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
	cfg.IdleTimeout = cmp.Or(cfg.IdleTimeout, 5*time.Minute)
	cfg.MaxBytes = cmp.Or(cfg.MaxBytes, 5<<30)
	cfg.Attempts = cmp.Or(cfg.Attempts, 5)
	cfg.RetryBase = cmp.Or(cfg.RetryBase, time.Second)
	cfg.RetryCap = cmp.Or(cfg.RetryCap, 30*time.Second)
	dialer := &net.Dialer{Timeout: cfg.ConnectTimeout}
	if !cfg.AllowPrivate {
		allow := cfg.allow
		if allow == nil {
			allow = Public
		}
		dialer.Control = addressPolicy(allow)
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
		ResponseHeaderTimeout:  cfg.IdleTimeout,
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

// addressPolicy returns a dialer Control that runs on every connection after DNS resolution,
// with the address about to be dialled, before any packet is sent to it.
func addressPolicy(allow func(netip.Addr) bool) func(string, string, syscall.RawConn) error {
	return func(_, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allow(ap.Addr()) {
			return fmt.Errorf("%w: %s", ErrForbiddenAddress, address)
		}
		return nil
	}
}

// cgnat is the carrier-grade NAT range, private in practice though not in net/netip's sense.
var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Public reports whether ip is an address the fetcher may reach by default.
func Public(ip netip.Addr) bool {
	ip = ip.Unmap()
	return ip.IsValid() && !ip.IsLoopback() && !ip.IsPrivate() && !ip.IsLinkLocalUnicast() &&
		!ip.IsLinkLocalMulticast() && !ip.IsInterfaceLocalMulticast() && !ip.IsMulticast() &&
		!ip.IsUnspecified() && !cgnat.Contains(ip) && !(ip.Is4() && ip.As4()[0] == 0)
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
	return ok || errors.Is(err, ErrForbiddenAddress)
}

// errHTMLPage means the server answered a web page instead of the file: Google Drive's
// "cannot scan this file for viruses" confirm page.
var errHTMLPage = errors.New("got an HTML page instead of the file")

// Fetch downloads primary into dst (truncating it first) and returns the bytes written. An
// HTML page instead of the file switches to fallback once. Retryable failures are retried
// with backoff up to Attempts; the last error is returned, wrapped by IsPermanent's test
// when retrying cannot help.
func (f *Fetcher) Fetch(ctx context.Context, primary, fallback string, dst *os.File) (int64, error) {
	start := time.Now()
	n, err := f.fetch(ctx, primary, fallback, dst)
	f.cfg.Metrics.download(err, n, time.Since(start))
	return n, err
}

func (f *Fetcher) fetch(ctx context.Context, primary, fallback string, dst *os.File) (int64, error) {
	target := primary
	for attempt := 1; ; attempt++ {
		n, retryAfter, err := f.once(ctx, target, dst)
		switch {
		case err == nil:
			return n, nil
		case errors.Is(err, errHTMLPage):
			if fallback == "" || target == fallback {
				return 0, permanent(err)
			}
			target = fallback // the other download URL, once, at once: not a retry
			attempt--
			continue
		case IsPermanent(err) || ctx.Err() != nil:
			return 0, err
		case attempt >= f.cfg.Attempts:
			return 0, fmt.Errorf("after %d attempts: %w", attempt, err)
		}
		f.cfg.Metrics.retry()
		delay := backoff.Delay(attempt, f.cfg.RetryBase, f.cfg.RetryCap, retryAfter)
		select {
		case <-ctx.Done():
			return 0, context.Cause(ctx)
		case <-time.After(delay):
		}
	}
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

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

// Public reports whether ip is an address the fetcher may reach by default: a global unicast
// address, in IPv4 or IPv6, and not one of the special-purpose blocks that are not globally
// reachable (IANA's registries). IPv6 forms that carry an IPv4 address — IPv4-mapped, NAT64
// (64:ff9b::/96), 6to4 (2002::/16), Teredo (2001::/32) — are judged by the IPv4 address inside,
// because that is where the packets end up: [64:ff9b::7f00:1] is 127.0.0.1 through a NAT64
// gateway. The deprecated IPv4-compatible (::/96) and site-local (fec0::/10) forms, and the
// local-use NAT64 prefix (64:ff9b:1::/48), are refused outright (finding 9 of issue 11).
func Public(ip netip.Addr) bool {
	switch {
	case !ip.IsValid():
		return false
	case ip.Is4() || ip.Is4In6():
		return public4(ip.Unmap())
	case nat64.Contains(ip):
		return public4(v4At(ip, 12))
	case sixToFour.Contains(ip):
		return public4(v4At(ip, 2))
	case teredo.Contains(ip):
		// The Teredo server's address, and the client's, stored inverted.
		client := v4At(ip, 12).As4()
		for i := range client {
			client[i] ^= 0xff
		}
		return public4(v4At(ip, 4)) && public4(netip.AddrFrom4(client))
	case !globalUnicast6.Contains(ip):
		// Everything outside 2000::/3: ::/96 and ::1, 64:ff9b:1::/48, 100::/64, fc00::/7,
		// fe80::/10, fec0::/10, ff00::/8 and the unassigned rest.
		return false
	}
	for _, p := range notGlobal6 {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

var (
	nat64          = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour      = netip.MustParsePrefix("2002::/16")
	teredo         = netip.MustParsePrefix("2001::/32")
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
	// notGlobal6 are the blocks inside 2000::/3 that are not globally reachable.
	notGlobal6 = []netip.Prefix{
		netip.MustParsePrefix("2001::/23"),     // IETF protocol assignments (benchmarking, ORCHID, …)
		netip.MustParsePrefix("2001:db8::/32"), // documentation
		netip.MustParsePrefix("3fff::/20"),     // documentation
	}
	// notGlobal4 are the IPv4 blocks that are not globally reachable, beyond what net/netip
	// names (loopback, private, link-local, multicast, unspecified).
	notGlobal4 = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT: private in practice
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	}
)

func public4(ip netip.Addr) bool {
	if !ip.Is4() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range notGlobal4 {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// v4At returns the IPv4 address stored in bytes at..at+3 of an IPv6 address.
func v4At(ip netip.Addr, at int) netip.Addr {
	b := ip.As16()
	return netip.AddrFrom4([4]byte(b[at : at+4]))
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

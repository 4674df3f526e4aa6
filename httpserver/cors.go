package httpserver

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// corsMethods are the methods a preflight allows: every method a route of the app takes (tus's
// discovery is an OPTIONS with a token).
var corsMethods = []string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut, fiber.MethodPatch,
	fiber.MethodDelete, fiber.MethodOptions}

// corsRequestHeaders are the request headers a preflight allows: the token and the JSON body's
// type, the event stream's resume point, a byte range, and the tus protocol's headers (the
// resumable uploads are on the same app).
const corsRequestHeaders = "Authorization, Content-Type, Last-Event-ID, Range, " +
	"Tus-Resumable, Upload-Length, Upload-Offset, Upload-Metadata, Upload-Defer-Length, Upload-Concat"

// corsExposedHeaders are the answer headers a page on another origin may read: the back-off of
// a 429 or 503, a byte range's, and the tus protocol's (Location names a created upload).
const corsExposedHeaders = "Retry-After, Content-Range, Location, Playhead-Media-Id, " +
	"Tus-Resumable, Tus-Version, Tus-Extension, Tus-Max-Size, Upload-Offset, Upload-Length, Upload-Expires, Upload-Metadata"

// corsMaxAge is how long a browser may keep a preflight's answer, in seconds: Chromium's cap
// (Firefox keeps one a day). Besides saving a round trip per report, a cached preflight lets
// the keepalive report a page sends as it closes go out without one.
const corsMaxAge = 7200

// ParseOrigins reads a comma-separated list of origins, each exactly as a browser sends it in
// Origin: http or https, a host, a port only when it is not the scheme's default, nothing
// else. Letter case is folded; anything else that a browser never sends (a path, even "/", a
// wildcard, "null", user info, a host that is not ASCII) is an error naming the entry, so that
// an origin the operator meant is never silently unmatched. Empty entries are skipped.
func ParseOrigins(list string) ([]string, error) {
	var origins []string
	for entry := range strings.SplitSeq(list, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		origin, err := parseOrigin(entry)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", entry, err)
		}
		if !slices.Contains(origins, origin) {
			origins = append(origins, origin)
		}
	}
	return origins, nil
}

func parseOrigin(entry string) (string, error) {
	const want = "write scheme://host[:port], as a browser sends it in Origin, such as https://www.school.example"
	for _, r := range entry {
		if r <= ' ' || r > '~' {
			return "", fmt.Errorf("not an origin (an international host is written in its xn-- form): %s", want)
		}
	}
	u, err := url.Parse(strings.ToLower(entry))
	switch {
	case err != nil, u.Scheme != "http" && u.Scheme != "https", u.Opaque != "", u.Host == "":
		return "", fmt.Errorf("not an http or https origin: %s", want)
	case u.User != nil, u.Path != "", u.RawQuery != "", u.ForceQuery, u.Fragment != "", strings.Contains(entry, "#"):
		return "", fmt.Errorf("an origin has no user, path, query or fragment: %s", want)
	case strings.ContainsAny(u.Host, "*%"):
		return "", fmt.Errorf("not an origin (no wildcards: list each origin): %s", want)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" || strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("not an origin: %s", want)
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || port[0] == '0' {
			return "", fmt.Errorf("port %q is not a port: %s", port, want)
		}
		// A browser leaves the scheme's default port out of Origin.
		if (u.Scheme == "https" && n == 443) || (u.Scheme == "http" && n == 80) {
			return "", fmt.Errorf("a browser leaves the default port out of Origin: write %s://%s", u.Scheme, u.Host[:len(u.Host)-len(port)-1])
		}
	}
	return u.Scheme + "://" + u.Host, nil
}

// CORS answers the CORS protocol for origins (ParseOrigins' form): a request whose Origin is
// exactly one of them gets Access-Control-Allow-Origin with that origin and the exposed
// headers, and its preflight (OPTIONS with Access-Control-Request-Method of a method the app
// takes) is answered 204 here, without a token, with the methods, headers and max-age. No
// other request gets a CORS header: an Origin that is not listed (in another letter case, a
// prefix or suffix of a listed one, "null") is served exactly as it would be without CORS, its
// preflight included (405, or the tus discovery's 401), and a browser then keeps the answer
// from the page. Every answer varies by Origin.
//
// Credentials (cookies) are never allowed: Playhead's API takes a bearer token in
// Authorization, which a page sends itself, so the allowed origin is never "*" and never
// paired with Access-Control-Allow-Credentials.
//
// Fiber's middleware/cors does not fit: it folds the request's Origin to lower case before
// matching (an origin no browser sends would be answered), and it answers every preflight
// 204 itself, from any origin, in place of the route's own OPTIONS.
func CORS(origins []string) fiber.Handler {
	allowed := make(map[string]bool, len(origins))
	for _, o := range origins {
		allowed[o] = true
	}
	methods := strings.Join(corsMethods, ", ")
	maxAge := strconv.Itoa(corsMaxAge)
	return func(c *fiber.Ctx) error {
		c.Vary(fiber.HeaderOrigin)
		origin := c.Get(fiber.HeaderOrigin)
		if !allowed[origin] {
			return c.Next()
		}
		if c.Method() == fiber.MethodOptions {
			requested := c.Get(fiber.HeaderAccessControlRequestMethod)
			if requested == "" {
				// An OPTIONS that is not a preflight (tus's discovery) is an actual request.
				c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
				c.Set(fiber.HeaderAccessControlExposeHeaders, corsExposedHeaders)
				return c.Next()
			}
			if !slices.Contains(corsMethods, requested) {
				return c.Next()
			}
			c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
			c.Set(fiber.HeaderAccessControlAllowMethods, methods)
			c.Set(fiber.HeaderAccessControlAllowHeaders, corsRequestHeaders)
			c.Set(fiber.HeaderAccessControlMaxAge, maxAge)
			return c.SendStatus(fiber.StatusNoContent)
		}
		c.Set(fiber.HeaderAccessControlAllowOrigin, origin)
		c.Set(fiber.HeaderAccessControlExposeHeaders, corsExposedHeaders)
		return c.Next()
	}
}

// Package web serves Playhead's player pages from files embedded in the binary: the home page
// (continue watching, the member's courses and an upload form) at /, the player at
// /watch/{mediaID}, a course's lessons with the member's progress at /course?c={collection}, the
// admins' import page at /imports, their queue console at /jobs, and the assets under /static/. The pages need no token to load: their JavaScript keeps the member's
// token in sessionStorage and sends it to the /v1 API itself.
//
// The token is pasted, comes in a #token=… link, or, when an identity provider is configured
// (SignIn), is the result of the provider's authorization code flow with PKCE, run in the
// browser by oidc-client-ts: GET /signin.json tells the pages the provider, and the provider
// sends the browser back to GET /signin/callback, which finishes the flow. The browser talks to
// the provider itself, so the server holds no session, and the policy gains only the
// provider's origin in connect-src.
//
// hls.js is not in the repository: `make web` copies it from node_modules (pinned in
// package-lock.json) into static/vendor/ before the binary is built. A binary built without it
// still serves the pages; the player then says that hls.js is missing, or uses the browser's
// native HLS where there is one.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/gofiber/fiber/v2"

	"github.com/playhead/playhead/httpserver"
	playersdk "github.com/playhead/playhead/sdk/js"
)

//go:embed pages static
var files embed.FS

// HLSAsset is the path, under static/, of the hls.js build that `make web` copies in.
const HLSAsset = "vendor/hls.min.js"

// PlayerSDKAsset is the path, under static/, of the player SDK (sdk/js, @playhead/player),
// which the watch page reports positions with.
const PlayerSDKAsset = "js/player-sdk.mjs"

// contentSecurityPolicy is sent with every page and asset: scripts, styles, images and API
// calls only from this origin; media also from blob: URLs (hls.js feeds the video element
// through Media Source Extensions) and data: URLs (hls.js gives each captions track it adds
// to the video the src "data:,WEBVTT", an empty WebVTT file, so that browsers keep the cues it
// writes into the track; blocked, Chromium logs the refusal as an error); hls.js's worker from
// this origin. Media files (segments that
// hls.js fetches, thumbnails, native HLS) may also come from mediaOrigins: the object store,
// whose presigned URLs players fetch directly. API calls may also go to providerOrigin (when
// not ""): the identity provider's discovery, keys and token endpoint, which the sign-in calls
// from the page.
func contentSecurityPolicy(mediaOrigins []string, providerOrigin string) string {
	extra := ""
	for _, o := range mediaOrigins {
		extra += " " + o
	}
	connect := extra
	if providerOrigin != "" {
		connect += " " + providerOrigin
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'" + extra + "; " +
		"media-src 'self' blob: data:" + extra + "; connect-src 'self'" + connect + "; worker-src 'self'; manifest-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}

// Config is what the pages need to know of the deployment.
type Config struct {
	// MediaOrigins are the origins (scheme://host[:port]) the pages may fetch media files from
	// besides their own: the object store's, when players fetch segments from it by presigned
	// URL.
	MediaOrigins []string
	// SignIn is the identity provider the pages sign in with; nil: a token is pasted (or comes
	// in a #token=… link) and no "Sign in" button shows.
	SignIn *SignIn
}

// SignIn is the identity provider of the pages' "Sign in". Nothing in it is a secret: the
// client is public (PKCE), and GET /signin.json gives all of it to anyone.
type SignIn struct {
	// Issuer is the provider, exactly as its tokens' iss says it; its discovery document is at
	// Issuer + .well-known/openid-configuration.
	Issuer string `json:"issuer"`
	// ClientID is the pages' public client at the provider, with the node's /signin/callback
	// among its redirect URIs.
	ClientID string `json:"client_id"`
	// Audience is the aud Playhead requires of a provider token. The pages send the provider's
	// access token when it is a JWT for this audience and the ID token otherwise (an opaque
	// access token, or one for another API), which Playhead accepts when Audience is the client
	// id.
	Audience string `json:"audience"`
}

// origin returns the scheme://host[:port] of the issuer, or an error if it is not an http(s)
// URL that can stand in a policy.
func (s SignIn) origin() (string, error) {
	u, err := url.Parse(s.Issuer)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		strings.ContainsAny(s.Issuer, " ;,'\"\n\r") {
		return "", fmt.Errorf("web: sign-in issuer %q is not an http(s) URL", s.Issuer)
	}
	if s.ClientID == "" || s.Audience == "" {
		return "", fmt.Errorf("web: sign-in needs a client id and an audience")
	}
	return u.Scheme + "://" + u.Host, nil
}

// asset is one embedded file, ready to send.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// Handler serves the pages and their assets.
type Handler struct {
	pages  map[string]asset // by name: "index.html", "watch.html"
	static map[string]asset // by path under static/
	csp    string
	signIn asset // GET /signin.json
}

// New reads the embedded files.
func New(cfg Config) (*Handler, error) {
	for _, o := range cfg.MediaOrigins {
		if o == "" || strings.ContainsAny(o, " ;,'\"\n\r") {
			return nil, fmt.Errorf("web: %q is not an origin", o)
		}
	}
	providerOrigin := ""
	// Sign-in off is an explicit answer, so that a page never has to tell "off" from "failed".
	var signIn any = map[string]bool{"enabled": false}
	if cfg.SignIn != nil {
		o, err := cfg.SignIn.origin()
		if err != nil {
			return nil, err
		}
		providerOrigin = o
		signIn = struct {
			Enabled bool `json:"enabled"`
			SignIn
		}{true, *cfg.SignIn}
	}
	body, err := json.Marshal(signIn)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	h := &Handler{pages: map[string]asset{}, static: map[string]asset{}, csp: contentSecurityPolicy(cfg.MediaOrigins, providerOrigin),
		signIn: asset{body: body, contentType: "application/json", etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}}
	for dir, into := range map[string]map[string]asset{"pages": h.pages, "static": h.static} {
		err := fs.WalkDir(files, dir, func(name string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := files.ReadFile(name)
			if err != nil {
				return err
			}
			ctype, ok := contentTypes[path.Ext(name)]
			if !ok {
				return fmt.Errorf("web: no content type for embedded file %s", name)
			}
			sum := sha256.Sum256(body)
			into[strings.TrimPrefix(name, dir+"/")] = asset{body: body, contentType: ctype,
				etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sum = sha256.Sum256(playersdk.Module)
	h.static[PlayerSDKAsset] = asset{body: playersdk.Module, contentType: contentTypes[".mjs"],
		etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
	for _, page := range []string{"index.html", "watch.html", "course.html", "imports.html", "jobs.html", "insights.html", "signin.html"} {
		if _, ok := h.pages[page]; !ok {
			return nil, fmt.Errorf("web: page %s is not embedded", page)
		}
	}
	return h, nil
}

// HasHLS reports whether hls.js was embedded (`make web` ran before the build).
func (h *Handler) HasHLS() bool {
	_, ok := h.static[HLSAsset]
	return ok
}

// contentTypes are the types of the files the pages use; New refuses any other kind of file.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".txt":  "text/plain; charset=utf-8",
}

// Register adds GET / , GET /watch/:mediaID, GET /course (a course page: the collection is in
// ?c=, read by its script, so that any collection name fits), GET /imports (the admins' import
// page), GET /jobs (their queue console), GET /insights (the audience of a media, ?media=, or of
// a collection, ?collection=), GET /signin.json (the pages' identity provider, or
// {"enabled":false}), GET /signin/callback (where the provider sends the browser back after a
// sign-in) and GET /static/* to router (the public app).
func (h *Handler) Register(router fiber.Router) {
	router.Get("/", h.securityHeaders, h.page("index.html"))
	httpserver.Get(router, "/signin.json", h.securityHeaders, func(c *fiber.Ctx) error { return send(c, h.signIn) })
	httpserver.Get(router, "/signin/callback", h.securityHeaders, h.page("signin.html"))
	httpserver.Get(router, "/course", h.securityHeaders, h.page("course.html"))
	httpserver.Get(router, "/imports", h.securityHeaders, h.page("imports.html"))
	httpserver.Get(router, "/jobs", h.securityHeaders, h.page("jobs.html"))
	httpserver.Get(router, "/insights", h.securityHeaders, h.page("insights.html"))
	httpserver.Get(router, "/watch/:mediaID", h.securityHeaders, h.watch)
	httpserver.Get(router, "/static/*", h.securityHeaders, h.asset)
}

// securityHeaders sets the headers every page and asset carries.
func (h *Handler) securityHeaders(c *fiber.Ctx) error {
	c.Set("Content-Security-Policy", h.csp)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	c.Set(fiber.HeaderXFrameOptions, "DENY")
	c.Set(fiber.HeaderReferrerPolicy, "no-referrer")
	c.Set("Cross-Origin-Opener-Policy", "same-origin")
	c.Set("Permissions-Policy", "camera=(), microphone=(), geolocation=()")
	return c.Next()
}

func (h *Handler) page(name string) fiber.Handler {
	a := h.pages[name]
	return func(c *fiber.Ctx) error { return send(c, a) }
}

// watch serves the player page for a positive integer media id; anything else is not a page.
func (h *Handler) watch(c *fiber.Ctx) error {
	if id, err := strconv.ParseInt(c.Params("mediaID"), 10, 64); err != nil || id <= 0 {
		return fiber.ErrNotFound
	}
	return send(c, h.pages["watch.html"])
}

func (h *Handler) asset(c *fiber.Ctx) error {
	a, ok := h.static[c.Params("*")]
	if !ok {
		return fiber.ErrNotFound
	}
	return send(c, a)
}

// send writes a with revalidation: browsers keep it, ask with If-None-Match, and get 304 until
// the binary's copy changes.
func send(c *fiber.Ctx, a asset) error {
	c.Set(fiber.HeaderCacheControl, "no-cache")
	c.Set(fiber.HeaderETag, a.etag)
	if match := c.Get(fiber.HeaderIfNoneMatch); match != "" && etagMatches(match, a.etag) {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, a.contentType)
	return c.Send(a.body)
}

// etagMatches reports whether an If-None-Match header names etag (or is *).
func etagMatches(header, etag string) bool {
	for _, tag := range strings.Split(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == etag || tag == "*" {
			return true
		}
	}
	return false
}

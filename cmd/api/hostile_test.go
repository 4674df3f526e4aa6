package main

// The hostile-input suite: every route of the public app × the input classes an
// attacker uses, against the real binary. Each route is in routeTable; TestHostileInput fails
// when the app the binary builds (appRoutes) has a route the table lacks, so a new route cannot
// ship without its hostile cases. Whatever a case expects, no answer may be a 500 (or no answer
// at all), no error answer on the API may be anything but JSON {"error": …}, and no answer may
// carry a byte of another member's private media.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/contract"
	"github.com/playhead/playhead/media"
)

// The input classes, in the order the summary prints them.
const (
	classAuth = "auth" // no, forged, expired or another member's token; a member on admin routes
	classPath = "path" // traversal and encoded-path variants of every path parameter
	classText = "text" // NUL, invalid UTF-8, control characters in every text field, query and path parameter
	classBody = "body" // malformed, mistyped, oversized and truncated bodies
	classFile = "file" // hostile files as uploads and imports: playlists, huge frames, bombs
	classSlow = "slow" // slow and silent clients, too many uploads at once
	classLink = "link" // private-address forms in an imported sheet's links and in webhook URLs
	// classMethod: a method the route does not take: HEAD where the document declares none,
	// and another that no route of its path has.
	classMethod = "method"
	// classEncoding: compressed bodies (decompression bombs) on every route that takes a body.
	classEncoding = "encoding"
	// classFraming: several Content-Length lines, or one beside Transfer-Encoding.
	classFraming = "framing"
	// classSeparator: characters a client may read as a line break (U+2028, U+2029, NEL, VT,
	// FF) in every text field, and in the caption fields a master playlist quotes.
	classSeparator = "separator"
	classCount     = 11
)

var classes = []string{classAuth, classPath, classText, classBody, classFile, classSlow, classLink, classMethod, classEncoding, classFraming, classSeparator}

// access is who a route lets in.
type access int

const (
	public access = iota
	member
	admin
	signed // a signed URL (media.Signer) is the credential; tokens are not
)

// hostileSigningSecret is the URL signing secret of the suite's server, so that cases can
// sign links the server never gives out (expired, for another member, for another media).
const hostileSigningSecret = "hostile-url-signing-secret-hostile-url-signing"

// hostileFixture is what the cases need: the server, tokens, and the ids of real things.
type hostileFixture struct {
	s          *binarytest.Server
	storageDir string
	a, b, adm  string // member A's, member B's and an admin's tokens
	mine       int64  // A's READY private media
	doomed     int64  // A's private media that the deletion routes' cases may delete
	minePrefix string // its outputs' storage prefix, hls/{id}/{claim}/
	mineURL    string // its master playlist's signed URL for A, as GET /v1/media/{id} gives it
	signer     *media.Signer
	theirs     int64  // B's READY private media
	theirsPath string // its playlist's storage key
	secrets    [][]byte
	importID   int64
	jobID      int64
	webhookID  int64 // a deleted endpoint
	captionID  int64 // a caption track of A's media
	contract   *contract.Checker
	// A's resumable uploads (their paths, /v1/uploads/{id}): one with some bytes stored, one
	// finished.
	upload, finishedUpload string
	// provider is the identity provider whose tokens the node accepts beside the secret's.
	provider *tokenProvider
}

// hostileRoute is one route of the public app and how to reach it.
type hostileRoute struct {
	method, pattern string
	access          access
	// target returns the path (and query) with the route's parameter set to param, or to a
	// valid value when param is "". Routes without a parameter ignore it.
	target func(f *hostileFixture, param string) string
	// hasParam says the route has a path parameter (or wildcard) that param replaces.
	hasParam bool
	// idParam says the parameter is a positive integer id: hostile values get a 4xx.
	idParam bool
	// jsonBody is a valid JSON body; textFields are its string fields.
	jsonBody   map[string]any
	textFields []string
	// query are the query parameters that carry text.
	query []string
	// head says the document declares HEAD beside this GET (monitors probe it); every other
	// route answers HEAD 405.
	head bool
}

func idTarget(format string, valid func(f *hostileFixture) int64) func(*hostileFixture, string) string {
	return func(f *hostileFixture, p string) string {
		if p == "" {
			p = strconv.FormatInt(valid(f), 10)
		}
		return fmt.Sprintf(format, p)
	}
}

func fixed(path string) func(*hostileFixture, string) string {
	return func(*hostileFixture, string) string { return path }
}

// jobKindTarget is the path of a kind's pause or resume, with history_retention as the valid kind.
func jobKindTarget(action string) func(*hostileFixture, string) string {
	return func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "history_retention"
		}
		return "/v1/admin/jobs/kinds/" + p + "/" + action
	}
}

func mineID(f *hostileFixture) int64    { return f.mine }
func doomedID(f *hostileFixture) int64  { return f.doomed }
func importID(f *hostileFixture) int64  { return f.importID }
func jobID(f *hostileFixture) int64     { return f.jobID }
func webhookID(f *hostileFixture) int64 { return f.webhookID }

// routeTable is every route of the public app. A HEAD route is its GET's, marked head.
var routeTable = []hostileRoute{
	{method: "GET", pattern: "/healthz", access: public, target: fixed("/healthz"), head: true},
	{method: "GET", pattern: "/readyz", access: public, target: fixed("/readyz"), head: true},
	{method: "GET", pattern: "/openapi.yaml", access: public, target: fixed("/openapi.yaml")},
	{method: "GET", pattern: "/", access: public, target: fixed("/"), head: true},
	{method: "GET", pattern: "/course", access: public, target: fixed("/course")},
	{method: "GET", pattern: "/imports", access: public, target: fixed("/imports")},
	{method: "GET", pattern: "/jobs", access: public, target: fixed("/jobs")},
	{method: "GET", pattern: "/insights", access: public, target: fixed("/insights")},
	{method: "GET", pattern: "/signin.json", access: public, target: fixed("/signin.json")},
	{method: "GET", pattern: "/signin/callback", access: public, target: fixed("/signin/callback?code=x&state=y")},
	{method: "GET", pattern: "/watch/:mediaID", access: public, target: idTarget("/watch/%s", mineID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/static/*", access: public, hasParam: true, target: func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "js/api.mjs"
		}
		return "/static/" + p
	}},
	{method: "GET", pattern: "/objects/hls/*", access: signed, hasParam: true, target: func(f *hostileFixture, p string) string {
		if p == "" {
			return f.mineURL
		}
		_, query, _ := strings.Cut(f.mineURL, "?")
		return "/objects/hls/" + p + "?" + query
	}, query: []string{"member", "expires", "sig"}},
	{method: "POST", pattern: "/v1/media", access: member, target: fixed("/v1/media")},
	{method: "GET", pattern: "/v1/media", access: member, target: fixed("/v1/media?owner=me"), query: []string{"owner", "cursor", "limit"}},
	{method: "POST", pattern: "/v1/admin/imports", access: admin, target: fixed("/v1/admin/imports")},
	{method: "GET", pattern: "/v1/playback/", access: member, target: fixed("/v1/playback/"), query: []string{"cursor", "limit"}},
	{method: "GET", pattern: "/v1/playback/:mediaID", access: member, target: idTarget("/v1/playback/%s", mineID), hasParam: true, idParam: true},
	{method: "POST", pattern: "/v1/playback/:mediaID", access: member, target: idTarget("/v1/playback/%s", mineID), hasParam: true, idParam: true,
		query: []string{"collection"}},
	{method: "PUT", pattern: "/v1/playback/:mediaID", access: member, target: idTarget("/v1/playback/%s", mineID), hasParam: true, idParam: true,
		jsonBody: map[string]any{"position_ms": 1000}},
	{method: "DELETE", pattern: "/v1/playback/:mediaID", access: member, target: idTarget("/v1/playback/%s", mineID), hasParam: true, idParam: true,
		query: []string{"forget"}},
	{method: "PUT", pattern: "/v1/playback/:mediaID/watched", access: member, target: idTarget("/v1/playback/%s/watched", mineID), hasParam: true, idParam: true},
	{method: "DELETE", pattern: "/v1/playback/:mediaID/watched", access: member, target: idTarget("/v1/playback/%s/watched", mineID), hasParam: true, idParam: true},
	{method: "PUT", pattern: "/v1/collections/:collection/watched", access: member, hasParam: true, target: func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "%EB%A0%88%EB%B2%A81" // 레벨1
		}
		return "/v1/collections/" + p + "/watched"
	}},
	{method: "DELETE", pattern: "/v1/collections/:collection/watched", access: member, hasParam: true, target: func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "%EB%A0%88%EB%B2%A81" // 레벨1
		}
		return "/v1/collections/" + p + "/watched"
	}},
	{method: "GET", pattern: "/v1/media/:id", access: member, target: idTarget("/v1/media/%s", mineID), hasParam: true, idParam: true},
	{method: "PATCH", pattern: "/v1/media/:id", access: member, target: idTarget("/v1/media/%s", mineID), hasParam: true, idParam: true,
		jsonBody: map[string]any{"title": "A's clip"}, textFields: []string{"title"}},
	{method: "DELETE", pattern: "/v1/media/:id", access: member, target: idTarget("/v1/media/%s", doomedID), hasParam: true, idParam: true},
	{method: "POST", pattern: "/v1/media/:id/captions", access: member, target: idTarget("/v1/media/%s/captions", mineID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/v1/media/:id/captions", access: member, target: idTarget("/v1/media/%s/captions", mineID), hasParam: true, idParam: true},
	{method: "PUT", pattern: "/v1/media/:id/markers", access: member, target: idTarget("/v1/media/%s/markers", mineID), hasParam: true, idParam: true,
		jsonBody: map[string]any{"intro": map[string]int64{"start_ms": 0, "end_ms": 500}}},
	// Its bodies (a JSON array, a WebVTT file) have cases of their own: hostileChapters.
	{method: "PUT", pattern: "/v1/media/:id/chapters", access: member, target: idTarget("/v1/media/%s/chapters", mineID), hasParam: true, idParam: true},
	{method: "DELETE", pattern: "/v1/media/:id/captions/:captionID", access: member, hasParam: true, idParam: true, target: func(f *hostileFixture, p string) string {
		if p == "" {
			p = strconv.FormatInt(f.captionID, 10)
		}
		return fmt.Sprintf("/v1/media/%d/captions/%s", f.mine, p)
	}},
	{method: "GET", pattern: "/v1/collections/:collection", access: member, hasParam: true, target: func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "%EB%A0%88%EB%B2%A81" // 레벨1
		}
		return "/v1/collections/" + p
	}},
	{method: "GET", pattern: "/v1/collections/:collection/audience", access: member, hasParam: true, target: func(_ *hostileFixture, p string) string {
		if p == "" {
			p = "%EB%A0%88%EB%B2%A81" // 레벨1
		}
		return "/v1/collections/" + p + "/audience"
	}},
	{method: "GET", pattern: "/v1/media/:id/audience", access: member, target: idTarget("/v1/media/%s/audience", mineID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/v1/me/collections", access: member, target: fixed("/v1/me/collections")},
	{method: "GET", pattern: "/v1/me/export", access: member, target: fixed("/v1/me/export"), query: []string{"format"}},
	{method: "GET", pattern: "/v1/me/settings", access: member, target: fixed("/v1/me/settings")},
	{method: "PUT", pattern: "/v1/me/settings", access: member, target: fixed("/v1/me/settings"), jsonBody: map[string]any{"history_paused": false}},
	// Every generic case of the erasures is refused before the handler (401, 403, 405, 400 for
	// the framing); the accepted erasures are hostileErasure's, of members no other case uses.
	{method: "DELETE", pattern: "/v1/me", access: member, target: fixed("/v1/me")},
	// Any positive id is accepted (202: the id is retired), so the hostile numbers are not 404s.
	{method: "DELETE", pattern: "/v1/admin/members/:id", access: admin, target: idTarget("/v1/admin/members/%s", func(*hostileFixture) int64 { return hostileErased }),
		hasParam: true},
	{method: "GET", pattern: "/v1/events", access: member, target: fixed("/v1/events")},
	{method: "POST", pattern: "/v1/admin/media", access: admin, target: fixed("/v1/admin/media"),
		jsonBody: map[string]any{"title": "registered", "duration_ms": 60000}, textFields: []string{"title", "status", "visibility"}},
	{method: "PATCH", pattern: "/v1/admin/media/:id", access: admin, target: idTarget("/v1/admin/media/%s", mineID), hasParam: true, idParam: true,
		jsonBody: map[string]any{"title": "renamed"}, textFields: []string{"title", "status", "visibility"}},
	{method: "GET", pattern: "/v1/admin/media/:id", access: admin, target: idTarget("/v1/admin/media/%s", mineID), hasParam: true, idParam: true},
	{method: "DELETE", pattern: "/v1/admin/media/:id", access: admin, target: idTarget("/v1/admin/media/%s", doomedID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/v1/admin/jobs", access: admin, target: fixed("/v1/admin/jobs"), query: []string{"status", "limit", "kind", "before", "group"}},
	{method: "GET", pattern: "/v1/admin/jobs/counts", access: admin, target: fixed("/v1/admin/jobs/counts")},
	{method: "GET", pattern: "/v1/admin/jobs/schedules", access: admin, target: fixed("/v1/admin/jobs/schedules")},
	{method: "GET", pattern: "/v1/admin/jobs/kinds", access: admin, target: fixed("/v1/admin/jobs/kinds")},
	// A pause of history_retention, the one kind no case waits for (it is never scheduled
	// without PLAYHEAD_HISTORY_RETENTION).
	{method: "POST", pattern: "/v1/admin/jobs/kinds/:kind/pause", access: admin, hasParam: true, target: jobKindTarget("pause")},
	{method: "POST", pattern: "/v1/admin/jobs/kinds/:kind/resume", access: admin, hasParam: true, target: jobKindTarget("resume")},
	{method: "GET", pattern: "/v1/admin/jobs/:id", access: admin, target: idTarget("/v1/admin/jobs/%s", jobID), hasParam: true, idParam: true},
	{method: "DELETE", pattern: "/v1/admin/jobs/:id", access: admin, target: idTarget("/v1/admin/jobs/%s", jobID), hasParam: true, idParam: true},
	{method: "POST", pattern: "/v1/admin/jobs/:id/retry", access: admin, target: idTarget("/v1/admin/jobs/%s/retry", jobID), hasParam: true, idParam: true},
	{method: "POST", pattern: "/v1/admin/jobs/:id/cancel", access: admin, target: idTarget("/v1/admin/jobs/%s/cancel", jobID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/v1/admin/imports/:id", access: admin, target: idTarget("/v1/admin/imports/%s", importID), hasParam: true, idParam: true},
	{method: "POST", pattern: "/v1/admin/webhooks", access: admin, target: fixed("/v1/admin/webhooks"),
		jsonBody: map[string]any{"url": "https://8.8.8.8/hook"}, textFields: []string{"url"}},
	{method: "GET", pattern: "/v1/admin/webhooks", access: admin, target: fixed("/v1/admin/webhooks")},
	{method: "GET", pattern: "/v1/admin/webhooks/:id", access: admin, target: idTarget("/v1/admin/webhooks/%s", webhookID), hasParam: true, idParam: true},
	{method: "DELETE", pattern: "/v1/admin/webhooks/:id", access: admin, target: idTarget("/v1/admin/webhooks/%s", webhookID), hasParam: true, idParam: true},
	{method: "GET", pattern: "/v1/admin/webhooks/:id/deliveries", access: admin, target: idTarget("/v1/admin/webhooks/%s/deliveries", webhookID),
		hasParam: true, idParam: true, query: []string{"limit"}},
	// The resumable uploads; their own cases are in hostile_tus_test.go.
	{method: "OPTIONS", pattern: "/v1/uploads", access: member, target: fixed("/v1/uploads")},
	{method: "POST", pattern: "/v1/uploads", access: member, target: fixed("/v1/uploads")},
	{method: "HEAD", pattern: "/v1/uploads/:uploadID", access: member, target: uploadTarget, hasParam: true},
	{method: "PATCH", pattern: "/v1/uploads/:uploadID", access: member, target: uploadTarget, hasParam: true},
	{method: "DELETE", pattern: "/v1/uploads/:uploadID", access: member, target: uploadTarget, hasParam: true},
}

// hostileCase is one request and what it must get.
type hostileCase struct {
	class   string
	method  string
	target  string // sent as is on the request line
	header  map[string]string
	body    []byte
	chunked bool
	// framing, when set, is written as the request's framing header lines in place of the
	// Content-Length line send writes, before body.
	framing string
	// want is the set of acceptable statuses; empty: any status below 500.
	want []int
	// allow, when set, is a method the answer's Allow header must name (a 405).
	allow string
	// answerHeader are headers the answer must carry, with these values.
	answerHeader map[string]string
}

func (c hostileCase) String() string {
	b := c.body
	if len(b) > 80 {
		b = append(b[:80:80], "…"...)
	}
	return fmt.Sprintf("[%s] %s %.200s %q", c.class, c.method, c.target, b)
}

// send writes the request exactly as given and reads the answer (status 0: none).
func (c hostileCase) send(t *testing.T, s *binarytest.Server) (int, http.Header, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.HTTPURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(60 * time.Second))
	var req bytes.Buffer
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\nHost: playhead\r\nConnection: close\r\n", c.method, c.target)
	for _, k := range slices.Sorted(maps.Keys(c.header)) {
		fmt.Fprintf(&req, "%s: %s\r\n", k, c.header[k])
	}
	switch {
	case c.framing != "":
		req.WriteString(c.framing + "\r\n\r\n")
		req.Write(c.body)
	case c.chunked:
		req.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		fmt.Fprintf(&req, "%x\r\n%s\r\n0\r\n\r\n", len(c.body), c.body)
	case c.body != nil:
		fmt.Fprintf(&req, "Content-Length: %d\r\n\r\n", len(c.body))
		req.Write(c.body)
	default:
		req.WriteString("\r\n")
	}
	go func() { _, _ = conn.Write(req.Bytes()) }() // the server may answer before reading it all
	resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: c.method})
	if err != nil {
		return 0, nil, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func jsonHeader(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}
}

// tokenFor returns the token a route's legitimate caller uses.
func (f *hostileFixture) tokenFor(r hostileRoute) string {
	if r.access == admin {
		return f.adm
	}
	return f.a
}

func validBody(r hostileRoute) []byte {
	if r.jsonBody == nil {
		return nil
	}
	b, _ := json.Marshal(r.jsonBody)
	return b
}

// forgedTokens are tokens no member holds: garbage, the wrong secret, expired, alg none.
func forgedTokens(t *testing.T) map[string]string {
	t.Helper()
	sign := func(secret string, claims jwt.MapClaims, method jwt.SigningMethod) string {
		tok, err := jwt.NewWithClaims(method, claims).SignedString(map[bool]any{true: jwt.UnsafeAllowNoneSignatureType, false: []byte(secret)}[method == jwt.SigningMethodNone])
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	now := time.Now()
	return map[string]string{
		"garbage":      "x.y.z",
		"wrong secret": sign("another-secret-another-secret-another", jwt.MapClaims{"sub": "201", "exp": now.Add(time.Hour).Unix()}, jwt.SigningMethodHS256),
		"expired":      sign(binarytest.Secret, jwt.MapClaims{"sub": "201", "exp": now.Add(-time.Hour).Unix()}, jwt.SigningMethodHS256),
		"alg none":     sign("", jwt.MapClaims{"sub": "201", "role": "admin", "exp": now.Add(time.Hour).Unix()}, jwt.SigningMethodNone),
		"no exp":       sign(binarytest.Secret, jwt.MapClaims{"sub": "201", "role": "admin"}, jwt.SigningMethodHS256),
		"bad subject":  sign(binarytest.Secret, jwt.MapClaims{"sub": "-1", "exp": now.Add(time.Hour).Unix()}, jwt.SigningMethodHS256),
		"NUL subject":  sign(binarytest.Secret, jwt.MapClaims{"sub": "1\x00", "exp": now.Add(time.Hour).Unix()}, jwt.SigningMethodHS256),
	}
}

// TestHostileInput runs the suite: synchronous cases for every route, then the hostile files,
// the slow clients and the private-address links, and prints how many cases each class has.
func TestHostileInput(t *testing.T) {
	f := setupHostile(t)
	counts := map[string]int{}
	table := map[string]hostileRoute{}
	for _, r := range routeTable {
		table[r.method+" "+r.pattern] = r
	}
	// The table must cover every route the binary's app has.
	routes := appRoutes(t)
	for _, r := range routes {
		key := r.Method + " " + r.Path
		if _, own := table[key]; r.Method == "HEAD" && !own { // a GET's HEAD
			key = "GET " + r.Path
			if !table[key].head {
				t.Errorf("route HEAD %s: the hostile-input table (cmd/api/hostile_test.go routeTable) has no GET %s with head set", r.Path, r.Path)
			}
		}
		if _, ok := table[key]; !ok {
			t.Errorf("route %s %s is not in the hostile-input table (cmd/api/hostile_test.go routeTable): add it with its cases", r.Method, r.Path)
		}
	}

	forged := forgedTokens(t)
	for _, r := range routeTable {
		for _, c := range casesFor(t, f, r, forged) {
			f.check(t, c)
			counts[c.class]++
		}
	}
	for _, c := range f.tusCases(t) {
		f.check(t, c)
		counts[c.class]++
	}
	counts[classSlow] += f.tusTrickle(t)
	counts[classBody] += f.tusNothingLeftBehind(t)
	counts[classFile] += f.hostileFiles(t)
	counts[classSlow] += f.slowClients(t)
	counts[classLink] += f.privateLinks(t)
	counts[classFile] += f.hostileCaptions(t)
	counts[classEncoding] += f.compressedBodies(t)
	counts[classSeparator] += f.captionSeparators(t)
	counts[classSeparator] += f.hostileChapters(t)
	counts[classAuth] += f.hostileErasure(t)
	counts[classAuth] += f.hostileDeletion(t)
	counts[classAuth] += f.hostileTokens(t)
	counts[classAuth] += f.hostileOrigins(t)

	total := 0
	var summary []string
	for _, c := range classes {
		total += counts[c]
		summary = append(summary, fmt.Sprintf("%s %d", c, counts[c]))
	}
	t.Logf("hostile input: %d cases over %d routes (%d with HEAD): %s", total, len(routeTable), len(routes), strings.Join(summary, ", "))
	if len(classes) != classCount {
		t.Fatalf("classes lists %d classes, want %d", len(classes), classCount)
	}
	for _, c := range classes {
		if counts[c] == 0 {
			t.Errorf("class %s has no case", c)
		}
	}
}

// check sends c and checks the answer against c.want and the rules every answer obeys.
func (f *hostileFixture) check(t *testing.T, c hostileCase) int {
	t.Helper()
	status, header, body := c.send(t, f.s)
	// fasthttp refuses a request line over its 4 KiB buffer itself: a client error too.
	tooLong := len(c.target) > 4000 && (status == http.StatusRequestHeaderFieldsTooLarge || status == http.StatusRequestURITooLong)
	switch {
	case tooLong:
	case status == 0:
		t.Errorf("%s: no answer", c)
	case status >= 500:
		t.Errorf("%s: status %d (%s)", c, status, body)
	case len(c.want) > 0 && !slices.Contains(c.want, status):
		t.Errorf("%s: status %d (%.300s), want one of %v", c, status, body, c.want)
	}
	for k, v := range c.answerHeader {
		if status != 0 && header.Get(k) != v {
			t.Errorf("%s: status %d with %s %q, want %q", c, status, k, header.Get(k), v)
		}
	}
	if c.allow != "" && !strings.Contains(header.Get("Allow"), c.allow) {
		t.Errorf("%s: status %d with Allow %q, want it to name %s", c, status, header.Get("Allow"), c.allow)
	}
	api := strings.HasPrefix(c.target, "/v1/") || strings.HasPrefix(c.target, "/objects/")
	if api && status >= 400 && c.method != "HEAD" {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			t.Errorf("%s: status %d with a body that is not JSON {\"error\": …}: %.200q", c, status, body)
		}
	}
	if status != 0 && header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: no X-Content-Type-Options: nosniff", c)
	}
	for _, s := range f.secrets {
		if len(body) > 0 && bytes.Contains(body, s) {
			t.Errorf("%s: the answer carries another member's private file", c)
		}
	}
	// A 431 too: the document lists it on every operation, since it can answer any request.
	if status != 0 {
		f.checkContract(t, c, status, header, body)
	}
	return status
}

// checkContract checks the case's exchange against api/openapi.yaml like every request of
// binarytest's client (internal/contract): the status must be one the document lists for the
// route, and the body its schema.
func (f *hostileFixture) checkContract(t *testing.T, c hostileCase, status int, header http.Header, body []byte) {
	t.Helper()
	reqHeader := http.Header{}
	for k, v := range c.header {
		reqHeader.Set(k, v)
	}
	err := f.contract.Check(contract.Exchange{Method: c.method, Target: c.target, Header: reqHeader, Body: c.body,
		Status: status, ResponseHeader: header, ResponseBody: body})
	if err != nil {
		t.Errorf("%s: contract (api/openapi.yaml): %v", c, err)
	}
}

func setupHostile(t *testing.T) *hostileFixture {
	t.Helper()
	storageDir := t.TempDir()
	env := pipelineEnv("all", "hostile", storageDir, t.TempDir(), "ultrafast")
	env["PLAYHEAD_UPLOADS_PER_MEMBER"], env["PLAYHEAD_UPLOADS_TOTAL"] = "2", "4"
	env["PLAYHEAD_UPLOAD_IDLE_TIMEOUT"] = "2s"
	env["PLAYHEAD_HTTP_READ_TIMEOUT"] = "2s"
	env["PLAYHEAD_JOB_MAX_ATTEMPTS"] = "1"
	env["PLAYHEAD_INGEST_ATTEMPTS"] = "1"
	env["PLAYHEAD_URL_SIGNING_SECRET"] = hostileSigningSecret
	// Abandoned resumable uploads are removed within a second of their expiry.
	env["PLAYHEAD_ORPHAN_SWEEP_INTERVAL"] = "1s"
	// A member's upload requests: a burst the suite's own (about 35 of member A) fits in, and
	// a rate slow enough that a member sending 260 in a row is refused some (tusTrickle).
	env["PLAYHEAD_UPLOAD_RATE"], env["PLAYHEAD_UPLOAD_BURST"] = "0.5", "200"
	// The node runs within a memory bound, as in a container: the compressed bodies' check
	// reads its peak resident memory.
	env["GOMEMLIMIT"] = "256MiB"
	env["PLAYHEAD_CORS_ORIGINS"] = hostileCORSOrigin
	provider := newTokenProvider(t)
	maps.Copy(env, provider.env())
	s := binarytest.Start(t, env)
	signer, err := media.NewSigner([]byte(hostileSigningSecret))
	if err != nil {
		t.Fatal(err)
	}
	checker, err := contract.Shared()
	if err != nil {
		t.Fatal(err)
	}
	f := &hostileFixture{s: s, contract: checker, storageDir: storageDir, a: binarytest.Token(t, 201, false), b: binarytest.Token(t, 202, false),
		adm: binarytest.Token(t, 1, true), signer: signer, provider: provider}
	f.mine, f.minePrefix = readyUpload(t, s, f.a, "A's clip", "PRIVATE")
	f.mineURL = mediaOf(t, s, f.a, f.mine).HLSURL
	f.doomed = createOwned(t, s, f.adm, 201, "A's clip to delete")
	theirs, theirsPrefix := readyUpload(t, s, f.b, "B's private clip", "PRIVATE")
	f.theirs, f.theirsPath = theirs, media.AssembledMaster(theirs)
	// B's master playlist is assembled when served: whatever form it took, it would name the
	// folder of B's rendition.
	f.secrets = append(f.secrets, []byte(strings.TrimSuffix(strings.TrimPrefix(theirsPrefix, fmt.Sprintf("hls/%d/", theirs)), "/")))
	for _, file := range bFiles {
		content, err := os.ReadFile(filepath.Join(storageDir, filepath.FromSlash(theirsPrefix+file)))
		if err != nil {
			t.Fatal(err)
		}
		f.secrets = append(f.secrets, content)
	}
	f.captionID = addCaption(t, f, "English", []byte("1\n00:00:00,500 --> 00:00:01,500\nA's line\n"))
	imp := s.Import(t, f.adm, "seed.csv", "collection,chapter,order,video_url\nc,1,1,http://127.0.0.1:1/x.mp4\n")
	f.importID = imp.ID
	// A registration that works, deleted at once: no case needs it to exist (they are refused
	// before the lookup), and while it existed the suite's events would be sent out of this
	// machine to its public address.
	f.webhookID = registerWebhook(t, s, f.adm, "https://8.8.8.8/hook").ID
	s.MustDo(t, http.StatusNoContent, http.MethodDelete, s.URL("/v1/admin/webhooks/%d", f.webhookID), f.adm, nil)
	// The deleted endpoint's routes answer 404, which no case below reaches (their ids are
	// refused first): checked here against the document like every exchange of the client.
	for _, path := range []string{"/v1/admin/webhooks/%d", "/v1/admin/webhooks/%d/deliveries"} {
		s.MustDo(t, http.StatusNotFound, http.MethodGet, s.URL(path, f.webhookID), f.adm, nil)
	}
	s.MustDo(t, http.StatusNotFound, http.MethodDelete, s.URL("/v1/admin/webhooks/%d", f.webhookID), f.adm, nil)
	if err := s.Pool(t).QueryRow(t.Context(), `SELECT id FROM jobs ORDER BY id LIMIT 1`).Scan(&f.jobID); err != nil {
		t.Fatal(err)
	}
	f.upload = s.TusUpload(t, f.a, 1000, "", []byte("the first bytes of A's upload"))
	f.finishedUpload = s.TusUpload(t, f.a, 3, "", []byte("abc"))
	return f
}

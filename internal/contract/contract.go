// Package contract checks HTTP exchanges with the playhead server against its OpenAPI 3.1
// document (api/openapi.yaml) with libopenapi-validator, which validates 3.1 documents and
// their JSON Schema 2020-12 schemas. Every answer must have a status the document lists for
// its operation, with a body its schema for that status accepts; a request the server
// accepted (status below 400) must be one the document describes. Requests the server refused
// are not held to the document: the bad-input suites send them on purpose.
//
// The document itself must pass two independent validators: libopenapi's and kin-openapi's
// (New). libopenapi-validator alone lets through a schema with stray keys (JSON Schema allows
// unknown keywords) that every other tool refuses.
//
// Routes are matched the way Fiber matches them (case-insensitive, trailing slash ignored, a
// parameter is one non-empty segment, a parameter named "path" is the rest of the path), so
// an answer is judged by the operation the server really ran. HEAD is an operation of its own,
// not implied by GET: a HEAD answered below 400 where the document declares none fails, and a
// declared one is checked for its status (it has no body).
//
// Shared is the checker every test of a test binary uses; Transport checks every exchange of
// an http.Client, and Report prints the routes × statuses the checks saw.
package contract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/errors"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"

	"github.com/playhead/playhead/api"
)

// restParam is the name of the parameter that stands for Fiber's "*": the rest of the path.
const restParam = "{path}"

// Checker checks exchanges against one document and counts what it saw.
type Checker struct {
	validator validator.Validator
	routes    []route

	mu   sync.Mutex
	seen map[string]map[int]int // "GET /v1/x" → status → exchanges
}

// route is one operation of the document.
type route struct {
	method   string // upper case
	template string // as in the document: /v1/playback/{mediaID}
	segments []string
	item     *v3.PathItem
	statuses []int // documented, sorted
}

func (r route) key() string { return r.method + " " + r.template }

// New parses spec, validates it against the OpenAPI specification (3.1 here) with libopenapi
// and with kin-openapi, and returns a checker for it.
func New(spec []byte) (*Checker, error) {
	if err := validateKin(spec); err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, fmt.Errorf("parse the OpenAPI document: %w", err)
	}
	if v := doc.GetVersion(); !strings.HasPrefix(v, "3.1") {
		return nil, fmt.Errorf("the document is OpenAPI %s, want 3.1", v)
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, fmt.Errorf("build the validator: %v", errs)
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("the OpenAPI document is not valid: %s", describe(verrs))
	}
	model, err := doc.BuildV3Model()
	if err != nil {
		return nil, fmt.Errorf("build the OpenAPI model: %w", err)
	}
	c := &Checker{validator: v, seen: map[string]map[int]int{}}
	for template, item := range model.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			r := route{method: strings.ToUpper(method), template: template, segments: split(template), item: item}
			if op.Responses != nil && op.Responses.Codes != nil {
				for code := range op.Responses.Codes.KeysFromOldest() {
					n, err := strconv.Atoi(code)
					if err != nil {
						return nil, fmt.Errorf("%s: response %q: use explicit status codes so that each can be checked", r.key(), code)
					}
					r.statuses = append(r.statuses, n)
				}
			}
			if op.Responses == nil || op.Responses.Default != nil {
				return nil, fmt.Errorf("%s: a default response would describe every status: list them", r.key())
			}
			slices.Sort(r.statuses)
			c.routes = append(c.routes, r)
		}
	}
	return c, nil
}

// validateKin validates spec with kin-openapi, which reads the OpenAPI object model strictly:
// a key that is neither a field of its object nor an x- extension is an error ("extra sibling
// fields"). Validate turns on its 3.1 rules by itself when the document says openapi: 3.1.x;
// there is no loader option for it.
func validateKin(spec []byte) error {
	doc, err := openapi3.NewLoader().LoadFromData(spec)
	if err != nil {
		return fmt.Errorf("kin-openapi: load the OpenAPI document: %w", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		return fmt.Errorf("kin-openapi: the document is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableMultiError()); err != nil {
		return fmt.Errorf("kin-openapi: the OpenAPI document is not valid: %w", err)
	}
	return nil
}

var (
	sharedOnce    sync.Once
	shared        *Checker
	sharedLoadErr error
)

// Shared returns the checker of api.Document, built once per process.
func Shared() (*Checker, error) {
	sharedOnce.Do(func() { shared, sharedLoadErr = New(api.Document) })
	return shared, sharedLoadErr
}

// Routes returns every documented operation as "METHOD /template", sorted.
func (c *Checker) Routes() []string {
	out := make([]string, 0, len(c.routes))
	for _, r := range c.routes {
		out = append(out, r.key())
	}
	slices.Sort(out)
	return out
}

// FiberRoute returns the document's form of a Fiber route: ":name" becomes "{name}", "*"
// becomes "{path}", and a trailing slash is dropped.
func FiberRoute(method, path string) string {
	segments := split(path)
	for i, s := range segments {
		switch {
		case strings.HasPrefix(s, ":"):
			segments[i] = "{" + s[1:] + "}"
		case s == "*":
			segments[i] = restParam
		}
	}
	return method + " /" + strings.Join(segments, "/")
}

// Exchange is one request and the answer to it.
type Exchange struct {
	Method string
	// Target is the request target as sent: the path, escaped as on the wire, and query.
	Target string
	Header http.Header
	Body   []byte

	Status         int
	ResponseHeader http.Header
	ResponseBody   []byte
}

func (e Exchange) String() string {
	return fmt.Sprintf("%s %.200s → %d %.300q", e.Method, e.Target, e.Status, e.ResponseBody)
}

// Unrouted is the key Report counts requests under that match no documented operation.
const Unrouted = "(no route)"

// Check checks e against the document and counts it. The error says every way e departs
// from the document.
func (c *Checker) Check(e Exchange) error {
	path, _, _ := strings.Cut(e.Target, "?")
	r, ok := c.match(e.Method, path)
	if !ok {
		c.count(Unrouted, e.Status)
		// Fiber answers 404 (no such path) or 405 (no such method), 401 under /v1 before it
		// knows: never a success for something the document does not have.
		if e.Status < 400 {
			return fmt.Errorf("%s: the server answered %d to a request no documented operation matches", e, e.Status)
		}
		return nil
	}
	c.count(r.key(), e.Status)
	if !slices.Contains(r.statuses, e.Status) {
		return fmt.Errorf("%s: status %d is not documented for %s (documented: %v)", e, e.Status, r.key(), r.statuses)
	}
	if e.Method == http.MethodHead {
		return nil // a HEAD answer has no body to check
	}
	req, err := e.request(r)
	if err != nil {
		if e.Status < 400 {
			return fmt.Errorf("%s: the server accepted a request target Go cannot parse: %v", e, err)
		}
		req = &http.Request{Method: e.Method, URL: &url.URL{Path: "/"}, Header: e.Header}
	}
	resp := &http.Response{StatusCode: e.Status, Header: e.ResponseHeader, Body: io.NopCloser(bytes.NewReader(e.ResponseBody)), Request: req}
	var problems []*errors.ValidationError
	if ok, errs := c.validator.GetResponseBodyValidator().ValidateResponseBodyWithPathItem(req, resp, r.item, r.template); !ok {
		problems = append(problems, errs...)
	}
	if e.Status < 400 {
		req.Body = io.NopCloser(bytes.NewReader(e.Body))
		if ok, errs := c.validator.ValidateHttpRequestWithPathItem(req, r.item, r.template); !ok {
			problems = append(problems, errs...)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s: not as %s documents it: %s", e, r.key(), describe(problems))
	}
	return nil
}

// request returns e's request for the validator. The rest of the path that a "{path}"
// parameter stands for is made one segment (its slashes escaped), since OpenAPI parameters
// have none.
func (e Exchange) request(r route) (*http.Request, error) {
	u, err := url.ParseRequestURI(e.Target)
	if err != nil {
		return nil, err
	}
	if n := len(r.segments); n > 0 && r.segments[n-1] == restParam {
		if segments := split(u.Path); len(segments) > n {
			u.Path = "/" + strings.Join(segments[:n-1], "/") + "/" + strings.Join(segments[n-1:], "%2F")
			u.RawPath = ""
		}
	}
	header := e.Header
	if header == nil {
		header = http.Header{}
	}
	return &http.Request{Method: e.Method, URL: u, Header: header, Host: "playhead", Body: http.NoBody}, nil
}

// match finds the operation Fiber would run for method and the escaped path: the one with
// the most literal segments among those that match.
func (c *Checker) match(method, path string) (route, bool) {
	segments := split(path)
	best, bestLiterals := route{}, -1
	for _, r := range c.routes {
		if r.method != method {
			continue
		}
		if literals, ok := matches(r.segments, segments); ok && literals > bestLiterals {
			best, bestLiterals = r, literals
		}
	}
	return best, bestLiterals >= 0
}

// matches says whether a path's segments fit a template's, and how many literal segments the
// template has.
func matches(template, path []string) (literals int, ok bool) {
	for i, t := range template {
		if t == restParam && i == len(template)-1 {
			return literals, len(path) >= i
		}
		if i >= len(path) {
			return 0, false
		}
		if strings.HasPrefix(t, "{") {
			if path[i] == "" {
				return 0, false
			}
			continue
		}
		if !strings.EqualFold(t, path[i]) {
			return 0, false
		}
		literals++
	}
	return literals, len(path) == len(template)
}

// split returns the segments of a path without its leading and trailing slash ("/" has none).
func split(path string) []string {
	path = strings.TrimSuffix(strings.TrimPrefix(path, "/"), "/")
	if path == "" {
		return nil
	}
	return strings.Split(path, "/")
}

func (c *Checker) count(key string, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[key] == nil {
		c.seen[key] = map[int]int{}
	}
	c.seen[key][status]++
}

// Report returns the routes × statuses the checks saw, one line per documented operation
// (those no check reached marked so) and one for requests no operation matches.
func (c *Checker) Report() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	reached, pairs, seenPairs := 0, 0, 0
	for _, key := range c.Routes() {
		statuses := c.seen[key]
		r, _ := c.route(key)
		pairs += len(r.statuses)
		if len(statuses) == 0 {
			fmt.Fprintf(&b, "contract:   %-36s not reached (documented %v)\n", key, r.statuses)
			continue
		}
		reached++
		seenPairs += len(statuses)
		fmt.Fprintf(&b, "contract:   %-36s %s\n", key, counts(statuses))
	}
	if u := c.seen[Unrouted]; len(u) > 0 {
		fmt.Fprintf(&b, "contract:   %-36s %s\n", Unrouted, counts(u))
	}
	return fmt.Sprintf("contract: %d of %d documented operations reached, %d of %d documented (operation, status) pairs seen\n%s",
		reached, len(c.routes), seenPairs, pairs, b.String())
}

func (c *Checker) route(key string) (route, bool) {
	for _, r := range c.routes {
		if r.key() == key {
			return r, true
		}
	}
	return route{}, false
}

func counts(statuses map[int]int) string {
	var parts []string
	for _, s := range slices.Sorted(maps.Keys(statuses)) {
		parts = append(parts, fmt.Sprintf("%d×%d", s, statuses[s]))
	}
	return strings.Join(parts, " ")
}

func describe(errs []*errors.ValidationError) string {
	var parts []string
	for _, e := range errs {
		msg := e.Message
		if e.Reason != "" {
			msg += " (" + e.Reason + ")"
		}
		for _, s := range e.SchemaValidationErrors {
			msg += "; " + s.FieldPath + ": " + s.Reason
		}
		parts = append(parts, msg)
	}
	return strings.Join(parts, "; ")
}

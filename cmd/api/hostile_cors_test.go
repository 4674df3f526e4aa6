package main

import (
	"net/http"
	"strings"
	"testing"
)

// hostileCORSOrigin is the one origin the suite's node lists in PLAYHEAD_CORS_ORIGINS.
const hostileCORSOrigin = "https://www.school.example"

// unlistedOrigins are origins a hostile page may send that are not hostileCORSOrigin: another
// site, the null origin (sandboxed frames, file: pages), look-alikes that share a prefix or a
// suffix with it, another scheme or port, other letter cases, and two origins in one header.
var unlistedOrigins = []string{
	"https://evil.example", "null", "https://www.school.example.evil.com", "https://evilwww.school.example",
	"https://evil.www.school.example", "https://www.school.exampl", "http://www.school.example", "https://www.school.example:8443",
	"https://www.school.example:443", "https://www.school.example/", "HTTPS://WWW.SCHOOL.EXAMPLE", "https://www.School.example",
	"https://www.school.example, https://evil.example", "https://www.school.example%00", "*",
}

// hostileOrigins runs the CORS cases on every route of the table: from an unlisted origin, a
// preflight gets the route's own answer (never the 204) and no Access-Control-* header, and a
// request is authenticated as without an Origin (401 without a token, the member's answer with
// one) and carries no CORS header either; from the listed origin, the preflight is 204 without
// a token and a request's answer, a 401 included, names that origin.
func (f *hostileFixture) hostileOrigins(t *testing.T) int {
	n := 0
	for _, r := range routeTable {
		target := r.target(f, "")
		for _, origin := range unlistedOrigins {
			n++
			pre := hostileCase{class: classAuth, method: http.MethodOptions, target: target, header: map[string]string{
				"Origin": origin, "Access-Control-Request-Method": r.method, "Access-Control-Request-Headers": "authorization,content-type"}}
			status, header, body := pre.send(t, f.s)
			if status == 0 || status >= 500 || status == http.StatusNoContent || corsHeader(header) != "" {
				t.Errorf("%s from %q: %d with %s (%.200s); want the route's own answer and no CORS header", pre, origin, status, corsHeader(header), body)
			}
			if r.access == member || r.access == admin {
				n += 2
				f.check(t, hostileCase{class: classAuth, method: r.method, target: target, header: map[string]string{"Origin": origin},
					want: []int{401}, answerHeader: map[string]string{"Access-Control-Allow-Origin": "", "Access-Control-Expose-Headers": ""}})
				// An event stream's answer never ends.
				if r.method == http.MethodGet && r.access == member && r.pattern != "/v1/events" {
					// The member's own answer, as without an Origin; only without the CORS header.
					c := hostileCase{class: classAuth, method: r.method, target: target, header: map[string]string{"Origin": origin,
						"Authorization": "Bearer " + f.tokenFor(r)}, answerHeader: map[string]string{"Access-Control-Allow-Origin": ""}}
					if status := f.check(t, c); status == 401 || status == 403 {
						t.Errorf("%s: %d; a request from an unlisted origin is authenticated as any other", c, status)
					}
				} else {
					n--
				}
				continue
			}
			n++
			f.check(t, hostileCase{class: classAuth, method: r.method, target: target, header: map[string]string{"Origin": origin},
				answerHeader: map[string]string{"Access-Control-Allow-Origin": ""}})
		}
		n += 2
		pre := hostileCase{class: classAuth, method: http.MethodOptions, target: target, header: map[string]string{
			"Origin": hostileCORSOrigin, "Access-Control-Request-Method": r.method, "Access-Control-Request-Headers": "authorization,content-type"}}
		if status, header, _ := pre.send(t, f.s); status != http.StatusNoContent || header.Get("Access-Control-Allow-Origin") != hostileCORSOrigin ||
			!strings.Contains(header.Get("Access-Control-Allow-Headers"), "Authorization") || header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("%s: %d %v; want 204 naming the origin and allowing Authorization, never credentials", pre, status, header)
		}
		c := hostileCase{class: classAuth, method: r.method, target: target, header: map[string]string{"Origin": hostileCORSOrigin},
			answerHeader: map[string]string{"Access-Control-Allow-Origin": hostileCORSOrigin}}
		if r.access == member || r.access == admin {
			c.want = []int{401}
		}
		f.check(t, c)
	}
	return n
}

// corsHeader names the first Access-Control-* header of h, "" when it has none.
func corsHeader(h http.Header) string {
	for name := range h {
		if strings.HasPrefix(name, "Access-Control-") {
			return name
		}
	}
	return ""
}

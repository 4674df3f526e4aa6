package main

// The cases of the hostile-input suite (hostile_test.go): per route and input class, what is
// sent and what must come back.

import (
	"bytes"
	"encoding/json"
	"maps"
	"mime/multipart"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/media"
)

// hostileParams are path parameter values no route may take for an id, and no route may
// answer with a 500.
var hostileParams = []string{
	"..", "%2e%2e", "..%2f..%2f", "1%2f..%2f2", "%2e%2e%2f%2e%2e%2fetc%2fpasswd", `..\..\`, "..%5c..%5c", "%252e%252e",
	"%c0%ae%c0%ae", "%00", "1%00", "%ff", "%ff%fe", "-1", "0", "99999999999999999999", "1e3", "0x10", "%201", "1;select",
	"%27", "%22%3E%3Cscript%3E", strings.Repeat("9", 4096), strings.Repeat("a", 4096), "%0d%0aX-Injected:%201",
}

// hostileNumbers are valid ids and counts beyond 32 bits, which a path or query parameter of
// the API may carry and no statement may take as an int4 (the queue console's before did:
// 500). As ids of the API they name nothing: 404.
var hostileNumbers = []string{"2147483648", "9223372036854775807"}

// hostileTexts are JSON string values, as written in the JSON, that PostgreSQL cannot store
// or that have no place in a one-line field (refused: 422), or that the JSON decoder turns
// into valid text (a lone surrogate or raw invalid UTF-8 becomes U+FFFD: any status below
// 500), or that make the body too large (413).
var hostileTexts = []struct {
	value   string
	refused bool
}{
	{`\u0000`, true}, {`a\u0000b`, true}, {`\u001b[2J`, true}, {`bell\u0007`, true}, {`c1\u0085x`, true},
	{`line\nbreak`, true}, {`\ud800`, false}, {"\xff\xfe", false}, {strings.Repeat("long", 30_000), true},
}

// hostileQueryTexts are the same for query and path parameters, percent-encoded.
var hostileQueryTexts = []string{"%00", "a%00b", "%ff%fe", "%1b%5b2J", "%c0%80", "%0d%0a", strings.Repeat("x", 8000)}

// withQueryParam returns target with query parameter name set to value (percent-encoded
// already) in place of any value target gives it.
func withQueryParam(target, name, value string) string {
	path, query, _ := strings.Cut(target, "?")
	var kept []string
	for part := range strings.SplitSeq(query, "&") {
		if part != "" && !strings.HasPrefix(part, name+"=") {
			kept = append(kept, part)
		}
	}
	return path + "?" + strings.Join(append(kept, name+"="+value), "&")
}

// casesFor returns every synchronous case of route r.
func casesFor(t *testing.T, f *hostileFixture, r hostileRoute, forged map[string]string) []hostileCase {
	var out []hostileCase
	target, tok := r.target(f, ""), f.tokenFor(r)
	body := validBody(r)
	methods := []string{r.method}
	if r.head {
		methods = append(methods, "HEAD")
	}
	// auth: the anonymous client and the other member.
	for _, m := range methods {
		if r.access == signed {
			out = append(out, signedLinkCases(f, m, forged)...)
			continue
		}
		if r.access == public {
			out = append(out, hostileCase{class: classAuth, method: m, target: target, header: bearer(forged["garbage"])})
			continue
		}
		out = append(out, hostileCase{class: classAuth, method: m, target: target, body: body, want: []int{401}})
		for _, forgedTok := range forged {
			out = append(out, hostileCase{class: classAuth, method: m, target: target, header: jsonHeader(forgedTok), body: body, want: []int{401}})
		}
		out = append(out, hostileCase{class: classAuth, method: m, target: target, header: map[string]string{"Authorization": "Basic YTpi"}, want: []int{401}})
		if r.access == admin {
			out = append(out, hostileCase{class: classAuth, method: m, target: target, header: jsonHeader(f.a), body: body, want: []int{403}})
		}
		if r.access == member && r.idParam {
			// Member B on A's private media: as if it did not exist.
			out = append(out, hostileCase{class: classAuth, method: m, target: target, header: jsonHeader(f.b), body: body, want: []int{404}})
		}
	}
	// path: traversal and encoded variants of the parameter.
	if r.hasParam {
		params := hostileParams
		if r.pattern == "/objects/hls/*" {
			params = objectTraversals(f)
		}
		for _, p := range params {
			var want []int
			switch {
			case r.pattern == "/objects/hls/*":
				want = []int{400, 403, 404}
			case r.idParam || r.pattern == "/static/*" || strings.HasPrefix(r.pattern, "/v1/uploads/") || strings.HasPrefix(r.pattern, "/v1/admin/jobs/kinds/"):
				want = []int{400, 404}
			}
			for _, m := range methods {
				out = append(out, hostileCase{class: classPath, method: m, target: r.target(f, p), header: jsonHeader(tok), body: body, want: want})
			}
		}
		if r.idParam && strings.HasPrefix(r.pattern, "/v1/") {
			for _, p := range hostileNumbers {
				for _, m := range methods {
					out = append(out, hostileCase{class: classPath, method: m, target: r.target(f, p), header: jsonHeader(tok), body: body, want: []int{404}})
				}
			}
		}
	}
	// text: every text field, query parameter and text path parameter.
	for _, field := range r.textFields {
		for _, v := range hostileTexts {
			var want []int
			if v.refused {
				want = []int{400, 413, 422}
			}
			out = append(out, hostileCase{class: classText, method: r.method, target: target, header: jsonHeader(tok),
				body: jsonWith(r.jsonBody, field, v.value), want: want})
		}
	}
	for _, q := range r.query {
		for _, v := range hostileQueryTexts {
			if r.access == signed {
				// In place of the parameter's value, and added once more: a changed link.
				path, query, _ := strings.Cut(target, "?")
				var kept []string
				for part := range strings.SplitSeq(query, "&") {
					if !strings.HasPrefix(part, q+"=") {
						kept = append(kept, part)
					}
				}
				out = append(out,
					hostileCase{class: classText, method: r.method, target: path + "?" + strings.Join(append(kept, q+"="+v), "&"), want: []int{403}},
					hostileCase{class: classText, method: r.method, target: target + "&" + q + "=" + v, want: []int{403}})
				continue
			}
			want := []int{400}
			if r.pattern == "/v1/me/export" { // format is json or csv: any other text is 422
				want = []int{400, 422}
			}
			out = append(out, hostileCase{class: classText, method: r.method, target: withQueryParam(target, q, v), header: bearer(tok), want: want})
		}
		if r.access != signed {
			for _, v := range hostileNumbers {
				out = append(out, hostileCase{class: classText, method: r.method, target: withQueryParam(target, q, v), header: bearer(tok)})
			}
		}
	}
	if r.method == "GET" && r.pattern == "/v1/media" {
		// owner is required: without it, or given twice with another value first, 400.
		for _, bad := range []string{"/v1/media", "/v1/media?limit=5", "/v1/media?owner=2&owner=me", "/v1/media?owner=me&limit=-1"} {
			out = append(out, hostileCase{class: classText, method: r.method, target: bad, header: bearer(tok), want: []int{400}})
		}
	}
	if r.pattern == "/v1/events" {
		// Last-Event-ID is the stream's one input: anything but a non-negative integer is 400
		// (a valid one opens a stream that never ends, so no case sends one).
		for _, v := range []string{"abc", "-1", "9223372036854775808", strings.Repeat("9", 1000), "1 OR 1=1", "1;DROP TABLE members",
			"0x10", "1e3", "+-1", "\xff\xfe", "1\x01", "%00", "١٢"} {
			out = append(out, hostileCase{class: classText, method: r.method, target: target,
				header: map[string]string{"Authorization": "Bearer " + tok, "Last-Event-ID": v}, want: []int{400}})
		}
	}
	if r.pattern == "/objects/hls/*" {
		// The Range header of an fMP4 rendition and of the storyboard: one readable
		// range is 206, one past the end 416, anything else the whole file; never a 500.
		later := time.Now().Add(time.Hour)
		for _, file := range []string{"v0/media.mp4", "storyboard/storyboard.vtt", "storyboard/sprite_000.jpg"} {
			link := f.signer.URL(201, f.minePrefix+file, later)
			for _, v := range []string{"bytes=0-0", "bytes=999999999999999999999-", "bytes=-99999999999999999999", "bytes=18446744073709551615-",
				"bytes=--1", "bytes=a-b", "bytes=5-1", "bytes=-0", "bytes= 0-1", "bytes=0-1," + strings.Repeat("0-1,", 2000) + "0-1",
				"bits=0-1", "bytes=0x10-0x20", "bytes=\xff-", "bytes=1-2\x01", "bytes=١-٢"} {
				out = append(out, hostileCase{class: classText, method: r.method, target: link, header: map[string]string{"Range": v},
					want: []int{200, 206, 400, 416, 431}})
			}
		}
	}
	if strings.HasPrefix(r.pattern, "/v1/admin/jobs/kinds/") {
		// A kind no node knows, however spelled, is 404 and pauses nothing.
		for _, v := range append(hostileQueryTexts, "HISTORY_RETENTION", "history_retention%20", "nope") {
			out = append(out, hostileCase{class: classText, method: r.method, target: r.target(f, v), header: bearer(tok), want: []int{404}})
		}
	}
	if r.pattern == "/v1/collections/:collection" {
		for _, v := range hostileQueryTexts[:6] {
			out = append(out, hostileCase{class: classText, method: r.method, target: r.target(f, v), header: bearer(tok), want: []int{400}})
		}
	}
	out = append(out, methodCases(r, target, tok)...)
	out = append(out, framingCases(r, target, tok)...)
	out = append(out, separatorCases(r, target, tok)...)
	// body: malformed bodies, for every route that reads one.
	if r.jsonBody != nil {
		// A body not declared JSON is refused before it is read (415), whatever it holds.
		for _, ct := range []string{"", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx", "json"} {
			header := bearer(tok)
			if ct != "" {
				header["Content-Type"] = ct
			}
			out = append(out, hostileCase{class: classBody, method: r.method, target: target, header: header, body: body, want: []int{415}})
		}
		if r.method == "PUT" {
			// JSON with parameters is JSON: a player's report with a charset is stored. (Not
			// sent to the other routes: a webhook registered here would be called.)
			want := []int{204}
			if r.pattern == "/v1/me/settings" || r.pattern == "/v1/media/:id/markers" { // answered with what is stored
				want = []int{200}
			}
			out = append(out, hostileCase{class: classBody, method: r.method, target: target, body: body,
				header: map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "Application/JSON; charset=utf-8"}, want: want})
		}
		for _, b := range []string{"", "{", "[]", "null", `""`, "{} {}", `{"position_ms":"x"}`, `{"position_ms":1e309}`,
			`{"position_ms":-1}`, `{"position_ms":9223372036854775808}`, `{"duration_ms":-5,"title":"t"}`, `{"title":5}`,
			`{"unknown":1}`, `{"title":"t","status":"DELETED"}`, `{"title":"t","visibility":"FRIENDS"}`, `{"owner_id":-1,"title":"t"}`,
			strings.Repeat("[", 100_000), "\xff\xfe{}", `{"title":"` + strings.Repeat("x", 70_000) + `"}`} {
			out = append(out, hostileCase{class: classBody, method: r.method, target: target, header: jsonHeader(tok), body: []byte(b),
				want: []int{400, 404, 413, 422}})
		}
		out = append(out, hostileCase{class: classBody, method: r.method, target: target, header: jsonHeader(tok),
			body: bytes.Repeat([]byte("x"), 1<<20), chunked: true, want: []int{413}})
		// 1 GiB announced, nothing sent: refused by its length, or cut by the read timeout
		// while fasthttp waits for the body's first bytes.
		out = append(out, hostileCase{class: classBody, method: r.method, target: target,
			header: map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json", "Content-Length": "1073741824"},
			want:   []int{408, 413}})
	}
	if r.method == "POST" && (r.pattern == "/v1/media" || r.pattern == "/v1/admin/imports") {
		out = append(out, multipartBodyCases(t, r, tok)...)
	}
	if r.method == "POST" && r.pattern == "/v1/media/:id/captions" {
		out = append(out, captionFormCases(target, tok)...)
	}
	if r.method == "POST" && r.pattern == "/v1/admin/webhooks" {
		out = append(out, webhookURLCases(r, tok)...)
	}
	if r.method == "PUT" && r.pattern == "/v1/playback/:mediaID" {
		out = append(out, qualityCases(target, tok)...)
	}
	return out
}

// hostileQuality are values of each optional quality field of a position report (as written
// in the JSON) that must refuse the whole report (422): wrong types, out of bounds, numbers
// past 64 bits, codes not in the list.
var hostileQuality = map[string][]string{
	"startup_ms":       {"-1", "600001", `"850"`, "1.5", "1e3", "9223372036854775808", "true", "[]", "{}"},
	"played_ms":        {"-1", "600001", `"5000"`, "5000.5", "99999999999999999999"},
	"rebuffer_count":   {"-1", "1001", `"1"`, "1.0", "false"},
	"rebuffer_ms":      {"-1", "600001", "-0.5", `"x"`},
	"rendition_height": {"0", "-720", "8641", `"720p"`, "720.0", "2147483648"},
	"error":            {`"DECODE"`, `""`, `"decode "`, `"\u0000"`, `"` + strings.Repeat("x", 500) + `"`, "3", "true", `["decode"]`},
}

// qualityCases are position reports to target with a hostile value in one quality field, or
// a quality that is no object: each refused whole (422).
func qualityCases(target, tok string) []hostileCase {
	var out []hostileCase
	for _, field := range slices.Sorted(maps.Keys(hostileQuality)) {
		for _, v := range hostileQuality[field] {
			out = append(out, hostileCase{class: classBody, method: "PUT", target: target, header: jsonHeader(tok),
				body: []byte(`{"position_ms":1000,"quality":{"` + field + `":` + v + `}}`), want: []int{422}})
		}
	}
	for _, q := range []string{"5", `"fast"`, "[]", "true"} {
		out = append(out, hostileCase{class: classBody, method: "PUT", target: target, header: jsonHeader(tok),
			body: []byte(`{"position_ms":1000,"quality":` + q + `}`), want: []int{422}})
	}
	return out
}

// methodCases are the requests with a method route r's path does not take, by its legitimate
// caller: HEAD where the document declares none (a GET route) and a method no route of the
// path has. Each is 405 with an Allow header that names r's method.
func methodCases(r hostileRoute, target, tok string) []hostileCase {
	taken := map[string]bool{}
	for _, other := range routeTable {
		if other.pattern == r.pattern {
			taken[other.method] = true
		}
	}
	var methods []string
	if r.method == "GET" && !r.head {
		methods = append(methods, "HEAD")
	}
	for _, m := range []string{"PATCH", "PUT", "DELETE"} {
		if !taken[m] {
			methods = append(methods, m)
			break
		}
	}
	var out []hostileCase
	for _, m := range methods {
		out = append(out, hostileCase{class: classMethod, method: m, target: target, header: bearer(tok), want: []int{405}, allow: r.method})
	}
	return out
}

// hostileWebhookURLs are webhook URLs the server must not call, or that are not URLs it can
// call: loopback, private, link-local and metadata addresses in their literal, IPv6-wrapped
// and named forms, other schemes, credentials, bad ports. Each is refused at registration
// (400); the sender checks the dialled address again at delivery.
var hostileWebhookURLs = []string{
	"http://127.0.0.1/hook", "http://127.1/hook", "http://[::1]/hook", "http://[::ffff:127.0.0.1]/hook", "http://[64:ff9b::7f00:1]/hook",
	"http://[::127.0.0.1]/hook", "http://[2002:7f00:1::1]/hook", "http://localhost/hook", "http://10.1.2.3/hook", "http://172.16.0.1/hook",
	"http://192.168.0.1/hook", "http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/hook", "http://0.0.0.0/hook",
	"http://[fe80::1]/hook", "http://[fd00::1]/hook", "file:///etc/passwd", "gopher://8.8.8.8/x", "javascript:alert(1)", "ftp://8.8.8.8/",
	"https://user:pass@8.8.8.8/hook", "https://8.8.8.8:99999/hook", "https://8.8.8.8:0/hook", "http:///hook", "8.8.8.8/hook", "",
	"https://8.8.8.8/" + strings.Repeat("a", 3000), "https://8.8.8.8/a b",
}

// webhookURLCases are the registrations of hostile webhook URLs (400) and of malformed events.
func webhookURLCases(r hostileRoute, tok string) []hostileCase {
	var out []hostileCase
	add := func(class string, body any, want ...int) {
		b, _ := json.Marshal(body)
		out = append(out, hostileCase{class: class, method: r.method, target: r.pattern, header: jsonHeader(tok), body: b, want: want})
	}
	for _, u := range hostileWebhookURLs {
		add(classLink, map[string]any{"url": u, "events": []string{"media.ready"}}, 400)
	}
	for _, events := range []any{nil, []string{}, []string{"media.erased"}, []string{"playback.complete"}, []string{"Collection.Completed"}, []string{"media.ready", ""}, "media.ready", []int{1}, map[string]int{}} {
		add(classBody, map[string]any{"url": "https://8.8.8.8/hook", "events": events}, 400, 422)
	}
	return out
}

// signedLinkCases are the auth cases of the signed object URLs: no signature, a token or the
// old cookie instead of one, a forged, expired or altered signature (403), and a correctly
// signed link for a member who may not play the media (404: as if it did not exist).
func signedLinkCases(f *hostileFixture, method string, forged map[string]string) []hostileCase {
	mineKey := media.AssembledMaster(f.mine)
	path, query, _ := strings.Cut(f.mineURL, "?")
	later := time.Now().Add(time.Hour)
	sign := func(member int64, key string, expires time.Time) string { return f.signer.URL(member, key, expires) }
	withQuery := func(q string) string { return path + "?" + q }
	forbidden, notFound := []int{403}, []int{404}
	cases := []struct {
		target string
		header map[string]string
		want   []int
	}{
		{path, nil, forbidden},
		{path, bearer(f.a), forbidden},
		{path, map[string]string{"Cookie": "playhead_token=" + f.a}, forbidden},
		{path, map[string]string{"Cookie": "playhead_token=" + forged["expired"]}, forbidden},
		{sign(201, mineKey, time.Now().Add(-time.Second)), nil, forbidden}, // expired
		{withQuery(strings.Replace(query, "member=201", "member=202", 1)), nil, forbidden},
		{withQuery(strings.Replace(query, "sig=", "sig=A", 1)), nil, forbidden},
		{withQuery(query[:len(query)-1]), nil, forbidden},
		{withQuery(query + "&" + query), nil, forbidden},
		{withQuery("sig=" + strings.Repeat("A", 43) + "&member=201&expires=99999999999"), nil, forbidden},
		{"/objects/" + f.theirsPath + "?" + query, nil, forbidden}, // A's signature on B's file
		{sign(202, mineKey, later), nil, notFound},                 // B may not play A's media
		{sign(201, f.theirsPath, later), nil, notFound},            // A may not play B's media
		{sign(201, "hls/999999999/x/master.m3u8", later), nil, notFound},
		// Key ids: the node holds the legacy key alone, whose links carry none. Any kid, known
		// format or not, is a bad signature's 403, never an error of its own.
		{withQuery("kid=2026-12&" + query), nil, forbidden},
		{withQuery("kid=legacy&" + query), nil, forbidden},
		{withQuery("kid=..%2F..%2Fetc%2Fpasswd&" + query), nil, forbidden},
		{withQuery("kid=x'%20OR%20'1'='1&" + query), nil, forbidden},
		{withQuery("kid=" + strings.Repeat("k", 200) + "&" + query), nil, forbidden},
		{withQuery("kid=&" + query), nil, forbidden},
	}
	var out []hostileCase
	for _, c := range cases {
		out = append(out, hostileCase{class: classAuth, method: method, target: c.target, header: c.header, want: c.want})
	}
	return out
}

// jsonWith returns base as JSON with field set to raw, written into the JSON as is (already
// escaped, or deliberately not).
func jsonWith(base map[string]any, field, raw string) []byte {
	others := maps.Clone(base)
	delete(others, field)
	rest, _ := json.Marshal(others)
	tail := strings.TrimPrefix(string(rest), "{")
	if tail != "}" {
		tail = "," + tail
	}
	return []byte(`{"` + field + `":"` + raw + `"` + tail)
}

// objectTraversals are the ways of writing a path from A's media into B's private media, or
// out of the HLS prefix, or out of the store.
func objectTraversals(f *hostileFixture) []string {
	m := strconv.FormatInt(f.mine, 10)
	b := strings.TrimPrefix(f.theirsPath, "hls/")
	return []string{
		b, m + "/../" + b, m + "/%2e%2e/" + b, m + "/%2E%2E/" + b, m + "/.%2e/" + b, m + "/..%2f" + b,
		m + "/..%2F" + strings.ReplaceAll(b, "/", "%2F"), m + "/./../" + b, m + "/x/../../" + b, m + "/%252e%252e/" + b,
		m + `/..\` + strings.ReplaceAll(b, "/", `\`), m + "/..%5c" + b, m + "/%00/../../" + b, m + "%00/../" + b,
		m + "//../" + b, m + "/%c0%ae%c0%ae/" + b, "0" + b, "../uploads", "%2e%2e/uploads", m + "/../../uploads",
		"../../../../etc/passwd", "%2e%2e%2f%2e%2e%2f%2e%2e%2fetc%2fpasswd", m + "/" + strings.TrimSuffix(strings.TrimPrefix(f.minePrefix, "hls/"+m+"/"), "/") + "/",
	}
}

// multipartBodyCases are the malformed multipart bodies of the two upload routes.
func multipartBodyCases(t *testing.T, r hostileRoute, tok string) []hostileCase {
	t.Helper()
	var out []hostileCase
	form := func(fields map[string]string, disposition string, content []byte) ([]byte, string) {
		var buf bytes.Buffer
		mw := multipart.NewWriter(&buf)
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			_ = mw.WriteField(k, fields[k])
		}
		if disposition != "" {
			fw, _ := mw.CreatePart(map[string][]string{"Content-Disposition": {`form-data; name="file"; ` + disposition}})
			_, _ = fw.Write(content)
		}
		_ = mw.Close()
		return buf.Bytes(), mw.FormDataContentType()
	}
	add := func(class string, body []byte, contentType string, want ...int) {
		out = append(out, hostileCase{class: class, method: r.method, target: r.pattern,
			header: map[string]string{"Authorization": "Bearer " + tok, "Content-Type": contentType}, body: body, want: want})
	}
	sheet := []byte("collection,chapter,order,video_url\nc,1,1,https://example.com/a.mp4\n")
	file := []byte("not a video, never encoded: the case is refused first")
	good, goodType := form(nil, `filename="a.csv"`, sheet)
	if r.pattern == "/v1/media" {
		add(classBody, good, "application/json", 415)
	} else {
		add(classBody, good, "application/json", 400) // the sheet_url form, and not JSON
	}
	add(classBody, good, "text/plain", 415)
	add(classBody, good, "", 415)
	add(classBody, good, "multipart/form-data", 400)
	add(classBody, good[:len(good)/2], goodType, 400)
	add(classBody, []byte("--x\r\n\r\n"), "multipart/form-data; boundary=x", 400, 422)
	noFile, noFileType := form(map[string]string{"title": "t"}, "", nil)
	add(classBody, noFile, noFileType, 400, 422)
	unknown, unknownType := form(map[string]string{"colour": "red"}, `filename="a.csv"`, sheet)
	if r.pattern == "/v1/media" {
		add(classBody, unknown, unknownType, 400)
		big, bigType := form(map[string]string{"title": strings.Repeat("t", 5000)}, `filename="a.mp4"`, file)
		add(classBody, big, bigType, 422)
		for _, v := range []string{"\x00", "a\x00b", "\xff\xfe", "\x1b[2J", "\xc0\x80", "a\r\nb"} {
			for _, field := range []string{"title", "visibility"} {
				b, ct := form(map[string]string{field: v}, `filename="a.mp4"`, file)
				add(classText, b, ct, 422)
			}
		}
	} else {
		for _, v := range []string{"sheet%00.csv", "%1b%5b2J.csv", "%ff.csv"} {
			b, ct := form(nil, `filename*=UTF-8''`+v, sheet)
			add(classText, b, ct, 422)
		}
		for _, cell := range []string{"bad\x00name", "\x1b[2J", "a\x01b"} {
			b, ct := form(nil, `filename="a.csv"`, []byte("collection,chapter,order,video_url\n"+cell+",1,1,https://example.com/x\n"))
			add(classText, b, ct, 202)
		}
		notUTF8, ct := form(nil, `filename="a.csv"`, []byte("collection,chapter,order,video_url\n\xff\xfe,1,1,https://example.com/x\n"))
		add(classText, notUTF8, ct, 422)
		out = append(out, sheetLinkCases(r, tok)...)
	}
	return out
}

// hostileSheetLinks are sheet_url values that are not a Google Sheets link: other schemes,
// hosts that only look like Google's, credentials, ports, addresses, paths out of the
// spreadsheet's. All are refused (400) before anything is fetched.
var hostileSheetLinks = []string{
	"", "docs.google.com/spreadsheets/d/abc", "http://docs.google.com/spreadsheets/d/abc/edit",
	"https://docs.google.com.evil.example/spreadsheets/d/abc", "https://evil.example/docs.google.com/spreadsheets/d/abc",
	"https://user:pass@docs.google.com/spreadsheets/d/abc", "https://docs.google.com@127.0.0.1/spreadsheets/d/abc",
	"https://docs.google.com:8443/spreadsheets/d/abc", "https://127.0.0.1/spreadsheets/d/abc", "https://[::1]/spreadsheets/d/abc",
	"https://169.254.169.254/spreadsheets/d/abc", "file:///etc/passwd", "gopher://docs.google.com/spreadsheets/d/abc",
	"javascript:alert(1)", "https://docs.google.com/spreadsheets/d/../../abc", "https://docs.google.com/spreadsheets/d/%2e%2e%2f/x",
	"https://docs.google.com/spreadsheets/d/a%00b", "https://docs.google.com/spreadsheets/d/a b/edit", "https://docs.google.com/document/d/abc/edit",
	"https://docs.google.com/spreadsheets/d/", "https://drive.google.com/file/d/abc/view", "https://docs.google.com/spreadsheets/d/" + strings.Repeat("a", 3000),
}

// sheetLinkCases are the JSON bodies of a Google Sheets import: hostile links (400), and
// mistyped, unknown, oversized and NUL-carrying fields.
func sheetLinkCases(r hostileRoute, tok string) []hostileCase {
	var out []hostileCase
	add := func(class string, body []byte, want ...int) {
		out = append(out, hostileCase{class: class, method: r.method, target: r.pattern,
			header: map[string]string{"Authorization": "Bearer " + tok, "Content-Type": "application/json"}, body: body, want: want})
	}
	for _, link := range hostileSheetLinks {
		b, _ := json.Marshal(map[string]string{"sheet_url": link})
		add(classLink, b, 400)
		add(classLink, b, 400) // and as a dry run, below
		out[len(out)-1].target += "?dry_run=true"
	}
	add(classBody, []byte(`{"sheet_url": 7}`), 422)
	add(classBody, []byte(`{"sheet_url": "https://docs.google.com/spreadsheets/d/abc", "colour": "red"}`), 400)
	add(classBody, []byte(`{"sheet_url": "https://docs.google.com/spreadsheets/d/abc"} trailing`), 400)
	add(classBody, []byte(`{"sheet_url": "`+strings.Repeat("x", 9<<10)+`"}`), 413)
	add(classText, []byte(`{"sheet_url": "https://docs.google.com/spreadsheets/d/a\u0000b"}`), 400)
	add(classText, []byte(`{"sheet_url": "https://docs.google.com/spreadsheets/d/abc\u001b[2J"}`), 400)
	add(classBody, []byte(`{"sheet_url": "https://docs.google.com/spreadsheets/d/abc"}`), 400)
	out[len(out)-1].target += "?dry_run=maybe"
	return out
}

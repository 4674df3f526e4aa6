package contract

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func sharedChecker(t *testing.T) *Checker {
	t.Helper()
	c, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const position = `{"media_id": 7, "position_ms": 1000, "event_time": "2026-11-30T10:00:00Z", "finished": false}`

func bearer() http.Header { return http.Header{"Authorization": {"Bearer x.y.z"}} }

func jsonHeader() http.Header { return http.Header{"Content-Type": {"application/json"}} }

// TestCheckerRefusesWhatTheDocumentDoesNotDescribe is the checker failing: an undocumented
// status, a body its schema refuses, an error answer that is not {"error": …}, a success for
// a route the document lacks (a HEAD the document does not declare included), and an
// accepted request the document does not allow. The
// documented exchanges beside them pass, so the failures are the document's, not the
// checker's.
func TestCheckerRefusesWhatTheDocumentDoesNotDescribe(t *testing.T) {
	c := sharedChecker(t)
	for _, tc := range []struct {
		name    string
		e       Exchange
		wantErr string // "" when the exchange is as documented
	}{
		{"documented 200", Exchange{Method: "GET", Target: "/v1/playback/7", Header: bearer(),
			Status: 200, ResponseHeader: jsonHeader(), ResponseBody: []byte(position)}, ""},
		{"undocumented status", Exchange{Method: "GET", Target: "/v1/playback/7", Header: bearer(),
			Status: 418, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"error": "teapot"}`)}, "status 418 is not documented"},
		{"undocumented status on a declared HEAD", Exchange{Method: "HEAD", Target: "/healthz",
			Status: 409, ResponseHeader: jsonHeader()}, "status 409 is not documented"},
		{"declared HEAD", Exchange{Method: "HEAD", Target: "/readyz", Status: 200, ResponseHeader: jsonHeader()}, ""},
		// HEAD is not implied by GET: where the document declares none, answering it is an
		// undocumented operation, and refusing it (405) is what the server must do.
		{"undeclared HEAD answered", Exchange{Method: "HEAD", Target: "/v1/playback/7", Header: bearer(),
			Status: 200, ResponseHeader: jsonHeader()}, "no documented operation matches"},
		{"undeclared HEAD refused", Exchange{Method: "HEAD", Target: "/v1/playback/7", Header: bearer(),
			Status: 405, ResponseHeader: http.Header{"Allow": {"GET, POST, PUT, DELETE"}, "Content-Type": {"application/json"}}}, ""},
		{"body missing a required field", Exchange{Method: "GET", Target: "/v1/playback/7", Header: bearer(),
			Status: 200, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"media_id": 7, "position_ms": 1000}`)}, "event_time"},
		{"documented error", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: bearer(), Body: []byte(`{}`),
			Status: 422, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"error": "position_ms is required"}`)}, ""},
		// Refusals the server sends and the document must list: a body not declared
		// JSON, and headers too large for the HTTP layer, which can answer any route.
		{"documented 415", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: bearer(), Body: []byte(`{"position_ms": 5}`),
			Status: 415, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"error": "Content-Type must be application/json, got none"}`)}, ""},
		{"documented 431", Exchange{Method: "GET", Target: "/healthz",
			Status: 431, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"error": "Request Header Fields Too Large"}`)}, ""},
		{"error not in the error shape", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: bearer(), Body: []byte(`{}`),
			Status: 422, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"message": "position_ms is required"}`)}, "not as PUT /v1/playback/{mediaID} documents it"},
		{"error as text", Exchange{Method: "GET", Target: "/v1/media/7", Header: bearer(),
			Status: 404, ResponseHeader: http.Header{"Content-Type": {"text/plain"}}, ResponseBody: []byte("Not Found")}, "not as GET /v1/media/{id} documents it"},
		{"success on an undocumented route", Exchange{Method: "GET", Target: "/v1/secret", Header: bearer(),
			Status: 200, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{}`)}, "no documented operation matches"},
		{"refusal on an undocumented route", Exchange{Method: "GET", Target: "/v1/secret", Header: bearer(),
			Status: 404, ResponseHeader: jsonHeader(), ResponseBody: []byte(`{"error": "Cannot GET /v1/secret"}`)}, ""},
		{"accepted request the document refuses", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: http.Header{"Authorization": {"Bearer x.y.z"}, "Content-Type": {"application/json"}},
			Body: []byte(`{"position_ms": "soon"}`), Status: 204}, "position_ms"},
		{"accepted request without its token", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: jsonHeader(),
			Body: []byte(`{"position_ms": 5}`), Status: 204}, "Authorization"},
		{"documented accepted request", Exchange{Method: "PUT", Target: "/v1/playback/7", Header: http.Header{"Authorization": {"Bearer x.y.z"}, "Content-Type": {"application/json"}},
			Body: []byte(`{"position_ms": 5}`), Status: 204}, ""},
		{"a rest-of-path parameter", Exchange{Method: "GET", Target: "/static/js/api.mjs",
			Status: 200, ResponseHeader: http.Header{"Content-Type": {"text/javascript; charset=utf-8"}}, ResponseBody: []byte("export {}")}, ""},
	} {
		err := c.Check(tc.e)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v, want no error", tc.name, err)
		case tc.wantErr != "" && err == nil:
			t.Errorf("%s: no error, want one mentioning %q", tc.name, tc.wantErr)
		case tc.wantErr != "" && !strings.Contains(err.Error(), tc.wantErr):
			t.Errorf("%s: %v, want it to mention %q", tc.name, err, tc.wantErr)
		default:
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// TestTransportKeepsViolations runs the checking transport against a loopback server that
// answers one documented and one undocumented status: only the second is a violation. The
// same undocumented status from another host is not this document's business.
func TestTransportKeepsViolations(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/healthz" {
			_, _ = w.Write([]byte(`{"status": "ok"}`))
			return
		}
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte(`{"error": "teapot"}`))
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	defer other.Close()
	tr := &Transport{Base: srv.Client().Transport, Checker: sharedChecker(t), Host: strings.TrimPrefix(srv.URL, "http://")}
	client := &http.Client{Transport: tr}
	for _, url := range []string{srv.URL + "/healthz", srv.URL + "/readyz", other.URL + "/readyz"} {
		resp, err := client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	v := tr.Violations()
	if len(v) != 1 || !strings.Contains(v[0].Error(), "GET /readyz → 418") {
		t.Fatalf("violations %v, want one for GET /readyz → 418", v)
	}
}

func TestFiberRoute(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"GET", "/v1/playback/"}:         "GET /v1/playback",
		{"PUT", "/v1/playback/:mediaID"}: "PUT /v1/playback/{mediaID}",
		{"GET", "/objects/hls/*"}:        "GET /objects/hls/{path}",
		{"GET", "/"}:                     "GET /",
	} {
		if got := FiberRoute(in[0], in[1]); got != want {
			t.Errorf("FiberRoute(%q, %q) = %q, want %q", in[0], in[1], got, want)
		}
	}
}

// BenchmarkCheck is the cost the contract check adds to one exchange of the end-to-end tests:
// a PUT report the server accepted (request and response checked), and a 200 with a body.
func BenchmarkCheck(b *testing.B) {
	c, err := Shared()
	if err != nil {
		b.Fatal(err)
	}
	put := Exchange{Method: "PUT", Target: "/v1/playback/7", Header: http.Header{"Authorization": {"Bearer x.y.z"}, "Content-Type": {"application/json"}},
		Body: []byte(`{"position_ms": 5}`), Status: 204}
	get := Exchange{Method: "GET", Target: "/v1/playback/7", Header: bearer(), Status: 200, ResponseHeader: jsonHeader(), ResponseBody: []byte(position)}
	for b.Loop() {
		if err := c.Check(put); err != nil {
			b.Fatal(err)
		}
		if err := c.Check(get); err != nil {
			b.Fatal(err)
		}
	}
}

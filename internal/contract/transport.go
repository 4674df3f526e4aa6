package contract

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Transport is an http.RoundTripper that checks every exchange with Host it carries with
// Checker and keeps the departures for Violations. It reads each body whole, so it is for the
// tests' clients, not for load.
type Transport struct {
	Base    http.RoundTripper
	Checker *Checker
	// Host is the host:port of the server the document describes; exchanges with others (the
	// metrics listener, a test's own servers) pass unchecked.
	Host string

	mu         sync.Mutex
	violations []error
}

// RoundTrip sends req with Base and checks the exchange. A request or answer whose body
// cannot be read whole (the server died mid-answer) is passed on unchecked, with the error.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != t.Host {
		return t.Base.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil && req.Body != http.NoBody {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("contract: read the request body: %w", err)
		}
		reqBody = b
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream never ends: its status and headers are checked, its body is the caller's.
		t.record(t.Checker.Check(Exchange{
			Method: req.Method, Target: req.URL.RequestURI(), Header: req.Header, Body: reqBody,
			Status: resp.StatusCode, ResponseHeader: resp.Header,
		}))
		return resp, nil
	}
	body, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	if readErr != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), errReader{readErr}))
		return resp, nil
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	t.record(t.Checker.Check(Exchange{
		Method: req.Method, Target: req.URL.RequestURI(), Header: req.Header, Body: reqBody,
		Status: resp.StatusCode, ResponseHeader: resp.Header, ResponseBody: body,
	}))
	return resp, nil
}

// record keeps err, a departure from the document, if there is one.
func (t *Transport) record(err error) {
	if err != nil {
		t.mu.Lock()
		t.violations = append(t.violations, err)
		t.mu.Unlock()
	}
}

// Violations returns the departures from the document seen so far.
func (t *Transport) Violations() []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]error(nil), t.violations...)
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

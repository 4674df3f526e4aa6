package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
)

// Request framing through the binary: a request whose body the server refuses without reading
// it (413 by Content-Length, 401, 404, an upload that is not multipart) must not leave the body
// on the connection, where its bytes would be parsed as the next requests (400/431 answers to
// body bytes; a whole request hidden in a body would run). httpserver's own tests cover each
// kind of answer; this one checks the binary's routes and wiring.

// hiddenRequest is the request each body carries where the server would resume reading.
const hiddenRequest = "GET /healthz?hidden HTTP/1.1\r\nHost: playhead\r\n\r\n"

// framingAnswer is one answer read off a raw connection.
type framingAnswer struct {
	status int
	close  bool // Connection: close
}

// exchangeRaw writes requests to a new connection in one go, as a pipelining client does, and
// reads answers until the server closes it (the server's idle timeout closes one it keeps).
func exchangeRaw(t *testing.T, s *binarytest.Server, requests ...string) []framingAnswer {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.HTTPURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // only if the server hangs
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = io.WriteString(conn, strings.Join(requests, "")) // fails once the server closes
	}()
	br := bufio.NewReader(conn)
	var got []framingAnswer
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("reading the answers after %v: %v", got, err)
			}
			break
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		got = append(got, framingAnswer{status: resp.StatusCode, close: resp.Close})
	}
	conn.Close()
	<-written
	return got
}

// rawRequest is a request with a body of size bytes that carries hiddenRequest at offset at
// (chunked when size is -1: the hidden request is the first chunk).
func rawRequest(method, target string, header map[string]string, size, at int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: playhead\r\n", method, target)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if size < 0 {
		fmt.Fprintf(&b, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n", len(hiddenRequest), hiddenRequest)
		return b.String()
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", size)
	b.WriteString(strings.Repeat("a", at) + hiddenRequest + strings.Repeat("b", size-at-len(hiddenRequest)))
	return b.String()
}

// TestSecurity_RefusedBodiesEndTheConnection sends, on one connection each, a request the
// binary refuses without reading its body and a request behind it: the refusal is the last
// answer and closes the connection. Pipelined requests before it are answered on the kept
// connection, and position reports keep it.
func TestSecurity_RefusedBodiesEndTheConnection(t *testing.T) {
	env := pipelineEnv("all", "framing", t.TempDir(), t.TempDir(), "ultrafast")
	env["PLAYHEAD_HTTP_IDLE_TIMEOUT"] = "2s" // ends the connections the server keeps
	s := binarytest.Start(t, env)
	member, admin := binarytest.Token(t, 141, false), binarytest.Token(t, 1, true)
	auth := map[string]string{"Authorization": "Bearer " + member}
	const preRead = 8 << 10 // fasthttp reads this much of a body before the handler
	const noSuchMedia = 1 << 40
	healthz := "GET /healthz HTTP/1.1\r\nHost: playhead\r\n\r\n"
	report := func(id int64) string {
		return fmt.Sprintf("PUT /v1/playback/%d HTTP/1.1\r\nHost: playhead\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n{\"position_ms\":61000}", id, member)
	}
	// Over the body limit (64 KiB): fasthttp's pre-read of such a body stops past 8 KiB, where
	// a run of blank lines, which a request parser skips, leads to the hidden request.
	over := strings.Repeat("a", preRead-200) + strings.Repeat("\n", 3000) + hiddenRequest
	over += strings.Repeat("b", 256<<10-len(over))
	tooLarge := fmt.Sprintf("PUT /v1/playback/%d HTTP/1.1\r\nHost: playhead\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", noSuchMedia, member, len(over), over)

	check := func(t *testing.T, got []framingAnswer, want ...int) {
		t.Helper()
		ok := len(got) == len(want)
		for i := 0; ok && i < len(want); i++ {
			ok = got[i].status == want[i] && got[i].close == (i == len(want)-1)
		}
		if !ok {
			t.Errorf("answers %v, want %v with the connection closed after the last: a refused body was read as requests", got, want)
		}
	}
	for _, c := range []struct {
		name, request string
		status        int
	}{
		{"body over the limit", tooLarge, http.StatusRequestEntityTooLarge},
		{"upload without a token", rawRequest("POST", "/v1/media", nil, 32<<10, preRead), http.StatusUnauthorized},
		{"chunked upload without a token", rawRequest("POST", "/v1/media", nil, -1, 0), http.StatusUnauthorized},
		{"upload that is not multipart", rawRequest("POST", "/v1/media", map[string]string{"Authorization": auth["Authorization"], "Content-Type": "text/plain"}, 32<<10, preRead), http.StatusUnsupportedMediaType},
		{"unknown route", rawRequest("PUT", "/v2/playback/7", auth, 32<<10, preRead), http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) { check(t, exchangeRaw(t, s, c.request, healthz), c.status) })
	}
	t.Run("pipelined", func(t *testing.T) {
		// No such media: 404 once the body is read, on the kept connection. (Not an id that
		// CreateMedia could make below: its negative cache entry could outlive the creation.)
		check(t, exchangeRaw(t, s, report(noSuchMedia), healthz, tooLarge, healthz, report(noSuchMedia)),
			http.StatusNotFound, http.StatusOK, http.StatusRequestEntityTooLarge)
	})
	t.Run("position reports keep the connection", func(t *testing.T) {
		id := s.CreateMedia(t, admin, "a film")
		got := exchangeRaw(t, s, report(id), report(id), healthz, report(id))
		want := []framingAnswer{{http.StatusNoContent, false}, {http.StatusNoContent, false}, {http.StatusOK, false}, {http.StatusNoContent, false}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("answers %v, want %v on one kept connection", got, want)
		}
	})
}

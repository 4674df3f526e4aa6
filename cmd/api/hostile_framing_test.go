package main

// The hostile-input suite's encoding and framing classes: compressed bodies (decompression
// bombs) on every route that takes a body, under a memory bound, and the duplicate framing
// headers a proxy in front may read another way than the server.

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/andybalholm/brotli"
)

// bombSize is what every compression bomb decodes to: far over any route's body limit and
// over the memory bound a node runs in here (GOMEMLIMIT in setupHostile).
const bombSize = 256 << 20

// bombGrowth is the most the server's peak resident memory may grow while it answers the
// bombs: a node that decoded one would grow by bombSize.
const bombGrowth = 32 << 20

// bomb is a compressed body and the Content-Encoding that names its codings in the order they
// were applied.
type bomb struct {
	coding string
	body   []byte
}

// zeros reads as an endless run of zero bytes: what compresses best.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func compressed(coding string, src io.Reader) []byte {
	var b bytes.Buffer
	var w io.WriteCloser
	switch coding {
	case "gzip":
		w, _ = gzip.NewWriterLevel(&b, gzip.BestCompression)
	case "deflate": // HTTP's deflate is the zlib format (RFC 9110 8.4.1.2)
		w, _ = zlib.NewWriterLevel(&b, zlib.BestCompression)
	case "br":
		w = brotli.NewWriterLevel(&b, 4)
	}
	if _, err := io.Copy(w, src); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// compressionBombs are the bombs, each bombSize decoded: one per coding Fiber decodes, and
// nested ones small enough to pass the smallest body limit (a position report's 1 KiB) by
// their length. Made once: the first gzip takes about 1.5 s.
var compressionBombs = sync.OnceValue(func() []bomb {
	gz := compressed("gzip", io.LimitReader(zeros{}, bombSize))
	gz2 := compressed("gzip", bytes.NewReader(gz))
	br := compressed("br", io.LimitReader(zeros{}, bombSize))
	return []bomb{
		{"gzip", gz},
		{"deflate", compressed("deflate", io.LimitReader(zeros{}, bombSize))},
		{"br", br},
		{"gzip, gzip", gz2},
		{"gzip, gzip, gzip", compressed("gzip", bytes.NewReader(gz2))},
		{"br, gzip", compressed("gzip", bytes.NewReader(br))},
		{"GZip", gz},
		{"identity, br", br},
	}
})

// takesBody reports whether route r may carry a request body: every method but GET and HEAD.
func takesBody(r hostileRoute) bool { return r.method != "GET" && r.method != "HEAD" }

// peakRSS is the process's peak resident memory so far (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// compressedBodies sends every bomb to every route that takes a body, by its legitimate
// caller, and returns the number of cases. Each must be answered 415 with Accept-Encoding:
// identity (and pass check's rules), and the node's peak resident memory must stay within
// bombGrowth of what it was before the first: the bodies are refused before they are read.
func (f *hostileFixture) compressedBodies(t *testing.T) int {
	t.Helper()
	pid := f.s.Cmd.Process.Pid
	before := peakRSS(t, pid)
	n := 0
	for _, r := range routeTable {
		if !takesBody(r) {
			continue
		}
		for _, b := range compressionBombs() {
			header := jsonHeader(f.tokenFor(r))
			header["Content-Encoding"] = b.coding
			c := hostileCase{class: classEncoding, method: r.method, target: r.target(f, ""), header: header, body: b.body,
				want: []int{http.StatusUnsupportedMediaType}, answerHeader: map[string]string{"Accept-Encoding": "identity"}}
			if strings.HasPrefix(r.pattern, "/v1/uploads") {
				header["Tus-Resumable"] = "1.0.0"
				header["Content-Type"] = "application/offset+octet-stream"
			}
			f.check(t, c)
			if grown := peakRSS(t, pid) - before; grown > bombGrowth {
				t.Errorf("%s (%d bytes, %d MiB decoded): the node's peak memory grew by %d MiB, more than %d MiB",
					c, len(b.body), bombSize>>20, grown>>20, bombGrowth>>20)
			}
			n++
		}
	}
	f.s.MustDo(t, http.StatusOK, http.MethodGet, f.s.URL("/healthz"), "", nil)
	t.Logf("hostile input: compressed bodies: peak memory %d MiB before, %d MiB after", before>>20, peakRSS(t, pid)>>20)
	return n
}

// framingCases are requests whose length a proxy in front could read another way than the
// server (RFC 9112 6.1, 6.3): two Content-Length lines, equal or not, and Content-Length beside
// Transfer-Encoding. Each body hides a request where the other reading resumes; each is 400.
func framingCases(r hostileRoute, target, tok string) []hostileCase {
	hidden := "GET /healthz HTTP/1.1\r\nHost: playhead\r\n\r\n"
	body := []byte(`{}` + hidden)
	short, long := strconv.Itoa(2), strconv.Itoa(len(body))
	var out []hostileCase
	for _, framing := range []string{
		"Content-Length: " + short + "\r\nContent-Length: " + long,
		"Content-Length: " + long + "\r\ncontent-length: " + short,
		"Content-Length: " + long + "\r\nContent-Length: " + long,
		"Content-Length: " + long + "\r\nContent-Length: 0",
		"Content-Length: " + long + "\r\nTransfer-Encoding: chunked",
		"Transfer-Encoding: chunked\r\nTransfer-Encoding: identity",
	} {
		out = append(out, hostileCase{class: classFraming, method: r.method, target: target, header: jsonHeader(tok),
			framing: framing, body: body, want: []int{http.StatusBadRequest}})
	}
	return out
}

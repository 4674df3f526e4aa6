package main

// The asynchronous classes of the hostile-input suite (hostile_test.go): hostile files, slow
// clients and private-address links, each followed to its end.

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/binarytest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/media"
)

// hostileFiles uploads files that are not what they claim: each is answered 202 (or refused
// at once) and ends FAILED, never READY, with a reason that shows no server path.
func (f *hostileFixture) hostileFiles(t *testing.T) int {
	t.Helper()
	dir := t.TempDir()
	secret := filepath.Join(dir, "server-file.ts")
	gen := func(out string, args ...string) string {
		path := filepath.Join(dir, out)
		full := append([]string{"-nostdin", "-v", "error", "-y"}, args...)
		if b, err := exec.Command("ffmpeg", append(full, path)...).CombinedOutput(); err != nil {
			t.Fatalf("generate %s: %v %s", out, err, b)
		}
		return path
	}
	gen("server-file.ts", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=25", "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-f", "mpegts")
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	hlsFile := "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:1,\nfile://" + secret + "\n#EXT-X-ENDLIST\n"
	files := map[string]string{
		"HLS playlist named x.mp4":  write("x.mp4", hlsFile),
		"HLS playlist named x.m3u8": write("x.m3u8", hlsFile),
		"HLS playlist with http":    write("h.mp4", "#EXTM3U\n#EXTINF:1,\nhttp://127.0.0.1:1/seg.ts\n#EXT-X-ENDLIST\n"),
		"concat script":             write("c.mp4", "ffconcat version 1.0\nfile '"+secret+"'\n"),
		"sdp":                       write("s.mp4", "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=video 5004 RTP/AVP 96\n"),
		"text":                      write("notes.mp4", strings.Repeat("meeting notes\n", 100)),
		"JPEG image":                gen("still.mp4", "-f", "lavfi", "-i", "testsrc2=size=160x120", "-frames:v", "1", "-f", "mjpeg"),
		"8000×8000 frames":          gen("huge.mp4", "-f", "lavfi", "-i", "color=c=black:s=8000x8000:r=1", "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
		"240 frames per second":     gen("fast.mp4", "-f", "lavfi", "-i", "testsrc2=size=160x120:rate=240", "-t", "1", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
		"five hours long":           gen("long.mp4", "-f", "lavfi", "-i", "color=c=black:s=64x64:r=1/60", "-t", "18000", "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p"),
	}
	ids := map[string]int64{}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		// One at a time per member: the suite's server allows two uploads per member at once.
		ids[name] = f.s.Upload(t, f.a, binarytest.Upload{Path: files[name], Title: name, Visibility: "PUBLIC"})
	}
	for _, name := range slices.Sorted(maps.Keys(ids)) {
		v := waitMedia(t, f.s, f.a, ids[name], media.StatusFailed) // fails at once on READY
		if v.FailureReason == "" || strings.Contains(v.FailureReason, "/") {
			t.Errorf("[file] %s: failure_reason %q, want a reason without paths", name, v.FailureReason)
		}
	}
	n := len(files)
	// A file that declares 1 s but whose last frame lies ten minutes later: it may become
	// READY, with no more HLS than the declared second and the encode's 10 s margin.
	gap := f.s.Upload(t, f.a, binarytest.Upload{Path: testvideo.TimestampGap(t, dir, 10*time.Minute, time.Second),
		Title: "timestamp gap", Visibility: "PUBLIC"})
	waitMedia(t, f.s, f.a, gap, media.StatusReady)
	playlists, _ := filepath.Glob(filepath.Join(f.storageDir, "hls", fmt.Sprint(gap), "*", "v*", "index.m3u8"))
	for _, p := range playlists {
		if secs := testvideo.PlaylistSeconds(t, p); secs > 12 {
			t.Errorf("[file] a file declaring 1 s became %.0f s of HLS (%s)", secs, p)
		}
	}
	if len(playlists) == 0 {
		t.Errorf("[file] the timestamp-gap file: no variant playlist under hls/%d", gap)
	}
	n++
	// Empty files and import-sheet bombs are refused at once.
	empty := write("empty.mp4", "")
	emptyFile, err := os.Open(empty)
	if err != nil {
		t.Fatal(err)
	}
	defer emptyFile.Close()
	if status, out, _ := f.s.PostMultipart(f.s.URL("/v1/media"), f.a, nil, "empty.mp4", emptyFile); status != 422 {
		t.Errorf("[file] an empty upload: %d %s, want 422", status, out)
	}
	n++
	for name, content := range map[string][]byte{
		"xlsx bomb":       xlsxBomb(t),
		"zip, not xlsx":   []byte("PK\x03\x04 not really a zip"),
		"501 rows":        []byte("collection,chapter,order,video_url\n" + strings.Repeat("c,1,1,https://example.com/x\n", 501)),
		"xlsx named .csv": xlsxBomb(t)[:1000],
	} {
		file := "sheet.xlsx"
		if strings.Contains(name, "rows") || strings.Contains(name, ".csv") {
			file = "sheet.csv"
		}
		if status, out, _ := f.s.PostMultipart(f.s.URL("/v1/admin/imports"), f.adm, nil, file, bytes.NewReader(content)); status != 422 {
			t.Errorf("[file] import %s: %d %.200s, want 422", name, status, out)
		}
		n++
	}
	return n
}

// xlsxBomb is a small .xlsx whose declared unzipped size is far over the limit.
func xlsxBomb(t *testing.T) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := zip.NewWriter(&out)
	w, err := zw.Create("xl/worksheets/sheet1.xml")
	if err != nil {
		t.Fatal(err)
	}
	chunk := strings.Repeat("<row><c><v>1</v></c></row>", 4096)
	for range 1000 { // ~100 MB unzipped
		_, _ = io.WriteString(w, chunk)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// slowClients: a member over its upload limit is refused at once with 429 and Retry-After, a
// silent upload is cut with 408, and a client that trickles its headers is cut by the read
// timeout while others are served.
func (f *hostileFixture) slowClients(t *testing.T) int {
	t.Helper()
	tick := 250 * time.Millisecond
	first := binarytest.StartSlowUpload(t, f.s.URL("/v1/media"), f.b, binarytest.FromFile, tick)
	second := binarytest.StartSlowUpload(t, f.s.URL("/v1/media"), f.b, binarytest.FromFile, tick)
	waitUploadsInProgress(t, f.storageDir, 2)
	// The third trickles from its body's first byte: refused all the same.
	third := binarytest.StartSlowUpload(t, f.s.URL("/v1/media"), f.b, binarytest.FromFirstByte, tick)
	select {
	case status := <-third.Answer:
		if status != http.StatusTooManyRequests {
			t.Errorf("[slow] a third upload of one member: %d, want 429", status)
		}
	case <-time.After(60 * time.Second):
		t.Error("[slow] a third upload of one member was not refused")
	}
	first.Stop()
	second.Stop()
	for _, u := range []*binarytest.SlowUpload{first, second} {
		select {
		case status := <-u.Answer:
			if status != http.StatusRequestTimeout {
				t.Errorf("[slow] a silent upload: %d, want 408", status)
			}
		case <-time.After(60 * time.Second):
			t.Error("[slow] a silent upload was not cut")
		}
	}
	third.Stop()
	// Slow loris on the API: headers trickled forever are cut by the read timeout.
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.s.HTTPURL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var cut atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = io.WriteString(conn, "GET /v1/playback/ HTTP/1.1\r\nHost: x\r\nX-Slow: ")
		for range 240 { // gives up after a minute
			time.Sleep(tick)
			if _, err := conn.Write([]byte("a")); err != nil {
				cut.Store(true)
				return
			}
		}
	}()
	if status, _, _ := f.s.Do(http.MethodGet, f.s.URL("/healthz"), "", nil); status != http.StatusOK {
		t.Errorf("[slow] /healthz during a slow-loris client: %d", status)
	}
	<-done
	if !cut.Load() {
		t.Error("[slow] a client trickling its headers for a minute was never cut (read timeout 2 s)")
	}
	return 5
}

// privateLinks imports a sheet whose links point at loopback and private addresses in every
// form: each row ends FAILED with the address refused, and a canary server on loopback is
// never reached.
func (f *hostileFixture) privateLinks(t *testing.T) int {
	t.Helper()
	var hits atomic.Int32
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "video/mp4")
		_, _ = io.WriteString(w, "the server's own secret")
	}))
	t.Cleanup(canary.Close)
	port := canary.URL[strings.LastIndex(canary.URL, ":")+1:]
	links := []string{
		"http://127.0.0.1:" + port + "/v.mp4", "http://localhost:" + port + "/v.mp4", "http://[::1]:" + port + "/v.mp4",
		"http://[::ffff:127.0.0.1]:" + port + "/v.mp4", "http://[::127.0.0.1]:" + port + "/v.mp4",
		"http://[64:ff9b::7f00:1]:" + port + "/v.mp4", "http://[64:ff9b:1::7f00:1]:" + port + "/v.mp4",
		"http://[2002:7f00:1::1]:" + port + "/v.mp4", "http://[2001:0:7f00:1::f7f7:f7f7]:" + port + "/v.mp4",
		"http://[::ffff:0:7f00:1]:" + port + "/v.mp4", "http://[fec0::1]:" + port + "/v.mp4", "http://[fe80::1]:" + port + "/v.mp4",
		"http://[fd00::1]:" + port + "/v.mp4", "http://0.0.0.0:" + port + "/v.mp4", "http://10.0.0.1/v.mp4",
		"http://169.254.169.254/latest/meta-data/", "http://100.64.0.1/v.mp4", "http://192.168.0.1/v.mp4",
		"http://2130706433:" + port + "/v.mp4", "http://0x7f.1:" + port + "/v.mp4",
		"http://[::ffff:7f00:1]:" + port + "/v.mp4", "http://[0:0:0:0:0:0:0:1]:" + port + "/v.mp4",
		"http://[::]:" + port + "/v.mp4", "http://localhost.:" + port + "/v.mp4", "http://[fe80::1%25lo]:" + port + "/v.mp4",
		"http://[64:ff9b::127.0.0.1]:" + port + "/v.mp4", "http://user:pw@127.0.0.1:" + port + "/v.mp4",
	}
	var sheet strings.Builder
	sheet.WriteString("collection,chapter,order,video_url\n")
	for i, l := range links {
		fmt.Fprintf(&sheet, "links,1,%d,%s\n", i+1, l)
	}
	imp := f.s.Import(t, f.adm, "links.csv", sheet.String())
	done := waitImportDone(t, f.s, f.adm, imp.ID)
	for i, row := range done.Rows {
		if row.State != "FAILED" && row.State != "REJECTED" {
			t.Errorf("[link] %s: row %s, want FAILED (address refused) or REJECTED", links[i], row.State)
		}
		// A name no resolver knows (2130706433 to Go's own resolver) fails as unreachable.
		if row.State == "FAILED" && !strings.Contains(row.Reason, "not allowed") && !strings.Contains(row.Reason, "could not be reached") {
			t.Errorf("[link] %s: reason %q, want the address refused", links[i], row.Reason)
		}
	}
	if hits.Load() != 0 {
		t.Errorf("[link] the loopback canary was reached %d times", hits.Load())
	}
	return len(links)
}

// waitImportDone polls an import until no row is pending, downloading or encoding.
func waitImportDone(t *testing.T, s *binarytest.Server, token string, id int64) binarytest.Import {
	t.Helper()
	deadline := time.Now().Add(encodeTimeout)
	for {
		var v binarytest.Import
		out := s.MustDo(t, http.StatusOK, http.MethodGet, s.URL("/v1/admin/imports/%d", id), token, nil)
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(v.Rows, func(r binarytest.ImportRow) bool {
			return r.State == "PENDING" || r.State == "INGESTING" || r.State == "UPLOADED"
		}) {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("import %d not finished after %s: %s", id, encodeTimeout, out)
		}
		time.Sleep(pollEvery)
	}
}

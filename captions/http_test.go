package captions_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/captions"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/formtest"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

const secret = "captions-test-secret-captions-test-secret"

// The playlists of an fMP4 encode (an audio group, I-frame playlists, byte ranges) and of an
// older MPEG-TS encode, as the encoder writes them.
const (
	fmp4Master = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-INDEPENDENT-SEGMENTS\n" +
		"#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"audio\",NAME=\"Audio\",DEFAULT=YES,AUTOSELECT=YES,CHANNELS=\"2\",URI=\"audio/index.m3u8\"\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=900000,AVERAGE-BANDWIDTH=800000,CODECS=\"avc1.64001f,mp4a.40.2\",RESOLUTION=640x360,FRAME-RATE=30.000,AUDIO=\"audio\"\nv0/index.m3u8\n" +
		"#EXT-X-STREAM-INF:BANDWIDTH=400000,AVERAGE-BANDWIDTH=350000,CODECS=\"avc1.64001e,mp4a.40.2\",RESOLUTION=320x180,FRAME-RATE=30.000,AUDIO=\"audio\"\nv1/index.m3u8\n" +
		"#EXT-X-I-FRAME-STREAM-INF:BANDWIDTH=90000,CODECS=\"avc1.64001f\",RESOLUTION=640x360,URI=\"v0/iframes.m3u8\"\n"
	fmp4Variant = "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:6\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-INDEPENDENT-SEGMENTS\n" +
		"#EXT-X-MAP:URI=\"media.mp4\",BYTERANGE=\"800@0\"\n#EXTINF:6.000000,\n#EXT-X-BYTERANGE:1000@800\nmedia.mp4\n" +
		"#EXTINF:6.000000,\n#EXT-X-BYTERANGE:1000@1800\nmedia.mp4\n#EXTINF:3.500000,\n#EXT-X-BYTERANGE:600@2800\nmedia.mp4\n#EXT-X-ENDLIST\n"
	tsMaster  = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360\nv0/index.m3u8\n"
	tsVariant = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-PLAYLIST-TYPE:VOD\n" +
		"#EXTINF:4.000000,\nseg_000.ts\n#EXTINF:4.000000,\nseg_001.ts\n#EXTINF:2.500000,\nseg_002.ts\n#EXT-X-ENDLIST\n"
)

// fixture is the captions routes and the object server over a real database and local store:
// member 1 owns fmp4 (PRIVATE, READY, 15.5 s, starting at 0.08 s) and ts (PUBLIC, READY,
// 10.5 s, start unknown: an older MPEG-TS encode) and processing (not READY yet).
type fixture struct {
	url                  string
	pool                 *pgxpool.Pool
	objects              *faultyStore
	dir                  string
	links                *media.Links
	fmp4, ts, processing int64
	owner, other, admin  string
}

// faultyStore is the local store whose Puts fail once failPuts is set above zero (the number of
// Puts to let through first): an object store that breaks off in the middle of a track.
type faultyStore struct {
	storage.Store
	failPuts atomic.Int64
}

func (s *faultyStore) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if n := s.failPuts.Add(-1); n == 0 {
		return 0, errors.New("the store broke off")
	} else if n < 0 {
		s.failPuts.Store(0)
	}
	return s.Store.Put(ctx, key, r)
}

func setup(t *testing.T) *fixture {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	ctx := context.Background()
	mediaStore := media.NewStore(pool)
	f := &fixture{pool: pool, dir: t.TempDir()}
	local, err := storage.NewLocal(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.objects = &faultyStore{Store: local}
	mk := func(status media.Status, visibility media.Visibility, durationMS int64, master, variant string, startUS any) int64 {
		m, err := mediaStore.Create(ctx, media.Media{OwnerID: 1, Title: "clip", DurationMS: durationMS, Status: status, Visibility: visibility})
		if err != nil {
			t.Fatal(err)
		}
		prefix := fmt.Sprintf("hls/%d/00000000-0000-0000-0000-00000000000%d/", m.ID, m.ID)
		for name, body := range map[string]string{"master.m3u8": master, "v0/index.m3u8": variant, "v1/index.m3u8": variant} {
			if _, err := local.Put(ctx, prefix+name, strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := pool.Exec(ctx, `UPDATE media SET hls_key = $2, hls_start_us = $3 WHERE id = $1`, m.ID, prefix+"master.m3u8", startUS); err != nil {
			t.Fatal(err)
		}
		return m.ID
	}
	f.fmp4 = mk(media.StatusReady, media.VisibilityPrivate, 15_500, fmp4Master, fmp4Variant, 80_000)
	f.ts = mk(media.StatusReady, media.VisibilityPublic, 10_500, tsMaster, tsVariant, nil)
	f.processing = mk(media.StatusProcessing, media.VisibilityPublic, 10_500, tsMaster, tsVariant, nil)

	access, err := cache.New(cache.Config{Load: mediaStore.LookupAccess})
	if err != nil {
		t.Fatal(err)
	}
	if err := access.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = access.Stop(context.Background()) })
	signer, err := media.NewSigner([]byte(secret))
	if err != nil {
		t.Fatal(err)
	}
	f.links = &media.Links{Signer: signer, TTL: time.Minute}
	verifier, err := auth.NewVerifier([]byte(secret), 100)
	if err != nil {
		t.Fatal(err)
	}
	captionStore := captions.NewStore(pool)
	// One caption upload in progress per member, so that a test can fill a member's places.
	h := &captions.Handler{Store: captionStore, Media: mediaStore, Access: access, Objects: f.objects,
		Limits: &media.UploadLimits{MaxPerMember: 1}}
	app := httpserver.New(httpserver.Config{BodyLimit: 64 << 10})
	(&media.ObjectsHandler{Store: f.objects, Access: access, Links: f.links, Subtitles: captionStore}).Register(app)
	h.RegisterUpload(app, verifier.Middleware())
	v1 := app.Group("/v1", httpserver.LimitBody(64<<10), verifier.Middleware())
	h.Register(v1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = app.Listener(ln) }()
	t.Cleanup(func() { _ = app.Shutdown(); <-done })
	f.url = "http://" + ln.Addr().String()
	mint := func(member int64, admin bool) string {
		tok, err := auth.Mint([]byte(secret), member, admin, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	f.owner, f.other, f.admin = mint(1, false), mint(2, false), mint(9, true)
	return f
}

// form is a multipart body of the fields, in order, the file part last when file is not nil.
func form(fields [][2]string, file []byte) ([]byte, string) {
	return formtest.Multipart(fields, "captions.srt", file)
}

func (f *fixture) do(t *testing.T, method, path, token, contentType string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, f.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 400 {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(out, &e) != nil || e.Error == "" {
			t.Errorf("%s %s: %d with a body that is not JSON {\"error\": …}: %q", method, path, resp.StatusCode, out)
		}
	}
	return resp.StatusCode, out
}

// post posts a caption file to media id as token's member and returns the status and body.
func (f *fixture) post(t *testing.T, id int64, token, lang, label string, file []byte) (int, []byte) {
	t.Helper()
	body, ct := form([][2]string{{"language", lang}, {"label", label}}, file)
	return f.do(t, http.MethodPost, fmt.Sprintf("/v1/media/%d/captions", id), token, ct, body)
}

func (f *fixture) mustAdd(t *testing.T, id int64, lang, label string, file []byte) captions.Caption {
	t.Helper()
	status, out := f.post(t, id, f.owner, lang, label, file)
	var c captions.Caption
	if status != http.StatusCreated || json.Unmarshal(out, &c) != nil || c.ID == 0 {
		t.Fatalf("POST captions %s: %d %s, want 201 and the caption", label, status, out)
	}
	return c
}

// get fetches a signed object path (as a playlist gives it) and returns its body.
func (f *fixture) get(t *testing.T, signed string) []byte {
	t.Helper()
	status, out := f.do(t, http.MethodGet, strings.TrimPrefix(signed, f.url), "", "", nil)
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", signed, status, out)
	}
	return out
}

// master is media id's master playlist as its owner's player gets it.
func (f *fixture) master(t *testing.T, id int64) string {
	t.Helper()
	var key string
	if err := f.pool.QueryRow(context.Background(), `SELECT hls_key FROM media WHERE id = $1`, id).Scan(&key); err != nil {
		t.Fatal(err)
	}
	return string(f.get(t, f.links.Playlist(1, key, time.Minute)))
}

// captionFolders lists the caption folders stored under media id.
func (f *fixture) captionFolders(t *testing.T, id int64) []string {
	t.Helper()
	children, err := f.objects.Children(context.Background(), fmt.Sprintf("hls/%d/", id))
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(children, func(c string) bool { return !captions.IsFolder(c) })
}

// nodeReads runs a node script of testdata/ on the playlists, each written to a file of its
// own, and returns the script's output: one line of JSON per playlist, in order.
func nodeReads(t *testing.T, script string, playlists ...string) []string {
	t.Helper()
	dir := t.TempDir()
	var files []string
	for i, p := range playlists {
		file := filepath.Join(dir, fmt.Sprintf("p%d.m3u8", i))
		if err := os.WriteFile(file, []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	cmd := exec.Command("node", append([]string{"testdata/" + script}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s refused a playlist: %v %s\n(node and npm ci are installed by make deps / make web)", script, err, stderr.String())
	}
	lines := slices.Collect(strings.Lines(string(out)))
	if len(lines) != len(playlists) {
		t.Fatalf("%s read %d playlists of %d", script, len(lines), len(playlists))
	}
	return lines
}

// hlsStrict parses the playlists with hls-parser in strict mode (testdata/hls_strict.mjs) and
// returns what it read of each.
func hlsStrict(t *testing.T, playlists ...string) []parsedPlaylist {
	t.Helper()
	var parsed []parsedPlaylist
	for _, line := range nodeReads(t, "hls_strict.mjs", playlists...) {
		var p parsedPlaylist
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("hls_strict.mjs: %v: %q", err, line)
		}
		parsed = append(parsed, p)
	}
	return parsed
}

// hlsJSSubtitles reads master playlists as hls.js does (testdata/hlsjs_subtitles.mjs) and
// returns the SUBTITLES renditions it finds in each, URIs resolved against
// https://playhead.invalid/master.m3u8.
func hlsJSSubtitles(t *testing.T, playlists ...string) [][]hlsJSTrack {
	t.Helper()
	var tracks [][]hlsJSTrack
	for _, line := range nodeReads(t, "hlsjs_subtitles.mjs", playlists...) {
		var p struct{ Subtitles []hlsJSTrack }
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("hlsjs_subtitles.mjs: %v: %q", err, line)
		}
		tracks = append(tracks, p.Subtitles)
	}
	return tracks
}

// hlsJSTrack is a SUBTITLES rendition as hls.js reads it.
type hlsJSTrack struct {
	Group, Name, Language, URI string
	Default                    bool `json:"default"`
	Autoselect                 bool `json:"autoselect"`
}

type parsedPlaylist struct {
	Master   bool `json:"master"`
	Variants []struct {
		URI       string `json:"uri"`
		IFrame    bool   `json:"iframe"`
		Subtitles []struct {
			Group, Name, Language, URI string
			Default                    bool `json:"default"`
			Autoselect                 bool `json:"autoselect"`
		} `json:"subtitles"`
	} `json:"variants"`
	TargetDuration int  `json:"targetDuration"`
	Endlist        bool `json:"endlist"`
	Segments       []struct {
		URI      string  `json:"uri"`
		Duration float64 `json:"duration"`
	} `json:"segments"`
}

var srtFile = []byte("1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello</i> <b>there</b>\r\n\r\n" +
	"2\r\n00:00:05,000 --> 00:00:07,000\r\n<script>alert(1)</script> & spans\r\n\r\n" +
	"3\r\n00:00:14,000 --> 00:00:20,000\r\nthe end\r\n")

// announce sends a POST whose body is length bytes, and only the first send of them (fasthttp
// calls the handler of a body over the server's limit once that limit has arrived), and
// returns the status of the answer (0 for none).
func (f *fixture) announce(t *testing.T, path, token, contentType string, length, send int) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		path, token, contentType, length)
	go func() { _, _ = conn.Write(make([]byte, send)) }() // the server may answer before reading it all
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	return resp.StatusCode
}

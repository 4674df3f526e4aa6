package media_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/auth"
	"github.com/playhead/playhead/cache"
	"github.com/playhead/playhead/httpserver"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

const secret = "objects-test-secret-objects-test-secret"

// objectsFixture is a running objects handler over a real database, cache and local store:
// member 1 owns PRIVATE READY media mine, member 2 owns PRIVATE READY media theirs, both with
// files; the store also holds an uploaded source and a link that points out of the store.
type objectsFixture struct {
	addr         string
	mine, theirs int64
	links        *media.Links
	secrets      [][]byte // contents no request may ever return: theirs, the source, the host file
	// serve starts another objects handler over the same store and database with links: a
	// node configured with other signing keys.
	serve func(links *media.Links) (addr string)
}

// The playlists of mine, as the encoder writes them.
const (
	mineMaster  = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360\nv0/index.m3u8\n"
	mineVariant = "#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:4\n#EXT-X-PLAYLIST-TYPE:VOD\n" +
		"#EXTINF:4.000000,\nseg_000.ts\n#EXTINF:4.000000,\nseg_001.ts\n#EXTINF:2.500000,\nseg_002.ts\n#EXT-X-ENDLIST\n"
)

// mineRendition stands in for an fMP4 rendition, which players read by byte ranges;
// mineStoryboard is a storyboard as the encoder writes it.
const (
	mineRendition  = "0123456789abcdefghijklmnopqrstuvwxyz"
	mineStoryboard = "WEBVTT\n\n00:00:00.000 --> 00:00:05.000\nsprite_000.jpg#xywh=0,0,160,90\n\n" +
		"00:00:05.000 --> 00:00:10.500\nsprite_000.jpg#xywh=160,0,160,90\n"
)

func setupObjects(t *testing.T) *objectsFixture {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	mk := func(owner int64) int64 {
		m := must(store.Create(context.Background(), media.Media{OwnerID: owner, Title: "clip", DurationMS: 10_500,
			Status: media.StatusReady, Visibility: media.VisibilityPrivate}))(t)
		return m.ID
	}
	f := &objectsFixture{mine: mk(1), theirs: mk(2)}
	f.links = &media.Links{Signer: must(media.NewSigner([]byte(secret)))(t), TTL: time.Minute}

	dir := t.TempDir()
	objects := must(storage.NewLocal(filepath.Join(dir, "objects")))(t)
	put := func(key, body string) []byte {
		must(objects.Put(context.Background(), key, strings.NewReader(body)))(t)
		return []byte(body)
	}
	put(fmt.Sprintf("hls/%d/tok/master.m3u8", f.mine), mineMaster)
	put(fmt.Sprintf("hls/%d/tok/v0/index.m3u8", f.mine), mineVariant)
	for i := range 3 {
		put(fmt.Sprintf("hls/%d/tok/v0/seg_%03d.ts", f.mine, i), fmt.Sprintf("G mine segment %d", i))
	}
	put(fmt.Sprintf("hls/%d/tok/bad.m3u8", f.mine), "#EXTM3U\n#EXTINF:4,\n../../"+fmt.Sprint(f.theirs)+"/tok/v0/seg_000.ts\n")
	put(fmt.Sprintf("hls/%d/tok/v0/media.mp4", f.mine), mineRendition)
	put(fmt.Sprintf("hls/%d/tok/storyboard/storyboard.vtt", f.mine), mineStoryboard)
	put(fmt.Sprintf("hls/%d/tok/storyboard/sprite_000.jpg", f.mine), "JPEG mine sprite")
	put(fmt.Sprintf("hls/%d/captions-0123/seg_00000.vtt", f.mine), "WEBVTT mine caption segment")
	put(fmt.Sprintf("hls/%d/tok/bad/storyboard.vtt", f.mine), "WEBVTT\n\n00:00:00.000 --> 00:00:01.000\n../../../"+fmt.Sprint(f.theirs)+"/tok/thumb.jpg#xywh=0,0,1,1\n")
	f.secrets = append(f.secrets,
		put(fmt.Sprintf("hls/%d/tok/master.m3u8", f.theirs), "#EXTM3U theirs"),
		put(fmt.Sprintf("hls/%d/tok/v0/seg_000.ts", f.theirs), "G theirs segment"),
		put(fmt.Sprintf("hls/%d/tok/thumb.jpg", f.theirs), "JPEG theirs"),
		put("uploads/abc/source", "the uploaded source"),
		// Under the member's own media, but not a file an encode writes: only .m3u8, .ts and
		// .jpg are objects.
		put(fmt.Sprintf("hls/%d/tok/notes.txt", f.mine), "not an encoded file"),
		put(fmt.Sprintf("hls/%d/tok/master.m3u8.bak", f.mine), "an old playlist"))
	hostFile := filepath.Join(dir, "host-secret.ts")
	if err := os.WriteFile(hostFile, []byte("a file of the host, outside the store"), 0o600); err != nil {
		t.Fatal(err)
	}
	f.secrets = append(f.secrets, []byte("a file of the host, outside the store"))
	link := filepath.Join(dir, "objects", "hls", fmt.Sprint(f.mine), "tok", "escape.ts")
	if err := os.Symlink(hostFile, link); err != nil {
		t.Fatal(err)
	}

	c := startCache(t, cache.Config{Load: store.LookupAccess})
	f.serve = func(links *media.Links) string {
		app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
		(&media.ObjectsHandler{Store: objects, Access: c, Links: links}).Register(app)
		return serveApp(t, app)
	}
	f.addr = f.serve(f.links)
	return f
}

// query returns the signed query of key for member, valid for a minute.
func (f *objectsFixture) query(member int64, key string) string {
	_, q, _ := strings.Cut(f.links.Signer.URL(member, key, time.Now().Add(time.Minute)), "?")
	return q
}

// TestObjects_PathFormsNeverReachAnotherMedia, path traversal with signed URLs: every
// way of writing a path that climbs from a media the member may play into one it may not (or
// out of the HLS prefix, or out of the store), carrying a valid signature of the member's own
// playlist, is refused (404, or 403 for a path that decodes to another key than the one
// signed), and no answer carries another media's bytes.
func TestObjects_PathFormsNeverReachAnotherMedia(t *testing.T) {
	f := setupObjects(t)
	mine, theirs := fmt.Sprint(f.mine), fmt.Sprint(f.theirs)
	valid := "?" + f.query(1, "hls/"+mine+"/tok/master.m3u8")
	forms := []string{
		"/objects/hls/" + theirs + "/tok/master.m3u8", // directly
		"/objects/hls/" + mine + "/../" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/tok/../../" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/%2e%2e/" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/%2E%2E/" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/.%2e/" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/..%2f" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/..%2F" + theirs + "/tok/v0/seg_000.ts",
		"/objects/hls/" + mine + "%2f..%2f" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/./../" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/x/../../" + theirs + "/tok/thumb.jpg",
		"/objects/hls/" + mine + "/%252e%252e/" + theirs + "/tok/master.m3u8", // double encoding
		"/objects/hls/" + mine + "/%25252e%25252e/" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + `/..\` + theirs + `\tok\master.m3u8`, // backslashes
		"/objects/hls/" + mine + "/..%5c" + theirs + "%5ctok%5cmaster.m3u8",
		"/objects/hls/" + mine + "/..%5C..%5C" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/tok/master.m3u8%00/../../../" + theirs + "/tok/master.m3u8", // NUL
		"/objects/hls/" + mine + "%00/../" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "//../" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/tok/%2e%2e/%2e%2e/" + theirs + "/tok/master.m3u8",
		"/objects/hls/" + mine + "/tok/%c0%ae%c0%ae/" + theirs + "/tok/master.m3u8", // overlong UTF-8 dots
		"/objects/hls/0" + theirs + "/tok/master.m3u8",                              // non-canonical id
		"/objects/hls/%3" + theirs[:1] + theirs[1:] + "/tok/master.m3u8",
		"/objects/hls/../uploads/abc/source", // out of the HLS prefix
		"/objects/hls/%2e%2e/uploads/abc/source",
		"/objects/hls/" + mine + "/../../uploads/abc/source",
		"/objects/hls/" + mine + "/..%2f..%2fuploads/abc/source",
		"/objects/hls//uploads/abc/source",
		"/objects/uploads/abc/source",
		"/objects/hls/" + mine + "/tok/escape.ts", // a link out of the store
		"/objects/hls/" + mine + "/tok/",          // a directory
		"/objects/hls/" + mine + "/tok/v0",
		"/objects/hls/" + mine,
		"/objects/hls/" + mine + "/tok/master.m3u8/.",
		"/objects/hls/" + mine + "/tok/notes.txt", // the member's own prefix, not an encoded file
		"/objects/hls/" + mine + "/tok/master.m3u8.bak",
		"/objects/hls/" + mine + "/tok/master.m3u8;.bak",
		"/objects/hls/" + mine + "/tok/v0/seg_000.ts", // another file of the same media
	}
	for _, form := range forms {
		target := form + valid
		status, _, body := rawGet(t, f.addr, target, nil)
		if status != http.StatusNotFound && status != http.StatusForbidden {
			t.Errorf("GET %s: status %d, want 403 or 404 (body %q)", target, status, body)
		}
		for _, s := range f.secrets {
			if bytes.Contains(body, s) {
				t.Errorf("GET %s: the answer carries %q, which member 1 may not read", target, s)
			}
		}
	}
	// A link out of the store, correctly signed (the server would never sign it): not found.
	escape := "hls/" + mine + "/tok/escape.ts"
	if status, _, body := rawGet(t, f.addr, "/objects/"+escape+"?"+f.query(1, escape), nil); status != http.StatusNotFound {
		t.Errorf("GET the signed link out of the store: status %d, want 404 (body %q)", status, body)
	}
	// A correctly signed URL of theirs for member 1: member 1 may not play it, so not found.
	theirsKey := "hls/" + theirs + "/tok/master.m3u8"
	if status, _, body := rawGet(t, f.addr, "/objects/"+theirsKey+"?"+f.query(1, theirsKey), nil); status != http.StatusNotFound {
		t.Errorf("GET theirs signed for member 1: status %d, want 404 (body %q)", status, body)
	}
	// A playlist that points at another media (the encoder never writes one) is not served.
	bad := "hls/" + mine + "/tok/bad.m3u8"
	if status, _, body := rawGet(t, f.addr, "/objects/"+bad+"?"+f.query(1, bad), nil); status < 500 || bytes.Contains(body, []byte(theirs+"/tok")) {
		t.Errorf("GET a playlist that refers to another media: status %d body %q, want a server error without a link", status, body)
	}
}

// TestObjects_SignedPlaylistsLeadToEveryFile follows a player: the master playlist's signed URL
// (in plain and harmlessly encoded form) gives a master whose variant URL is signed, whose
// playlist's segment URLs are signed and work, with the right headers, and no cookie or token.
func TestObjects_SignedPlaylistsLeadToEveryFile(t *testing.T) {
	f := setupObjects(t)
	mine := fmt.Sprint(f.mine)
	key := "hls/" + mine + "/tok/master.m3u8"
	q := f.query(1, key)
	for _, target := range []string{
		"/objects/" + key + "?" + q,
		"/objects/hls/%3" + mine[:1] + mine[1:] + "/tok/master%2Em3u8?" + q,
	} {
		status, header, body := rawGet(t, f.addr, target, nil)
		if status != http.StatusOK {
			t.Fatalf("GET %s: status %d body %q", target, status, body)
		}
		for k, want := range map[string]string{
			"Content-Type":           "application/vnd.apple.mpegurl",
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "private, no-store",
		} {
			if got := header.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", target, k, got, want)
			}
		}
		lines := strings.Split(strings.TrimSpace(string(body)), "\n")
		variant := lines[len(lines)-1]
		if !strings.HasPrefix(variant, "/objects/hls/"+mine+"/tok/v0/index.m3u8?member=1&expires=") {
			t.Fatalf("master playlist's variant URI %q, want a signed Playhead URL", variant)
		}
		status, _, vbody := rawGet(t, f.addr, variant, nil)
		if status != http.StatusOK {
			t.Fatalf("GET variant %s: status %d body %q", variant, status, vbody)
		}
		var segments []string
		for line := range strings.Lines(string(vbody)) {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
				segments = append(segments, line)
			}
		}
		if len(segments) != 3 || !strings.Contains(string(vbody), "#EXTINF:2.500000,") || !strings.HasSuffix(strings.TrimSpace(string(vbody)), "#EXT-X-ENDLIST") {
			t.Fatalf("variant playlist %q, want its tags kept and 3 signed segments", vbody)
		}
		var expiries []string
		for i, seg := range segments {
			status, header, sbody := rawGet(t, f.addr, seg, nil)
			if status != http.StatusOK || string(sbody) != fmt.Sprintf("G mine segment %d", i) || header.Get("Content-Type") != "video/mp2t" ||
				header.Get("Cache-Control") != "private, max-age=3600" {
				t.Errorf("GET segment %s: status %d %q %q body %q", seg, status, header.Get("Content-Type"), header.Get("Cache-Control"), sbody)
			}
			expiries = append(expiries, seg[strings.Index(seg, "expires="):strings.Index(seg, "&sig=")])
		}
		// Each segment's link lives its start time longer than the first one's: 0, 4 and 8 s.
		if expiries[0] == expiries[1] || expiries[1] == expiries[2] {
			t.Errorf("segment expiries %q: want later segments to expire later", expiries)
		}
	}
}

// TestObjects_SignatureIsTheCredential: every change to a signed URL's query, an expired one,
// and one issued to a member who may not play the media, are refused; a bearer token or a
// cookie is no substitute.
func TestObjects_SignatureIsTheCredential(t *testing.T) {
	f := setupObjects(t)
	key := fmt.Sprintf("hls/%d/tok/v0/seg_000.ts", f.mine)
	path := "/objects/" + key
	good := f.query(1, key)
	member, rest, _ := strings.Cut(good, "&")
	expires, sig, _ := strings.Cut(rest, "&")
	expUnix, _ := strconv.ParseInt(strings.TrimPrefix(expires, "expires="), 10, 64)
	other := f.query(1, fmt.Sprintf("hls/%d/tok/v0/seg_001.ts", f.mine))
	_, otherSig, _ := strings.Cut(strings.SplitN(other, "&", 2)[1], "&")
	token := must(auth.Mint([]byte(secret), 1, false, time.Hour))(t)
	for _, tc := range []struct {
		name, query string
		header      map[string]string
		want        int
	}{
		{"valid", good, nil, http.StatusOK},
		{"no query", "", nil, http.StatusForbidden},
		{"bearer token instead", "", map[string]string{"Authorization": "Bearer " + token}, http.StatusForbidden},
		{"old cookie instead", "", map[string]string{"Cookie": "playhead_token=" + token}, http.StatusForbidden},
		{"no signature", member + "&" + expires, nil, http.StatusForbidden},
		{"another file's signature", member + "&" + expires + "&" + otherSig, nil, http.StatusForbidden},
		{"another member", "member=2&" + expires + "&" + sig, nil, http.StatusForbidden},
		{"member with a leading zero", "member=01&" + expires + "&" + sig, nil, http.StatusForbidden},
		{"later expiry", member + "&expires=" + fmt.Sprint(expUnix+3600) + "&" + sig, nil, http.StatusForbidden},
		{"parameters twice", good + "&" + member, nil, http.StatusForbidden},
		{"an extra parameter", good + "&x=1", nil, http.StatusForbidden},
		{"a traversal in the query", good + "&x=/../../uploads/abc/source", nil, http.StatusForbidden},
		{"signature padded", good + "=", nil, http.StatusForbidden},
		{"signature percent-encoded", strings.Replace(good, "sig=", "sig=%41", 1), nil, http.StatusForbidden},
		{"reordered", expires + "&" + sig + "&" + member, nil, http.StatusOK},
	} {
		target := path
		if tc.query != "" {
			target += "?" + tc.query
		}
		status, _, body := rawGet(t, f.addr, target, tc.header)
		if status != tc.want {
			t.Errorf("%s: GET %s: status %d (%s), want %d", tc.name, target, status, body, tc.want)
		}
	}

	// Expired: signed a second ago by a clock in the past.
	past := &media.Links{Signer: f.links.Signer, TTL: time.Second, Now: func() time.Time { return time.Now().Add(-time.Minute) }}
	expired, err := past.File(t.Context(), 1, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, body := rawGet(t, f.addr, expired, nil); status != http.StatusForbidden || !strings.Contains(string(body), "expired") {
		t.Errorf("expired link: status %d %s, want 403 saying it expired", status, body)
	}
	// Issued to member 2, who may not play member 1's private media: as if it did not exist.
	if status, _, _ := rawGet(t, f.addr, path+"?"+f.query(2, key), nil); status != http.StatusNotFound {
		t.Errorf("a link issued to a member who may not play the media: status %d, want 404", status)
	}
	// Signed with another secret.
	stranger := &media.Links{Signer: must(media.NewSigner([]byte("another-secret-another-secret-another-secret")))(t), TTL: time.Minute}
	forged, _ := stranger.File(t.Context(), 1, key, 0)
	if status, _, _ := rawGet(t, f.addr, forged, nil); status != http.StatusForbidden {
		t.Errorf("a link signed with another secret: status %d, want 403", status)
	}
}

// TestObjects_EveryFileTypeNeedsItsOwnSignature: each kind of file an encode or a caption track
// writes (playlists, MPEG-TS and fMP4 segments, the storyboard, its sprites, caption segments)
// opens only with a signature of its own key, for a member who may play the media. The checks
// are one code path today; this holds each file type to them, so that an exception made for one
// kind (previews are "only thumbnails") shows.
func TestObjects_EveryFileTypeNeedsItsOwnSignature(t *testing.T) {
	f := setupObjects(t)
	files := []string{"tok/master.m3u8", "tok/v0/index.m3u8", "tok/v0/seg_000.ts", "tok/v0/media.mp4",
		"tok/storyboard/storyboard.vtt", "tok/storyboard/sprite_000.jpg", "captions-0123/seg_00000.vtt"}
	for i, file := range files {
		key := fmt.Sprintf("hls/%d/%s", f.mine, file)
		other := fmt.Sprintf("hls/%d/%s", f.mine, files[(i+1)%len(files)])
		for _, tc := range []struct {
			name, query string
			want        int
		}{
			{"its own signature", f.query(1, key), http.StatusOK},
			{"no query", "", http.StatusForbidden},
			{"the member and expiry without a signature", strings.Join(strings.Split(f.query(1, key), "&")[:2], "&"), http.StatusForbidden},
			{"the signature of another file of the media", f.query(1, other), http.StatusForbidden},
			{"an altered signature", strings.Replace(f.query(1, key), "sig=", "sig=A", 1)[:len(f.query(1, key))], http.StatusForbidden},
			{"signed for a member who may not play it", f.query(2, key), http.StatusNotFound},
		} {
			target := "/objects/" + key
			if tc.query != "" {
				target += "?" + tc.query
			}
			if status, _, body := rawGet(t, f.addr, target, nil); status != tc.want {
				t.Errorf("%s with %s: status %d (%.100s), want %d", file, tc.name, status, body, tc.want)
			}
		}
	}
}

func TestObjectKey(t *testing.T) {
	for _, tc := range []struct {
		raw, key string
		id       int64
	}{
		{"/objects/hls/42/tok/master.m3u8", "hls/42/tok/master.m3u8", 42},
		{"/objects/hls/42/tok/v0/seg_001.ts", "hls/42/tok/v0/seg_001.ts", 42},
		{"/objects/hls/4%32/tok/thumb.jpg", "hls/42/tok/thumb.jpg", 42},
		{"/objects/hls/42/../43/tok/master.m3u8", "", 0},
		{"/objects/hls/42/%2e%2e/43/tok/master.m3u8", "", 0},
		{"/objects/hls/42", "", 0},
		{"/objects/hls/-1/x", "", 0},
		{"/objects/hls/+42/x", "", 0},
		{"/objects/hls/42/x%7f", "", 0},
		{"/objects/hls/42/x%zz", "", 0},
		{"/objects/other/42/x", "", 0},
	} {
		id, key, ok := media.ObjectKey(tc.raw)
		if ok != (tc.key != "") || id != tc.id || key != tc.key {
			t.Errorf("ObjectKey(%q) = %d, %q, %v; want %d, %q", tc.raw, id, key, ok, tc.id, tc.key)
		}
	}
}

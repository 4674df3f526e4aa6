package media_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
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
	token        string // member 1's
	mineBody     []byte
	secrets      [][]byte // contents no request may ever return: theirs, the source, the host file
}

func setupObjects(t *testing.T) *objectsFixture {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	store := media.NewStore(pool)
	mk := func(owner int64) int64 {
		m := must(store.Create(context.Background(), media.Media{OwnerID: owner, Title: "clip",
			Status: media.StatusReady, Visibility: media.VisibilityPrivate}))(t)
		return m.ID
	}
	f := &objectsFixture{mine: mk(1), theirs: mk(2)}
	f.token = must(auth.Mint([]byte(secret), 1, false, time.Hour))(t)

	dir := t.TempDir()
	objects := must(storage.NewLocal(filepath.Join(dir, "objects")))(t)
	put := func(key, body string) []byte {
		must(objects.Put(context.Background(), key, strings.NewReader(body)))(t)
		return []byte(body)
	}
	f.mineBody = put(fmt.Sprintf("hls/%d/tok/master.m3u8", f.mine), "#EXTM3U mine")
	put(fmt.Sprintf("hls/%d/tok/v0/seg_000.ts", f.mine), "G mine segment")
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
	verifier := must(auth.NewVerifier([]byte(secret), 0))(t)
	app := httpserver.New(httpserver.Config{BodyLimit: 1 << 16})
	(&media.ObjectsHandler{Store: objects, Access: c}).Register(app, verifier.MediaMiddleware())
	f.addr = serveApp(t, app)
	return f
}

// TestObjects_PathFormsNeverReachAnotherMedia is finding 1 of issue 11: every way of writing a
// path that climbs from a media the member may play into one it may not (or out of the HLS
// prefix, or out of the store) is 404, and no answer carries another media's bytes.
func TestObjects_PathFormsNeverReachAnotherMedia(t *testing.T) {
	f := setupObjects(t)
	mine, theirs := fmt.Sprint(f.mine), fmt.Sprint(f.theirs)
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
	}
	for _, target := range forms {
		status, _, body := rawGet(t, f.addr, target, bearer(f.token))
		if status != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404 (body %q)", target, status, body)
		}
		for _, s := range f.secrets {
			if bytes.Contains(body, s) {
				t.Errorf("GET %s: the answer carries %q, which member 1 may not read", target, s)
			}
		}
	}

	// The legitimate path works, in plain and in harmlessly encoded form, with the headers the
	// issue asks for; without a token it is 401, as for the API.
	for _, target := range []string{
		"/objects/hls/" + mine + "/tok/master.m3u8",
		"/objects/hls/%3" + mine[:1] + mine[1:] + "/tok/master%2Em3u8",
		"/objects/hls/" + mine + "/tok/master.m3u8?x=/../" + theirs,
	} {
		status, header, body := rawGet(t, f.addr, target, bearer(f.token))
		if status != http.StatusOK || !bytes.Equal(body, f.mineBody) {
			t.Errorf("GET %s: status %d body %q, want 200 %q", target, status, body, f.mineBody)
			continue
		}
		for k, want := range map[string]string{
			"Content-Type":           "application/vnd.apple.mpegurl",
			"X-Content-Type-Options": "nosniff",
			"Cache-Control":          "private, max-age=3600",
		} {
			if got := header.Get(k); got != want {
				t.Errorf("GET %s: %s %q, want %q", target, k, got, want)
			}
		}
	}
	status, header, _ := rawGet(t, f.addr, "/objects/hls/"+mine+"/tok/v0/seg_000.ts", bearer(f.token))
	if status != http.StatusOK || header.Get("Content-Type") != "video/mp2t" {
		t.Errorf("segment: status %d Content-Type %q, want 200 video/mp2t", status, header.Get("Content-Type"))
	}
	if status, _, _ := rawGet(t, f.addr, "/objects/hls/"+mine+"/tok/master.m3u8", nil); status != http.StatusUnauthorized {
		t.Errorf("without a token: status %d, want 401", status)
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

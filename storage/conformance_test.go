package storage_test

// One conformance suite for every backend (litestream's way): what the rest of Playhead relies
// on from a Store, run against Local (a directory) and S3 (SeaweedFS, internal/s3test).

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestStore_Conformance(t *testing.T) {
	for name, newStore := range s3test.Backends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, c := range conformanceCases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, newStore(t))
				})
			}
		})
	}
}

var conformanceCases = []struct {
	name string
	run  func(t *testing.T, st storage.Store)
}{
	{"PutThenOpen", testPutThenOpen},
	{"PutReplaces", testPutReplaces},
	{"OpenMissing", testOpenMissing},
	{"BadKeys", testBadKeys},
	{"FailedPutLeavesNothing", testFailedPutLeavesNothing},
	{"CancelledPutLeavesNothing", testCancelledPutLeavesNothing},
	{"LargeStream", testLargeStream},
	{"FileFromItsOffset", testFileFromItsOffset},
	{"EmptyObject", testEmptyObject},
	{"DeletePrefix", testDeletePrefix},
	{"Children", testChildren},
	{"ListInKeyOrder", testListInKeyOrder},
	{"ListResumesAfter", testListResumesAfter},
}

func put(t *testing.T, st storage.Store, key, body string) {
	t.Helper()
	n, err := st.Put(t.Context(), key, strings.NewReader(body))
	if err != nil || n != int64(len(body)) {
		t.Fatalf("Put %s: %d bytes, %v; want %d", key, n, err, len(body))
	}
}

func read(t *testing.T, st storage.Store, key string) string {
	t.Helper()
	r, err := st.Open(t.Context(), key)
	if err != nil {
		t.Fatalf("Open %s: %v", key, err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", key, err)
	}
	return string(b)
}

func keys(t *testing.T, st storage.Store, prefix, after string) []string {
	t.Helper()
	var out []string
	for obj, err := range st.List(t.Context(), prefix, after) {
		if err != nil {
			t.Fatalf("List %q after %q: %v", prefix, after, err)
		}
		out = append(out, obj.Key)
	}
	return out
}

func missing(t *testing.T, st storage.Store, key string) {
	t.Helper()
	r, err := st.Open(t.Context(), key)
	if err == nil {
		r.Close()
		t.Fatalf("Open %s: found, want fs.ErrNotExist", key)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open %s: %v, want fs.ErrNotExist", key, err)
	}
}

func testPutThenOpen(t *testing.T, st storage.Store) {
	put(t, st, "hls/1/tok/master.m3u8", "#EXTM3U\n")
	put(t, st, "hls/1/tok/v0/seg_000.ts", "segment")
	if got := read(t, st, "hls/1/tok/master.m3u8"); got != "#EXTM3U\n" {
		t.Fatalf("read back %q", got)
	}
	if got := read(t, st, "hls/1/tok/v0/seg_000.ts"); got != "segment" {
		t.Fatalf("read back %q", got)
	}
}

func testPutReplaces(t *testing.T, st storage.Store) {
	put(t, st, "uploads/x/source", "first version, longer")
	put(t, st, "uploads/x/source", "second")
	if got := read(t, st, "uploads/x/source"); got != "second" {
		t.Fatalf("after a second Put: %q, want the second version", got)
	}
}

func testOpenMissing(t *testing.T, st storage.Store) {
	missing(t, st, "hls/1/nothing/here.ts")
	put(t, st, "hls/1/tok/a.ts", "a")
	missing(t, st, "hls/1/tok")     // a folder is not an object
	missing(t, st, "hls/1/tok/a.t") // nor is a prefix of a key
}

func testBadKeys(t *testing.T, st storage.Store) {
	ctx := t.Context()
	for _, key := range []string{"", "/etc/passwd", "..", "../x", "a/../../x", "a//b", "a/./b"} {
		if _, err := st.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, storage.ErrBadKey) {
			t.Errorf("Put %q: %v, want ErrBadKey", key, err)
		}
		if _, err := st.Open(ctx, key); !errors.Is(err, storage.ErrBadKey) {
			t.Errorf("Open %q: %v, want ErrBadKey", key, err)
		}
		if err := st.DeletePrefix(ctx, key); !errors.Is(err, storage.ErrBadKey) {
			t.Errorf("DeletePrefix %q: %v, want ErrBadKey (never the whole store)", key, err)
		}
		if _, err := st.Children(ctx, key); !errors.Is(err, storage.ErrBadKey) {
			t.Errorf("Children %q: %v, want ErrBadKey", key, err)
		}
		if key == "" {
			continue // List's "everything"
		}
		for _, err := range st.List(ctx, key, "") {
			if !errors.Is(err, storage.ErrBadKey) {
				t.Errorf("List %q: %v, want ErrBadKey", key, err)
			}
		}
	}
}

// failingReader gives n bytes, then fails.
type failingReader struct{ n int }

var errClientGone = errors.New("the client went away")

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, errClientGone
	}
	k := min(len(p), f.n)
	clear(p[:k])
	f.n -= k
	return k, nil
}

func testFailedPutLeavesNothing(t *testing.T, st storage.Store) {
	put(t, st, "uploads/f/other", "kept")
	// 9 MiB: past one S3 part, so the failure comes mid-way through a multipart upload.
	if _, err := st.Put(t.Context(), "uploads/f/source", &failingReader{n: 9 << 20}); err == nil {
		t.Fatal("Put of a failing reader succeeded")
	}
	missing(t, st, "uploads/f/source")
	if got := keys(t, st, "uploads/", ""); !slices.Equal(got, []string{"uploads/f/other"}) {
		t.Fatalf("after a failed Put the store lists %q, want only the other object", got)
	}
}

// blockingReader gives n bytes, then waits for its context.
type blockingReader struct {
	ctx context.Context
	n   int
	hit chan struct{}
}

func (b *blockingReader) Read(p []byte) (int, error) {
	if b.n == 0 {
		close(b.hit)
		<-b.ctx.Done()
		return 0, b.ctx.Err()
	}
	k := min(len(p), b.n)
	clear(p[:k])
	b.n -= k
	return k, nil
}

func testCancelledPutLeavesNothing(t *testing.T, st storage.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	r := &blockingReader{ctx: ctx, n: 9 << 20, hit: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := st.Put(ctx, "uploads/c/source", r)
		done <- err
	}()
	<-r.hit // the store has read everything there was
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled Put succeeded")
	}
	missing(t, st, "uploads/c/source")
	if got := keys(t, st, "", ""); len(got) != 0 {
		t.Fatalf("after a cancelled Put the store lists %q", got)
	}
}

// pattern is a reader of n bytes that are not all alike.
func pattern(n int) io.Reader {
	block := make([]byte, 64<<10)
	for i := range block {
		block[i] = byte(i * 7)
	}
	return io.LimitReader(repeatReader(block), int64(n))
}

type repeatReader []byte

func (r repeatReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], r)
	}
	return n, nil
}

func testLargeStream(t *testing.T, st storage.Store) {
	const size = 20<<20 + 12345 // three S3 parts, the last one short
	n, err := st.Put(t.Context(), "uploads/big/source", pattern(size))
	if err != nil || n != size {
		t.Fatalf("Put: %d bytes, %v; want %d", n, err, size)
	}
	want := sha256.New()
	_, _ = io.Copy(want, pattern(size))
	r, err := st.Open(t.Context(), "uploads/big/source")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got := sha256.New()
	if m, err := io.Copy(got, r); err != nil || m != size {
		t.Fatalf("read back %d bytes, %v", m, err)
	}
	if !bytes.Equal(got.Sum(nil), want.Sum(nil)) {
		t.Fatal("read back other bytes than were put")
	}
}

func testFileFromItsOffset(t *testing.T, st storage.Store) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("skipped|stored"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(int64(len("skipped|")), io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := st.Put(t.Context(), "uploads/file/source", f); err != nil || n != int64(len("stored")) {
		t.Fatalf("Put of a file at an offset: %d, %v", n, err)
	}
	if got := read(t, st, "uploads/file/source"); got != "stored" {
		t.Fatalf("read back %q, want what follows the file's offset", got)
	}
}

func testEmptyObject(t *testing.T, st storage.Store) {
	put(t, st, "hls/3/tok/empty.ts", "")
	if got := read(t, st, "hls/3/tok/empty.ts"); got != "" {
		t.Fatalf("read back %q", got)
	}
}

func testDeletePrefix(t *testing.T, st storage.Store) {
	for _, k := range []string{"hls/4/a/x", "hls/4/a/y/z", "hls/42/a/x", "hls/4/ab/x", "hls/4/b/x"} {
		put(t, st, k, k)
	}
	ctx := t.Context()
	if err := st.DeletePrefix(ctx, "hls/4/a/"); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, st, "", ""); !slices.Equal(got, []string{"hls/4/ab/x", "hls/4/b/x", "hls/42/a/x"}) {
		t.Fatalf("after DeletePrefix hls/4/a/: %q", got)
	}
	// Without the slash the prefix is still a folder: hls/42/ is not under hls/4.
	if err := st.DeletePrefix(ctx, "hls/4/b"); err != nil {
		t.Fatal(err)
	}
	if got := keys(t, st, "", ""); !slices.Equal(got, []string{"hls/4/ab/x", "hls/42/a/x"}) {
		t.Fatalf("after DeletePrefix hls/4/b: %q", got)
	}
	if err := st.DeletePrefix(ctx, "hls/nothing/here/"); err != nil {
		t.Fatalf("DeletePrefix of a missing prefix: %v", err)
	}
}

func testChildren(t *testing.T, st storage.Store) {
	for _, k := range []string{"hls/7/t1/master.m3u8", "hls/7/t1/v0/a.ts", "hls/7/t2/x", "hls/7/loose", "hls/70/t9/x"} {
		put(t, st, k, "x")
	}
	got, err := st.Children(t.Context(), "hls/7/")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"loose", "t1", "t2"}) {
		t.Fatalf("Children(hls/7/) = %q", got)
	}
	if got, err := st.Children(t.Context(), "hls/nothing/"); err != nil || len(got) != 0 {
		t.Fatalf("Children of a missing prefix: %q, %v", got, err)
	}
}

// listKeys sort differently as keys ("a/b" after "a.b") than as a directory walk by name.
var listKeys = []string{"l/a/b", "l/a.b", "l/a0", "l/a/c/d", "l/b", "l/a-", "l/a/c.e", "l/z/y/x/w"}

func testListInKeyOrder(t *testing.T, st storage.Store) {
	before := time.Now().Add(-time.Minute) // the store's clock may be a little behind ours
	for i, k := range listKeys {
		put(t, st, k, strings.Repeat("x", i+1))
	}
	put(t, st, "m/outside", "x")
	want := slices.Sorted(slices.Values(listKeys))
	var got []string
	for obj, err := range st.List(t.Context(), "l/", "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, obj.Key)
		if size := int64(slices.Index(listKeys, obj.Key) + 1); obj.Size != size {
			t.Errorf("%s: size %d, want %d", obj.Key, obj.Size, size)
		}
		if obj.ModTime.Before(before) || obj.ModTime.After(time.Now().Add(time.Minute)) {
			t.Errorf("%s: modified at %s, want about now", obj.Key, obj.ModTime)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List(l/) = %q, want %q", got, want)
	}
	if all := keys(t, st, "", ""); len(all) != len(listKeys)+1 {
		t.Fatalf("List of everything: %q", all)
	}
	// Stopping early ends the listing.
	n := 0
	for range st.List(t.Context(), "l/", "") {
		n++
		if n == 2 {
			break
		}
	}
}

func testListResumesAfter(t *testing.T, st storage.Store) {
	for _, k := range listKeys {
		put(t, st, k, "x")
	}
	sorted := slices.Sorted(slices.Values(listKeys))
	for i, after := range sorted {
		if got := keys(t, st, "l/", after); !slices.Equal(got, sorted[i+1:]) {
			t.Errorf("List after %q = %q, want %q", after, got, sorted[i+1:])
		}
	}
	// After a key that is not stored: from the next one that is.
	if got := keys(t, st, "l/", "l/a/bb"); !slices.Equal(got, []string{"l/a/c.e", "l/a/c/d", "l/a0", "l/b", "l/z/y/x/w"}) {
		t.Errorf("List after l/a/bb = %q", got)
	}
}

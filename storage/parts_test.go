package storage_test

import (
	"bytes"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
)

// partsBackends returns, per backend, two stores on the same place (a directory, a bucket):
// two nodes, of which one may start a write and the other finish it.
func partsBackends() map[string]func(t *testing.T) (storage.Parts, storage.Parts) {
	return map[string]func(t *testing.T) (storage.Parts, storage.Parts){
		"Local": func(t *testing.T) (storage.Parts, storage.Parts) {
			dir := t.TempDir()
			a, err := storage.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := storage.NewLocal(dir)
			return a, b
		},
		"S3": func(t *testing.T) (storage.Parts, storage.Parts) {
			a, bucket := s3test.Store(t)
			b, err := storage.NewS3(t.Context(), s3test.Shared(t).Config(bucket))
			if err != nil {
				t.Fatal(err)
			}
			return a, b
		},
	}
}

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func putPart(t *testing.T, st storage.Parts, key, id string, n int, b []byte) storage.Part {
	t.Helper()
	p, err := st.PutPart(t.Context(), key, id, n, bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("PutPart %d: %v", n, err)
	}
	if p.Number != n || p.Size != int64(len(b)) || p.ETag == "" {
		t.Fatalf("PutPart %d gave %+v", n, p)
	}
	return p
}

func TestParts(t *testing.T) {
	for name, newStores := range partsBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// Parts written by one node and completed by another make the object of their
			// bytes in order, and leave nothing else behind under the object's folder.
			t.Run("CompletedOnAnotherNode", func(t *testing.T) {
				t.Parallel()
				a, b := newStores(t)
				const key = "tus/u1/source"
				id, err := a.StartParts(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				one, two, last := randomBytes(t, storage.MinPartSize), randomBytes(t, storage.MinPartSize), randomBytes(t, 1234)
				parts := []storage.Part{putPart(t, a, key, id, 1, one), putPart(t, b, key, id, 2, two), putPart(t, a, key, id, 3, last)}
				if err := b.CompleteParts(t.Context(), key, id, parts); err != nil {
					t.Fatal(err)
				}
				want := slices.Concat(one, two, last)
				if got := read(t, a.(storage.Store), key); got != string(want) {
					t.Fatalf("the completed object holds %d bytes, not the %d of its parts in order", len(got), len(want))
				}
				if got := keys(t, a.(storage.Store), "tus/u1/", ""); !slices.Equal(got, []string{key}) {
					t.Errorf("after completion the folder holds %q, want only the object", got)
				}
				if left := unfinished(t, a); len(left) != 0 {
					t.Errorf("unfinished writes after completion: %q", left)
				}
			})
			// A part number written again (two writers racing) does not mix the bytes of the
			// two: the object holds the part that was completed, whole.
			t.Run("PartWrittenTwice", func(t *testing.T) {
				t.Parallel()
				a, _ := newStores(t)
				const key = "tus/u2/source"
				id, err := a.StartParts(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				putPart(t, a, key, id, 1, bytes.Repeat([]byte{'a'}, 100))
				second := putPart(t, a, key, id, 1, bytes.Repeat([]byte{'b'}, 100))
				if err := a.CompleteParts(t.Context(), key, id, []storage.Part{second}); err != nil {
					t.Fatal(err)
				}
				if got := read(t, a.(storage.Store), key); got != strings.Repeat("b", 100) {
					t.Fatalf("the object holds %q, want the part completed", got)
				}
			})
			// A part whose reader ends before its size is refused and stored as nothing.
			t.Run("ShortPartRefused", func(t *testing.T) {
				t.Parallel()
				a, _ := newStores(t)
				const key = "tus/u3/source"
				id, err := a.StartParts(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.PutPart(t.Context(), key, id, 1, strings.NewReader("short"), 100); err == nil {
					t.Fatal("a part of 5 bytes announced as 100 was stored")
				}
				if got := keys(t, a.(storage.Store), "tus/u3/", ""); len(got) != 0 {
					t.Errorf("a refused part left %q", got)
				}
			})
			// An aborted write leaves nothing; aborting it again is no error.
			t.Run("Abort", func(t *testing.T) {
				t.Parallel()
				a, b := newStores(t)
				const key = "tus/u4/source"
				id, err := a.StartParts(t.Context(), key)
				if err != nil {
					t.Fatal(err)
				}
				putPart(t, a, key, id, 1, randomBytes(t, 1000))
				for range 2 {
					if err := b.AbortParts(t.Context(), key, id); err != nil {
						t.Fatalf("AbortParts: %v", err)
					}
				}
				if got := keys(t, a.(storage.Store), "tus/", ""); len(got) != 0 {
					t.Errorf("an aborted write left %q", got)
				}
				if left := unfinished(t, a); len(left) != 0 {
					t.Errorf("an aborted write is still unfinished: %q", left)
				}
				if _, err := a.(storage.Store).Open(t.Context(), key); err == nil {
					t.Error("an aborted write became an object")
				}
			})
		})
	}
}

// farFuture is a cutoff after every write's start.
var farFuture = time.Now().Add(24 * time.Hour)

// unfinished lists the unfinished writes of st (none for a store without them).
func unfinished(t *testing.T, st storage.Parts) []string {
	t.Helper()
	u, ok := st.(storage.UnfinishedWrites)
	if !ok {
		return nil
	}
	var out []string
	for w, err := range u.Unfinished(t.Context(), "", farFuture) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, w.Key)
	}
	return out
}

package mediadelete_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/s3test"
	"github.com/playhead/playhead/storage"
)

// flaky fails the removals under uploads/ the first fails times, then works: a store that
// breaks in the middle of a deletion job.
type flaky struct {
	storage.Store
	mu    sync.Mutex
	fails int
}

func (f *flaky) DeletePrefix(ctx context.Context, prefix string) error {
	f.mu.Lock()
	if f.fails > 0 && strings.HasPrefix(prefix, "uploads/") {
		f.fails--
		f.mu.Unlock()
		return errors.New("store down")
	}
	f.mu.Unlock()
	return f.Store.DeletePrefix(ctx, prefix)
}

// TestDeleteJob_LeavesNeighbouringMediaAndSurvivesAFailingStore: the deletion of media 1
// removes hls/1/ and uploads/u1/ and nothing of media 10, 11 and 100, whose folders share
// those prefixes as strings (on S3 a prefix is a string, not a folder); and a store that fails
// half-way through (the hls folder removed, the source not) makes the job retry, and the retry
// finishes the work.
func TestDeleteJob_LeavesNeighbouringMediaAndSurvivesAFailingStore(t *testing.T) {
	for name, open := range s3test.Backends() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			pool, _ := pgtest.Pool(t)
			st := open(t)
			exec(t, pool, `INSERT INTO members (id) VALUES (3)`)
			for _, id := range []int64{1, 10, 100, 11} {
				exec(t, pool, `INSERT INTO media (id, owner_id, title, status, visibility, source_key) OVERRIDING SYSTEM VALUE VALUES ($1, 3, 'x', 'READY', 'PUBLIC', $2)`,
					id, fmt.Sprintf("uploads/u%d/source", id))
				for _, k := range []string{fmt.Sprintf("hls/%d/c/seg.ts", id), fmt.Sprintf("hls/%d/captions-x/en.vtt", id), fmt.Sprintf("uploads/u%d/source", id)} {
					if _, err := st.Put(ctx, k, strings.NewReader(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
			f := &flaky{Store: st, fails: 3}
			if err := deleteMedia(ctx, pool, 1); err != nil {
				t.Fatal(err)
			}
			startDeletions(t, pool, f, prometheus.NewRegistry())
			deletionDone(t, pool, 1)
			all := keys(t, st)
			if left := under(all, "hls/1/", "uploads/u1/"); len(left) > 0 {
				t.Errorf("left: %q", left)
			}
			for _, id := range []int64{10, 100, 11} {
				for _, k := range []string{fmt.Sprintf("hls/%d/c/seg.ts", id), fmt.Sprintf("hls/%d/captions-x/en.vtt", id), fmt.Sprintf("uploads/u%d/source", id)} {
					if !slices.Contains(all, k) {
						t.Errorf("neighbour object %s removed", k)
					}
				}
			}
			if n := count(t, pool, `SELECT attempt_count FROM jobs WHERE kind = 'media_delete'`); n < 2 {
				t.Errorf("attempts %d: the store failure did not make it retry", n)
			}
		})
	}
}

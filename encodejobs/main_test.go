package encodejobs_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/internal/testvideo"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/storage"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// quiet keeps expected job failures out of the test output unless -v.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))

type bundle struct {
	pool  *pgxpool.Pool
	media *media.Store
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool, _ := pgtest.Pool(t)
	return &bundle{pool: pool, media: media.NewStore(pool)}
}

func (b *bundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it is true, failing after a generous safety-net limit.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRunner runs kind on a queue of its own over b's pool until the test ends, or until the
// test stops it.
func startRunner(t *testing.T, b *bundle, kind jobqueue.Kind) *jobqueue.Runner {
	t.Helper()
	q, err := jobqueue.NewQueue(b.pool, time.Minute, kind)
	if err != nil {
		t.Fatal(err)
	}
	r, err := jobqueue.NewRunner(q, jobqueue.RunnerConfig{Kind: kind.Name, Node: "n", PollInterval: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Stop(context.Background()) })
	return r
}

// uploaded is an upload waiting for its encode: a generated source of spec stored in a local
// store under dir (uploads/x/source), a PROCESSING media of member 3 naming it, and its encode
// job, committed with the source key as the upload handler commits them.
func uploaded(t *testing.T, b *bundle, dir string, spec testvideo.Spec) (*storage.Local, media.Media) {
	t.Helper()
	store, err := storage.NewLocal(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := storage.PutFile(ctx, store, "uploads/x/source", testvideo.MP4(t, dir, spec)); err != nil {
		t.Fatal(err)
	}
	m, err := b.media.Create(ctx, media.Media{OwnerID: 3, Title: "clip", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
	if err != nil {
		t.Fatal(err)
	}
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE media SET source_key = 'uploads/x/source' WHERE id = $1`, m.ID); err != nil {
			return err
		}
		// As an upload's commit enqueues it: in its owner's partition.
		spec, err := media.EncodeSpec(encodejobs.KindEncode, m.ID, 3, media.JobPartition(m.OwnerID, false))
		if err != nil {
			return err
		}
		_, err = jobqueue.Insert(ctx, tx, spec)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return store, m
}

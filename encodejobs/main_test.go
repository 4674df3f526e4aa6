package encodejobs_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/encodejobs"
	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/media"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// quiet keeps expected job failures out of the test output unless -v.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))

type bundle struct {
	pool  *pgxpool.Pool
	url   string
	queue *encodejobs.Queue
	media *media.Store
}

func setup(t *testing.T, lease time.Duration) *bundle {
	t.Helper()
	pool, url := pgtest.Pool(t)
	return &bundle{pool: pool, url: url, queue: encodejobs.NewQueue(pool, lease), media: media.NewStore(pool)}
}

// enqueue creates n PROCESSING media of member 1, each with a job of kind.
func (b *bundle) enqueue(t *testing.T, kind string, n int) []int64 {
	t.Helper()
	var mediaIDs []int64
	for range n {
		m, err := b.media.Create(context.Background(), media.Media{OwnerID: 1, Title: "upload", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
		if err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := encodejobs.Enqueue(context.Background(), tx, kind, m.ID, 3)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		mediaIDs = append(mediaIDs, m.ID)
	}
	return mediaIDs
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

func startWorker(t *testing.T, q *encodejobs.Queue, cfg encodejobs.WorkerConfig, kinds ...encodejobs.Kind) *encodejobs.Worker {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	w, err := encodejobs.NewWorker(q, cfg, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	w.Start()
	t.Cleanup(func() { _ = w.Stop(context.Background()) })
	return w
}

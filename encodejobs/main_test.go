package encodejobs_test

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
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

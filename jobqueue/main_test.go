package jobqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/playhead/playhead/internal/pgtest"
	"github.com/playhead/playhead/jobqueue"
	"github.com/playhead/playhead/media"
	"github.com/playhead/playhead/notify"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envSchedulerURL); url != "" {
		if err := runSchedulerNode(url); err != nil {
			fmt.Fprintln(os.Stderr, "scheduler node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if spec := os.Getenv(envNode); spec != "" {
		if err := runNode(spec); err != nil {
			fmt.Fprintln(os.Stderr, "node:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	pgtest.Main(m)
}

// quiet keeps expected job failures out of the test output unless -v.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 1}))

// The tests run the queue with the real domain hooks of the media kinds (media.JobKind): the
// lock order members → media → jobs, media FAILED and one outbox row on DEAD.
type bundle struct {
	pool  *pgxpool.Pool
	url   string
	media *media.Store
}

func setup(t testing.TB) *bundle {
	t.Helper()
	pool, url := pgtest.Pool(t)
	return &bundle{pool: pool, url: url, media: media.NewStore(pool)}
}

// queue returns a queue on pool with the given lease and kinds.
func newQueue(t testing.TB, pool *pgxpool.Pool, lease time.Duration, kinds ...jobqueue.Kind) *jobqueue.Queue {
	t.Helper()
	q, err := jobqueue.NewQueue(pool, lease, kinds...)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// mediaKind is a kind about media (media.JobKind's hooks) with run as its Run.
func mediaKind(name string, run func(ctx context.Context, j jobqueue.Job) (jobqueue.Result, error)) jobqueue.Kind {
	k := media.JobKind(name)
	k.Run = run
	return k
}

// enqueue creates n PROCESSING media of member 1, each with a job of kind, and returns the
// media ids.
func (b *bundle) enqueue(t testing.TB, kind string, n int) []int64 {
	t.Helper()
	var mediaIDs []int64
	for range n {
		m, err := b.media.Create(context.Background(), media.Media{OwnerID: 1, Title: "upload", Status: media.StatusProcessing, Visibility: media.VisibilityPrivate})
		if err != nil {
			t.Fatal(err)
		}
		err = pgx.BeginFunc(context.Background(), b.pool, func(tx pgx.Tx) error {
			_, err := jobqueue.Enqueue(context.Background(), tx, kind, m.ID, 3)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		mediaIDs = append(mediaIDs, m.ID)
	}
	return mediaIDs
}

func (b *bundle) count(t testing.TB, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// expireLeases makes every PROCESSING job's lease run out, as if its worker had gone silent
// for a whole lease, and longer ago than any lost-lease back-off, so a claim may take it.
func (b *bundle) expireLeases(t testing.TB) {
	t.Helper()
	if _, err := b.pool.Exec(context.Background(),
		`UPDATE jobs SET lease_until = statement_timestamp() - $1::interval WHERE status = 'PROCESSING'`, jobqueue.LostLeaseBackoffCap+time.Millisecond); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond until it is true, failing after a generous safety-net limit.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startRunner starts a runner of cfg.Kind on q until the test ends.
func startRunner(t testing.TB, q *jobqueue.Queue, cfg jobqueue.RunnerConfig) *jobqueue.Runner {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quiet
	}
	r, err := jobqueue.NewRunner(q, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := r.Stop(ctx); err != nil {
			t.Errorf("stop runner: %v", err)
		}
	})
	return r
}

// startListener listens on channel until the test ends.
func startListener(t testing.TB, url, channel string, onPayload func(string), onConnect func()) {
	t.Helper()
	l := notify.NewListener(url, quiet)
	l.Handle(channel, onPayload, onConnect)
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Stop(context.Background()) })
}

func fmtHostPort(host string, port uint16) string {
	return net.JoinHostPort(host, strconv.Itoa(int(port)))
}

// receive waits for a value from ch, failing after a generous safety-net limit.
func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(60 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		panic("unreachable")
	}
}
